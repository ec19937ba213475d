"""The stall watch and the engine cache's restart of a dead engine, without vLLM (the real
engine stopped with SIGSTOP is in tests/pipeline/test_pipeline_stall.py)."""

from __future__ import annotations

import threading

import pytest

import specdec.engine_cache as engine_cache
import specdec.engines.vllm_engine as vllm_engine
from specdec.engines.stall import StallWatch
from specdec.params import GenerationParams


def test_the_watch_fires_once_when_nothing_progresses():
    fired = threading.Event()
    with StallWatch(0.2, fired.set) as watch:
        assert fired.wait(30)
    assert watch.stalled


def test_progress_keeps_the_watch_quiet_and_leaving_stops_it():
    fired = []
    with StallWatch(30.0, lambda: fired.append(1)) as watch:
        for _ in range(3):
            watch.progress()
    assert not watch.stalled and fired == []
    assert watch._thread is not None and not watch._thread.is_alive()


def test_a_paused_watch_waits_for_no_engine_and_progress_arms_it_again():
    fired = threading.Event()
    with StallWatch(0.2, fired.set) as watch:
        watch.pause()  # the engine holds no work: nothing is expected of it
        assert not fired.wait(0.6)
        watch.progress()
        assert fired.wait(30)
    assert watch.stalled


class FakeEngine:
    started: list["FakeEngine"] = []

    def __init__(self, engine_config, spec) -> None:
        self.alive = True
        self.closed = False
        FakeEngine.started.append(self)

    def close(self) -> None:
        self.closed = True
        self.alive = False


def test_a_dead_engine_is_replaced_by_a_new_one(monkeypatch):
    monkeypatch.setattr(vllm_engine, "VllmEngine", FakeEngine)
    monkeypatch.setattr(engine_cache, "_ENGINES", {})
    params = GenerationParams(method="none")
    first, _ = engine_cache.get_engine(params)
    assert engine_cache.get_engine(params)[0] is first  # reused while alive
    first.alive = False  # stopped for making no progress
    second, _ = engine_cache.get_engine(params)
    assert second is not first and first.closed and FakeEngine.started == [first, second]
    engine_cache.close_engines()
    assert second.closed and engine_cache._ENGINES == {}


def test_closing_on_interrupt_closes_only_for_interruptions(monkeypatch):
    closed = []
    monkeypatch.setattr(engine_cache, "close_engines", lambda: closed.append(1))
    with pytest.raises(ValueError), engine_cache.closing_on_interrupt():
        raise ValueError("a bad shard")  # the engine stays for the next shard
    assert closed == []
    with pytest.raises(KeyboardInterrupt), engine_cache.closing_on_interrupt():
        raise KeyboardInterrupt
    assert closed == [1]
