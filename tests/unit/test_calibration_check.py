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
    steps to the worker's calibration samples, each `step_s` plus `token_s` per scheduled token
    (rows and the draft tokens forced on each)."""

    def __init__(self, step_s: float, token_s: float = 0.0) -> None:
        self.step_s = step_s
        self.token_s = token_s
        self.generations = 0
        self._samples: list[dict[str, float]] = []
        self._forced: int | None = None  # draft tokens forced on each row while calibrating

    def get_tokenizer(self):
        return type("Tokenizer", (), {"vocab_size": 1000})()

    def collective_rpc(self, method, args=()):
        if method.__name__ == "load_calibration":
            self._samples = list(args[0])
            return [True]
        if method.__name__ == "start_calibration":
            self._forced = args[0]
            return [True]
        assert method.__name__ == "finish_calibration", method
        self._forced = None
        return [list(self._samples)]

    def generate(self, prompts, params, use_tqdm=False):
        assert self._forced is not None
        self.generations += 1
        rows, tokens = len(prompts), len(prompts) * (1 + self._forced)
        self._samples += [dict(num_seqs=rows, num_tokens=tokens, num_kv_tokens=32 * rows,
                               num_draft_kv_tokens=32 * rows if self._forced else 0,
                               seconds=self.step_s + self.token_s * tokens)] * (calibration.STEPS - 1)


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
    run.num_checks = len(calibration.check_runs(engine.max_num_seqs, K_MAX, engine.max_model_len))
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

    later = FakeLlm(0.06)  # within the tolerance: the short check runs, the cache kept
    calibrate(later, new_process=True)
    assert later.generations == calibrate.num_checks == 2 and _cached_step_s(path) == {0.05}


@pytest.mark.parametrize("step_s", [0.2, 0.01], ids=["measured-idle-now-loaded", "measured-loaded-now-idle"])
def test_a_calibration_off_from_todays_steps_is_measured_again(calibrate, step_s):
    path = calibrate(FakeLlm(0.05))
    changed = FakeLlm(step_s)
    calibrate(changed, new_process=True)
    assert changed.generations == calibrate.num_checks + calibrate.num_runs
    assert _cached_step_s(path) == {step_s}


def test_a_set_whose_drafted_steps_were_timed_under_load_is_measured_again(calibrate):
    # Timed while another process ran: steps of many tokens 10x dearer per token than today,
    # a one-row step (what a check of the lightest run alone compares) within 20 % of today's.
    loaded = FakeLlm(0.05, token_s=0.01)
    path = calibrate(loaded)
    today = FakeLlm(0.05, token_s=0.001)
    assert (loaded.step_s + loaded.token_s) / (today.step_s + today.token_s) < calibration.STALE_FACTOR
    calibrate(today, new_process=True)
    assert today.generations == calibrate.num_checks + calibrate.num_runs
    assert max(_cached_step_s(path)) < 0.05 + 0.01 * 16  # today's: the heaviest step of 16 rows x 5 tokens


def test_the_check_runs_are_the_lightest_run_and_the_largest_batch_with_k_max_drafts():
    prompt = calibration.PROMPT_TOKENS
    assert calibration.check_runs(16, 4, 2048) == [(1, 0, prompt), (16, 4, prompt)]
    # a large batch (a GPU's) is calibrated without drafts too: the check still takes a drafted run
    assert calibration.check_runs(256, 8, 8192) == [(1, 0, prompt), (16, 8, prompt)]
