"""The worker-side step recorder on a stand-in model runner (vLLM's calls, in its order)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from specdec.engines.step_profile import StepRecorder, start_recording, take_records


class StandInRunner:
    """execute_model, then sample_tokens, which calls propose_draft_token_ids (as vLLM does)."""

    def execute_model(self, scheduler_output):
        time.sleep(0.002)

    def sample_tokens(self, grammar_output):
        time.sleep(0.001)
        self.propose_draft_token_ids()
        return "output"

    def propose_draft_token_ids(self):
        time.sleep(0.003)


def scheduled(tokens_per_row: dict[str, int], drafts: dict[str, list[int]]):
    return SimpleNamespace(num_scheduled_tokens=tokens_per_row, total_num_scheduled_tokens=sum(tokens_per_row.values()),
                           scheduled_spec_decode_tokens=drafts)


def test_every_step_is_recorded_with_its_parts_and_what_it_verified():
    runner = StandInRunner()
    recorder = StepRecorder(runner)
    runner.execute_model(scheduled({"a": 30, "b": 1}, {}))  # a prefill chunk beside a decoding row
    assert runner.sample_tokens(None) == "output"
    runner.execute_model(scheduled({"a": 3, "b": 1}, {"a": [7, 8]}))
    runner.sample_tokens(None)
    prefill, decode = recorder.take()
    assert (prefill.num_seqs, prefill.num_tokens, prefill.num_draft_tokens, prefill.decoding) == (2, 31, 0, False)
    assert (decode.num_seqs, decode.num_tokens, decode.num_draft_tokens, decode.decoding) == (2, 4, 2, True)
    assert decode.forward_s >= 0.002 and decode.propose_s >= 0.003 and decode.sample_s >= decode.propose_s + 0.001
    assert prefill.ended <= decode.started
    assert recorder.take() == []  # taken records are gone


def test_start_recording_wraps_a_worker_once_and_clears_on_restart():
    worker = SimpleNamespace(model_runner=StandInRunner())
    assert take_records(worker) == []  # not recording yet
    start_recording(worker)
    execute = worker.model_runner.execute_model
    worker.model_runner.execute_model(scheduled({"a": 1}, {}))
    worker.model_runner.sample_tokens(None)
    start_recording(worker)  # again: the same wrappers, the records cleared
    assert worker.model_runner.execute_model is execute
    assert take_records(worker) == []
    worker.model_runner.execute_model(scheduled({"a": 1}, {}))
    worker.model_runner.sample_tokens(None)
    (record,) = take_records(worker)
    assert record["num_tokens"] == 1 and record["propose_s"] > 0
