"""A cached step-cost calibration is checked once per process against a fresh short run, and
measured again when the machine's step time moved (specdec.engines.calibration)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec.config import EngineConfig
from specdec.engines import calibration
from specdec.engines.drafter_handle import DrafterHandle

K_MAX = 4


class FakeLlm:
    """vLLM's `LLM` as calibration drives it: every generation gives `STEPS - 1` clean decode
    steps of `step_s` seconds each to the worker's calibration samples."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.generations = 0
        self._samples: list[dict[str, float]] = []
        self._calibrating = False

    def get_tokenizer(self):
        return type("Tokenizer", (), {"vocab_size": 1000})()

    def collective_rpc(self, method, args=()):
        if method.__name__ == "load_calibration":
            self._samples = list(args[0])
            return [True]
        if method.__name__ == "start_calibration":
            self._calibrating = True
            return [True]
        assert method.__name__ == "finish_calibration", method
        self._calibrating = False
        return [list(self._samples)]

    def generate(self, prompts, params, use_tqdm=False):
        assert self._calibrating
        self.generations += 1
        self._samples += [dict(num_seqs=len(prompts), num_tokens=len(prompts), num_kv_tokens=32 * len(prompts),
                               num_draft_kv_tokens=0, seconds=self.step_s)] * (calibration.STEPS - 1)


@pytest.fixture
def calibrate(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path))
    monkeypatch.setattr(calibration, "_checked", set())
    engine = EngineConfig(max_num_seqs=16, max_model_len=2048)
    num_runs = len(calibration.calibration_runs(engine.max_num_seqs, K_MAX, engine.max_model_len))

    def run(llm: FakeLlm, new_process: bool = False) -> Path:
        if new_process:
            calibration._checked.clear()
        calibration.calibrate(llm, DrafterHandle(llm), engine, Path("model"), K_MAX, {})
        return calibration.calibration_path(engine, Path("model"), K_MAX, {})

    run.num_runs = num_runs
    return run


def _cached_step_s(path: Path) -> set[float]:
    return {s["seconds"] for s in json.loads(path.read_text())["steps"]}


def test_a_cached_calibration_is_checked_once_per_process(calibrate):
    first = FakeLlm(0.05)
    path = calibrate(first)
    assert first.generations == calibrate.num_runs and _cached_step_s(path) == {0.05}

    same_process = FakeLlm(0.05)
    calibrate(same_process)  # measured in this process: no check
    assert same_process.generations == 0

    later = FakeLlm(0.06)  # within the tolerance: one short check run, the cache kept
    calibrate(later, new_process=True)
    assert later.generations == 1 and _cached_step_s(path) == {0.05}


@pytest.mark.parametrize("step_s", [0.2, 0.01], ids=["measured-idle-now-loaded", "measured-loaded-now-idle"])
def test_a_calibration_off_from_todays_steps_is_measured_again(calibrate, step_s):
    path = calibrate(FakeLlm(0.05))
    changed = FakeLlm(step_s)
    calibrate(changed, new_process=True)
    assert changed.generations == 1 + calibrate.num_runs
    assert _cached_step_s(path) == {step_s}
