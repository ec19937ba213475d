"""Stopping a vLLM engine honours vLLM's own stop grace (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS):
vLLM's explicit shutdown() otherwise waits a fixed 5 s before it kills what is left."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdec.engines import vllm_engine


class Core:
    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    def shutdown(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)


def closed_with(monkeypatch) -> Core:
    core = Core()
    engine = object.__new__(vllm_engine.VllmEngine)  # no vLLM engine behind it
    engine.llm = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=core))
    engine.processes = []
    monkeypatch.setattr(vllm_engine.processes, "stop", lambda procs: None)
    engine.close()
    assert engine.alive is False
    return core


@pytest.mark.parametrize(("setting", "grace"), [(None, 5), ("1", 1), ("30", 30)])
def test_close_waits_vllms_own_grace(monkeypatch, setting, grace):
    if setting is None:
        monkeypatch.delenv("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", raising=False)
    else:
        monkeypatch.setenv("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", setting)
    assert closed_with(monkeypatch).timeouts == [grace]
