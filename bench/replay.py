"""Replay: score a drafter on the target's known outputs (greedy, or one sample each), scheduled as vLLM schedules: up
to `batch_size` running, the next joining as one finishes, each step's rows served from a token budget (a decoding
row: its token and draft; a joining row: a prompt chunk). A forward accepts the draft's longest prefix equal to the
reference (for a sampled reference as likely as rejection sampling accepts it); the drafter is then called for the
rows that emitted. References run past max_tokens (vLLM verifies drafts past the stop point). The step log keeps each
step's shape for a cost model; a `learner` learns the step cost from clean decode steps."""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from specdec.engines.calibration import STEPS, calibration_runs
from specdec.config import SpecConfig
from specdec.stats import RequestStats, request_stats
from specdec.step_cost import StepCostModel, StepSample, StepTimer

_EMPTY = np.zeros(0, dtype=np.int64)

# Columns of the step log, one value per step.
LOG_FIELDS = (
    "num_rows",  # rows scheduled (decoding + prefill chunks)
    "num_tokens",  # tokens scheduled
    "num_kv_tokens",  # tokens the scheduled rows already held in the KV cache
    "num_draft_kv_tokens",  # the context held by each row scheduling more than one token
    "num_decode_rows",
    "num_decode_tokens",  # decoding rows' own tokens + their drafts
    "num_decode_kv_tokens",
    "num_decode_draft_kv_tokens",
    "num_running",  # requests admitted and not finished (vLLM's running requests)
    "num_emitted",  # output tokens produced by the step (accepted + one per decoding row + first tokens)
    "num_drafted",  # draft tokens verified in the step
    "num_proposed",  # rows the drafter was called for after the step
    "draft_cpu_s",  # the drafter's thread CPU time for that call and the finished requests
)


class Drafter(Protocol):
    config: SpecConfig

    def step_tokens(self, req_ids: list[str], tokens: Sequence[np.ndarray], num_accepted: Sequence[int],
                    cost: Any = None, num_prompt_tokens: Sequence[int] | None = None,
                    tail: bool = False) -> list[np.ndarray]: ...

    def finish(self, req_id: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class ReplayRequest:
    id: str
    prompt_token_ids: Sequence[int]
    reference_tokens: Sequence[int]  # the target's continuation, greedy or sampled
    max_tokens: int
    stop_token_ids: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class ReplayResult:
    id: str
    output_token_ids: list[int]
    per_step_drafted: list[int]
    per_step_accepted: list[int]
    stats: RequestStats


@dataclasses.dataclass
class _Row:
    req: ReplayRequest
    sequence: np.ndarray  # prompt + reference continuation
    prompt_len: int
    stop_at: int  # output tokens once the first stop token is out (or max_tokens)
    num_computed: int = 0  # tokens in the KV cache
    num_out: int = 0  # output tokens emitted (0 while its prompt is being prefilled)
    num_accepted_last: int = 0
    num_emitted_now: int = 0  # output tokens the last forward produced for this row
    draft: np.ndarray = dataclasses.field(default_factory=lambda: _EMPTY)
    drafted: list[int] = dataclasses.field(default_factory=list)
    accepted: list[int] = dataclasses.field(default_factory=list)

    @classmethod
    def start(cls, req: ReplayRequest) -> "_Row":
        reference = np.asarray(req.reference_tokens, dtype=np.int64)
        prompt = np.asarray(req.prompt_token_ids, dtype=np.int64)
        return cls(req, np.concatenate([prompt, reference]), len(prompt), stop_point(reference, req))

    @property
    def reference(self) -> np.ndarray:
        return self.sequence[self.prompt_len :]

    @property
    def decoding(self) -> bool:
        return self.num_out > 0  # else its prompt is still being prefilled


@dataclasses.dataclass(frozen=True)
class Simulation:
    results: list[ReplayResult]  # in input order
    log: dict[str, np.ndarray]  # LOG_FIELDS -> one value per step


class SimulatedStepTimer(StepTimer):
    """The budget's step timer fed simulated times: the start-up calibration, then clean decode steps."""

    def __init__(self, cost: StepCostModel, k_max: int, max_num_seqs: int, max_model_len: int) -> None:
        super().__init__()
        self.cost = cost
        self.load_calibration(simulated_calibration(cost, k_max, max_num_seqs, max_model_len))

    def observe(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int) -> None:
        seconds = self.cost.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens)
        self.add(StepSample(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens, seconds))


def simulated_calibration(cost: StepCostModel, k_max: int, max_num_seqs: int, max_model_len: int) -> list[StepSample]:
    """The decode steps the engine's calibration would time, priced by `cost`."""
    samples = []
    for size, forced_draft_tokens, prompt_tokens in calibration_runs(max_num_seqs, k_max, max_model_len):
        for step in range(STEPS - 1):
            tokens, kv = size * (1 + forced_draft_tokens), size * (prompt_tokens + step)
            draft_kv = kv if forced_draft_tokens else 0
            samples.append(StepSample(size, tokens, kv, draft_kv, cost.seconds(size, tokens, kv, draft_kv)))
    return samples


def simulate(requests: Sequence[ReplayRequest], drafter: Drafter, batch_size: int, max_batched_tokens: int,
             learner: SimulatedStepTimer | None = None) -> Simulation:
    """Replay `requests` with up to `batch_size` running at once; see the module docstring."""
    if batch_size < 1 or max_batched_tokens < 1:
        raise ValueError(f"batch_size ({batch_size}) and max_batched_tokens ({max_batched_tokens}) must be >= 1")
    waiting = collections.deque(requests)
    running: list[_Row] = []
    finished: dict[str, _Row] = {}
    log: list[tuple[float, ...]] = []
    while waiting or running:
        while waiting and len(running) < batch_size:
            running.append(_Row.start(waiting.popleft()))
        scheduled = _schedule(running, max_batched_tokens)
        shape = _shape(scheduled)
        if learner is not None and shape[4] == shape[0] > 0:  # clean: every scheduled row decoding
            learner.observe(*shape[:4])
        num_running = len(running)
        num_drafted = sum(int(row.draft.shape[0]) for row, _ in scheduled if row.decoding)
        emitting = [row for row, num_tokens in scheduled if _advance(row, num_tokens)]
        done = [row for row in emitting if row.num_out >= row.stop_at]
        # A batch with free rows has nothing waiting to join: the wave's tail (as the worker sees it).
        tail = len(scheduled) < batch_size
        cpu_s = _propose(drafter, emitting, done, learner.model if learner is not None else None, tail)
        for row in done:
            finished[row.req.id] = row
            running.remove(row)
        num_emitted = sum(row.num_emitted_now for row in emitting)
        log.append((*shape, num_running, num_emitted, num_drafted, len(emitting), cpu_s))
    table = np.asarray(log, dtype=np.float64).reshape(-1, len(LOG_FIELDS))
    results = [_result(finished[r.id], drafter) for r in requests]
    return Simulation(results, {f: table[:, i] for i, f in enumerate(LOG_FIELDS)})


def _schedule(running: list[_Row], max_batched_tokens: int) -> list[tuple[_Row, int]]:
    """(row, tokens scheduled) in running order within the token budget (drafts cut to fit)."""
    budget = max_batched_tokens
    scheduled = []
    for row in running:
        if budget == 0:
            break
        if row.decoding:
            # cut where the reference ends too: past the stop point its tokens are discarded
            row.draft = row.draft[: max(0, min(budget - 1, len(row.reference) - row.num_out - 1))]
            num_tokens = 1 + int(row.draft.shape[0])
        else:
            num_tokens = min(row.prompt_len - row.num_computed, budget)
        scheduled.append((row, num_tokens))
        budget -= num_tokens
    return scheduled


def _shape(scheduled: list[tuple[_Row, int]]) -> tuple[int, ...]:
    """(rows, tokens, KV tokens, draft-KV tokens) of the step, then of its decoding rows."""
    decode = [(row, n) for row, n in scheduled if row.decoding]
    return tuple(value for part in (scheduled, decode) for value in (
        len(part), sum(n for _, n in part), sum(row.num_computed for row, _ in part),
        sum(row.num_computed for row, n in part if n > 1)))


def _advance(row: _Row, num_tokens: int) -> bool:
    """Apply one forward to `row`; True when it emitted tokens (its drafter call follows)."""
    if not row.decoding:
        row.num_computed += num_tokens
        if row.num_computed < row.prompt_len:
            return False  # prompt not complete yet: nothing sampled
        row.num_out, row.num_accepted_last, row.num_emitted_now = 1, 0, 1
        return True
    accepted = num_matching(row.draft, row.reference[row.num_out :])
    if row.draft.shape[0]:
        row.drafted.append(int(row.draft.shape[0]))
        row.accepted.append(accepted)
    row.num_out += accepted + 1
    row.num_computed += accepted + 1
    row.num_accepted_last = accepted
    row.num_emitted_now = accepted + 1
    if row.num_out > len(row.reference):
        raise ValueError(f"request {row.req.id}: reference_tokens too short to replay to the stop point")
    return True


def _propose(drafter: Drafter, emitting: list[_Row], done: list[_Row], cost: StepCostModel | None, tail: bool) -> float:
    """The drafter call for the rows that emitted, then the finished ones; its thread CPU time."""
    if not emitting:
        return 0.0
    started = time.thread_time()
    drafts = drafter.step_tokens([row.req.id for row in emitting],
                                 [row.sequence[: row.prompt_len + row.num_out] for row in emitting],
                                 [row.num_accepted_last for row in emitting], cost,
                                 num_prompt_tokens=[row.prompt_len for row in emitting], tail=tail)
    for row in done:
        drafter.finish(row.req.id)
    cpu_s = time.thread_time() - started
    for row, draft in zip(emitting, drafts, strict=True):
        row.draft = np.asarray(draft, dtype=np.int64)
    return cpu_s


def _result(row: _Row, drafter: Drafter) -> ReplayResult:
    output = [int(t) for t in row.reference[: row.stop_at]]
    stats = request_stats(len(output), row.drafted, row.accepted, drafter.config.k_ceiling, drafter.config.speculative)
    return ReplayResult(row.req.id, output, row.drafted, row.accepted, stats)


def num_matching(draft: np.ndarray, reference: np.ndarray) -> int:
    """How many leading tokens of `draft` equal `reference`'s: the accepted ones."""
    n = min(draft.shape[0], reference.shape[0])
    mismatch = np.flatnonzero(draft[:n] != reference[:n])
    return int(mismatch[0]) if mismatch.size else n


def stop_point(reference: np.ndarray, req: ReplayRequest) -> int:
    """Output tokens once the first stop token is out, or max_tokens."""
    stops = np.flatnonzero(np.isin(reference, list(req.stop_token_ids))) if req.stop_token_ids else []
    return min(req.max_tokens, int(stops[0]) + 1) if len(stops) else req.max_tokens


def expected_output(req: ReplayRequest) -> list[int]:
    """The output the real engine gives: the reference up to its stop point."""
    reference = np.asarray(req.reference_tokens, dtype=np.int64)
    return [int(t) for t in reference[: stop_point(reference, req)]]
