"""Batched replay: greedy verification of many requests at once, scheduled as vLLM does.

Up to `batch_size` requests run at once (vLLM's `max_num_seqs`); when one finishes the next
waiting one joins, every request is replayed once. Each step, as vLLM's scheduler does:
running rows are served in order from a token budget (`max_batched_tokens`): a decoding row
schedules its last token plus its draft, a joining row a chunk of its prompt (chunked
prefill). Then the target's greedy tokens decide what is accepted (as in
specdec/engines/replay.py), a row whose prompt is complete emits its first token, and the
drafter is called once for every row that emitted a token (finished ones too: vLLM drafts
for them once more before it notices), through the controller's `engine_step`, the call
vLLM's worker makes: the step's rows in a persistent, condensed batch as vLLM's input
batch keeps them (a row that is not scheduled, or has finished, leaves it; the next call
retires it), their tokens in one buffer, the sampled tokens and prompt lengths per row.
The reference may be greedy or sampled: a draft token is accepted iff it equals the
reference's token at its position, nothing else depends on how the reference was drawn.

Nothing is timed except that call (thread CPU time, so other processes on the machine do
not inflate it). The step log records each step's shape, which a cost model
prices afterwards (specdec/bench/pricing.py). With a `learner` the batch budget runs in the
loop: it learns its step-cost model from the simulated times of clean decode steps, as the
real engine's step timer learns from measured ones.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Sequence

import numpy as np

from specdec.budget import StepCost, StepCostModel, StepSample
from specdec.config import SpecConfig
from specdec.controller import Controller
from specdec.engines.calibration import STEPS, calibration_runs
from specdec.engines.replay import ReplayRequest, ReplayResult, num_matching, truncated_output
from specdec.engines.step_timing import StepTimer
from specdec.stats import request_stats

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
    "draft_cpu_s",  # the drafter's thread CPU time: that call, and forgetting the finished requests
)


@dataclasses.dataclass
class _Row:
    """A running request: how far its prompt is in the KV cache, what it has emitted."""

    req: ReplayRequest
    sequence: np.ndarray  # prompt + greedy continuation
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
        prompt = np.asarray(req.prompt_token_ids, dtype=np.int64)
        greedy = np.asarray(req.greedy_tokens, dtype=np.int64)
        stops = np.flatnonzero(np.isin(greedy, list(req.stop_token_ids))) if req.stop_token_ids else []
        stop_at = min(req.max_tokens, int(stops[0]) + 1) if len(stops) else req.max_tokens
        return cls(req, np.concatenate([prompt, greedy]), len(prompt), stop_at)

    @property
    def greedy(self) -> np.ndarray:
        return self.sequence[self.prompt_len :]

    @property
    def decoding(self) -> bool:
        return self.num_out > 0


@dataclasses.dataclass(frozen=True)
class Simulation:
    results: list[ReplayResult]  # in input order
    log: dict[str, np.ndarray]  # LOG_FIELDS -> one value per step


class SimulatedStepTimer:
    """The budget's step timer (specdec/engines/step_timing.py) fed with simulated step
    times: first the engine's start-up calibration runs, priced by `cost`, then every clean
    decode step of the replay. The budget only ever sees its own fit of these times."""

    def __init__(self, cost: StepCostModel, k_max: int, max_num_seqs: int, max_model_len: int) -> None:
        self.cost = cost
        self.timer = StepTimer()
        self.timer.load_calibration(simulated_calibration(cost, k_max, max_num_seqs, max_model_len))

    @property
    def model(self) -> StepCost | None:
        return self.timer.model

    def observe(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int) -> None:
        seconds = self.cost.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens)
        self.timer.add(StepSample(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens, seconds))


def simulated_calibration(cost: StepCostModel, k_max: int, max_num_seqs: int, max_model_len: int) -> list[StepSample]:
    """The samples the engine's calibration would time: after each run's prefill, STEPS - 1
    decode steps of `size` rows with `forced_k` draft tokens each."""
    samples = []
    for size, forced_k, prompt_tokens in calibration_runs(max_num_seqs, k_max, max_model_len):
        for step in range(STEPS - 1):
            tokens, kv = size * (1 + forced_k), size * (prompt_tokens + step)
            draft_kv = kv if forced_k else 0
            samples.append(StepSample(size, tokens, kv, draft_kv, cost.seconds(size, tokens, kv, draft_kv)))
    return samples


class InputBatch:
    """vLLM's persistent input batch as the proposer sees it: row i of the step is buffer
    row i of `token_ids` (each request's whole replayed sequence, written when it joins;
    the drafter reads its first `num_tokens[i]`). Each step, rows not scheduled leave, new
    ones fill the holes, and the last rows move into any holes left (vLLM's condense)."""

    def __init__(self, max_rows: int, width: int) -> None:
        self.max_rows = max_rows  # vLLM's max_num_seqs
        self.token_ids = np.zeros((max_rows, width), dtype=np.int64)
        self.num_tokens = np.zeros(max_rows, dtype=np.int64)
        self.num_prompt_tokens = np.zeros(max_rows, dtype=np.int64)  # vLLM's input_batch.num_prompt_tokens
        self.rows: list[_Row] = []
        self.req_ids: list[str] = []

    def update(self, scheduled: Sequence[_Row]) -> None:
        here = {id(row) for row in scheduled}
        slots: list[_Row | None] = [row if id(row) in here else None for row in self.rows]
        known = {id(row) for row in self.rows}
        for row in scheduled:
            if id(row) in known:
                continue
            hole = next((i for i, r in enumerate(slots) if r is None), len(slots))
            if hole == len(slots):
                slots.append(row)
            else:
                slots[hole] = row
            self.token_ids[hole, : row.sequence.shape[0]] = row.sequence
        while None in slots:
            hole = slots.index(None)
            last = slots.pop()
            if last is not None and hole < len(slots):
                slots[hole] = last
                self.token_ids[hole] = self.token_ids[len(slots)]
        self.rows = [row for row in slots if row is not None]
        self.req_ids[:] = [row.req.id for row in self.rows]
        self.num_prompt_tokens[: len(self.rows)] = [row.prompt_len for row in self.rows]


def simulate(
    requests: Sequence[ReplayRequest],
    controller: Controller,
    batch_size: int,
    max_batched_tokens: int,
    learner: SimulatedStepTimer | None = None,
) -> Simulation:
    """Replay `requests` with up to `batch_size` running at once; see the module docstring."""
    if batch_size < 1 or max_batched_tokens < 1:
        raise ValueError(f"batch_size ({batch_size}) and max_batched_tokens ({max_batched_tokens}) must be >= 1")
    waiting = collections.deque(requests)
    running: list[_Row] = []
    finished: dict[str, _Row] = {}
    log: list[tuple[float, ...]] = []
    width = max((len(r.prompt_token_ids) + len(r.greedy_tokens) for r in requests), default=1)
    batch = InputBatch(batch_size, width)
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
        batch.update([row for row, _ in scheduled])
        cpu_s = _propose(controller, batch, {id(row) for row in emitting}, learner.model if learner is not None else None)
        for row in [r for r in emitting if r.num_out >= r.stop_at]:  # replay.is_finished, precomputed
            finished[row.req.id] = row
            running.remove(row)
        num_emitted = sum(row.num_emitted_now for row in emitting)
        log.append((*shape, num_running, num_emitted, num_drafted, len(emitting), cpu_s))
    table = np.asarray(log, dtype=np.float64).reshape(-1, len(LOG_FIELDS))
    results = [_result(finished[r.id], controller.config) for r in requests]
    return Simulation(results, {f: table[:, i] for i, f in enumerate(LOG_FIELDS)})


def _schedule(running: list[_Row], max_batched_tokens: int) -> list[tuple[_Row, int]]:
    """(row, tokens scheduled) in running order, within the step's token budget. A decoding
    row whose draft does not fit has it cut, as vLLM does with spec tokens over budget."""
    budget = max_batched_tokens
    scheduled = []
    for row in running:
        if budget == 0:
            break
        if row.decoding:
            # Also cut where the reference ends: it runs `lookahead` tokens past max_tokens
            # for drafts up to K, and a tail draft (up to SpecConfig.k_ceiling) verified past
            # the stop point only decides tokens that are discarded anyway.
            row.draft = row.draft[: max(0, min(budget - 1, len(row.greedy) - row.num_out - 1))]
            num_tokens = 1 + int(row.draft.shape[0])
        else:
            num_tokens = min(row.prompt_len - row.num_computed, budget)
        scheduled.append((row, num_tokens))
        budget -= num_tokens
    return scheduled


def _shape(scheduled: list[tuple[_Row, int]]) -> tuple[int, ...]:
    """(rows, tokens, KV tokens, draft-KV tokens) of the whole step, then of its decoding
    rows alone."""
    decode = [(row, n) for row, n in scheduled if row.decoding]
    return _part_shape(scheduled) + _part_shape(decode)


def _part_shape(part: list[tuple[_Row, int]]) -> tuple[int, int, int, int]:
    return (len(part), sum(n for _, n in part), sum(row.num_computed for row, _ in part),
            sum(row.num_computed for row, n in part if n > 1))


def _advance(row: _Row, num_tokens: int) -> bool:
    """Apply one forward to `row`; True when it emitted tokens (its drafter call follows)."""
    if not row.decoding:
        row.num_computed += num_tokens
        if row.num_computed < row.prompt_len:
            return False  # prompt not complete yet: nothing sampled
        row.num_out, row.num_accepted_last, row.num_emitted_now = 1, 0, 1
        return True
    accepted = num_matching(row.draft, row.greedy[row.num_out :])
    if row.draft.shape[0]:
        row.drafted.append(int(row.draft.shape[0]))
        row.accepted.append(accepted)
    row.num_out += accepted + 1
    row.num_computed += accepted + 1
    row.num_accepted_last = accepted
    row.num_emitted_now = accepted + 1
    if row.num_out > len(row.greedy):
        raise ValueError(f"request {row.req.id}: greedy_tokens too short to replay to the stop point")
    return True


def _propose(controller: Controller, batch: InputBatch, emitting: set[int], cost: StepCostModel | None) -> float:
    """The proposer call vLLM makes after the step, for the batch's rows (those that
    emitted tokens draft); returns its thread CPU time."""
    if not emitting:
        return 0.0
    sampled = []
    for i, row in enumerate(batch.rows):
        if id(row) in emitting:
            batch.num_tokens[i] = row.prompt_len + row.num_out
            sampled.append([0] * row.num_emitted_now)  # vLLM's sampled tokens: their number is what counts
        else:
            sampled.append([])  # still prefilling
    # As vLLM's worker sees it (specdec.engines.vllm_proposer): free rows, a wave's tail.
    tail = len(batch.rows) < batch.max_rows
    started = time.thread_time()
    drafts, _ = controller.engine_step(batch.req_ids, sampled, batch.num_tokens, batch.token_ids, cost,
                                       num_prompt_tokens=batch.num_prompt_tokens, tail=tail)
    cpu_s = time.thread_time() - started
    for row, draft in zip(batch.rows, drafts, strict=True):
        if id(row) in emitting:
            row.draft = np.array(draft, dtype=np.int64)
    return cpu_s


def _result(row: _Row, config: SpecConfig) -> ReplayResult:
    output = truncated_output(row.greedy, row.num_out, row.req)
    stats = request_stats(len(output), row.drafted, row.accepted, config.k_ceiling, config.speculative)
    return ReplayResult(row.req.id, output, row.drafted, row.accepted, stats)
