"""Where a decode step's time goes, measured inside vLLM's worker for any method.

`StepRecorder` wraps three methods of the worker's model runner (on the instance, so
nothing else changes): `execute_model` (the target forward), `sample_tokens` (sampling,
bookkeeping and, inside it, the drafter) and `propose_draft_token_ids` (the drafter alone:
vLLM's n-gram lookup, or our proposer with its controller and budget). Each step is one
`StepRecord`; the time from the end of one step to the start of the next is the engine
core's (scheduling, IPC, output processing). Timestamps are `time.perf_counter()`, which is
the system-wide monotonic clock on Linux, so the caller can place them in its own timeline.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any


@dataclasses.dataclass(frozen=True)
class StepRecord:
    started: float  # perf_counter at execute_model's start
    forward_s: float  # execute_model
    sample_s: float  # sample_tokens, drafter included
    propose_s: float  # the drafter inside sample_tokens (0: no drafter ran)
    num_seqs: int
    num_tokens: int  # scheduled: every row's token + its draft
    num_draft_tokens: int  # scheduled draft tokens (verified in this step)

    @property
    def ended(self) -> float:
        return self.started + self.forward_s + self.sample_s

    @property
    def decoding(self) -> bool:
        """Every row scheduled one token plus its draft (no prefill chunk in the step)."""
        return self.num_seqs > 0 and self.num_tokens == self.num_seqs + self.num_draft_tokens


class StepRecorder:
    """Records every step of one model runner until `take` (see the module docstring)."""

    def __init__(self, runner: Any) -> None:
        self.records: list[StepRecord] = []
        self._open: dict[str, Any] | None = None
        self._wrap(runner)

    def _wrap(self, runner: Any) -> None:
        execute, sample, propose = runner.execute_model, runner.sample_tokens, runner.propose_draft_token_ids

        def timed_execute(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return execute(scheduler_output, *args, **kwargs)
            finally:
                drafts = scheduler_output.scheduled_spec_decode_tokens
                self._open = {"started": started, "forward_s": time.perf_counter() - started, "propose_s": 0.0,
                              "num_seqs": len(scheduler_output.num_scheduled_tokens),
                              "num_tokens": scheduler_output.total_num_scheduled_tokens,
                              "num_draft_tokens": sum(len(d) for d in drafts.values())}

        def timed_sample(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return sample(*args, **kwargs)
            finally:
                step, self._open = self._open, None
                if step is not None:
                    self.records.append(StepRecord(sample_s=time.perf_counter() - started, **step))

        def timed_propose(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return propose(*args, **kwargs)
            finally:
                if self._open is not None:
                    self._open["propose_s"] += time.perf_counter() - started

        runner.execute_model, runner.sample_tokens = timed_execute, timed_sample
        runner.propose_draft_token_ids = timed_propose

    def take(self) -> list[StepRecord]:
        records, self.records = self.records, []
        return records


# Run in the worker through LLM.collective_rpc; `worker` is vLLM's worker object.
def start_recording(worker: Any) -> bool:
    """Record steps from now on (once per worker; later calls just clear the records)."""
    runner = worker.model_runner
    recorder = getattr(runner, "_specdec_step_recorder", None)
    if recorder is None:
        runner._specdec_step_recorder = StepRecorder(runner)
    else:
        recorder.take()
    return True


def take_records(worker: Any) -> list[dict[str, float]]:
    recorder = getattr(worker.model_runner, "_specdec_step_recorder", None)
    return [] if recorder is None else [dataclasses.asdict(r) for r in recorder.take()]
