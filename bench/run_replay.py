"""The run replayed (`specdec bench --engine replay --run-shards ...`): the same requests as sequential
shards, one stream, one queue, and the fluid bound. A request is its target forwards and its rows' share
of their time; on a linear step model a run costs `steps x per-step terms` plus those shares whatever the
schedule, so an event simulation of continuous batching (FIFO, up to `rows` running) counts the steps."""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Sequence

from bench.cost_models import CostModel
from bench.drafters import Method
from bench.plots import grouped, table
from bench.projection import simulate_and_price
from bench.replay import ReplayRequest


@dataclasses.dataclass(frozen=True)
class RunJob:
    forwards: int  # target forwards, the prefill's included
    row_s: float  # its rows' share of those forwards' time (all but the per-step terms)
    num_output_tokens: int


def job(cost: CostModel, prompt_len: int, output_len: int, forwards: int, drafted: int = 0,
        draft_forwards: int = 0) -> RunJob:
    """A request on `cost`: its decode forwards verify `drafted` draft tokens in all (in
    `draft_forwards` of them), its context growing evenly from prompt to output."""
    s = cost.step
    decode = max(forwards - 1, 0)
    per_forward = (output_len - 1) / decode if decode else 0.0
    kv = decode * (prompt_len + 1) + per_forward * decode * (decode - 1) / 2
    prefill = s.per_token_s * prompt_len + cost.prefill_correction(1, prompt_len)
    row_s = (s.per_seq_s * forwards + prefill + s.per_token_s * (decode + drafted) + s.per_kv_token_s * kv
             + s.per_draft_kv_token_s * kv * (draft_forwards / decode if decode else 0.0))
    return RunJob(forwards, row_s, output_len)


def run_seconds(jobs: Sequence[RunJob], rows: int, step_s: float, release: Sequence[float] | None = None,
                start: float = 0.0) -> float:
    """When the last of `jobs` finishes: FIFO, at most `rows` running, job i joining once `release[i]` has
    passed (all at `start` by default); a step costs `step_s` plus a forward's share of each running job."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1, not {rows}")
    release = release or [start] * len(jobs)
    running: list[tuple[int, int]] = []  # (step it finishes at, job index)
    clock, step, share, nxt = start, 0, 0.0, 0
    while nxt < len(jobs) or running:
        while nxt < len(jobs) and len(running) < rows and release[nxt] <= clock:
            heapq.heappush(running, (step + jobs[nxt].forwards, nxt))
            share += jobs[nxt].row_s / jobs[nxt].forwards
            nxt += 1
        if not running:
            clock = release[nxt]
            continue
        step_time = step_s + share
        steps = running[0][0] - step
        if nxt < len(jobs) and len(running) < rows:  # a free row: stop once the next job is out
            steps = min(steps, max(1, math.ceil((release[nxt] - clock) / step_time)))
        clock, step = clock + steps * step_time, step + steps
        while running and running[0][0] <= step:
            done = jobs[heapq.heappop(running)[1]]
            share -= done.row_s / done.forwards
    return clock


def sequential_seconds(jobs: Sequence[RunJob], rows: int, step_s: float, shard: int, shard_io_s: float = 0.0) -> float:
    """Shards of `shard` jobs one after another, each read and staged for `shard_io_s` outside the engine."""
    clock = 0.0
    for first in range(0, len(jobs), shard):
        clock = run_seconds(jobs[first : first + shard], rows, step_s, start=clock + shard_io_s)
    return clock


def stream_seconds(jobs: Sequence[RunJob], rows: int, step_s: float, shard: int, shard_io_s: float = 0.0) -> float:
    """One stream: shards read one after another in the background, a job joining once its shard is read."""
    return run_seconds(jobs, rows, step_s, [(i // shard + 1) * shard_io_s for i in range(len(jobs))])


def fluid_seconds(jobs: Sequence[RunJob], rows: int, step_s: float) -> float:
    """Every forward in a full step: the least any schedule takes."""
    return sum(j.forwards for j in jobs) / rows * step_s + sum(j.row_s for j in jobs)


@dataclasses.dataclass(frozen=True)
class RunRecord:
    method: str
    engine: str  # run:<cost model>
    cost_model: str
    dataset: str
    rows: int  # requests running at once
    shard_size: int
    num_requests: int
    num_output_tokens: int
    tokens_per_forward: float
    sequential_s: float
    stream_s: float
    one_queue_s: float  # every request in one queue from the start, no shard I/O
    fluid_s: float
    shard_io_s: float
    speedup: float  # sequential / stream
    stream_vs_one_queue: float
    stream_vs_fluid: float
    temperature: float = 0.0
    samples: int = 1
    epoch: int = 1


def run_records(jobs: Sequence[RunJob], cost: CostModel, step_s: float, rows: int, shards: Sequence[int],
                shard_io_s: float, **fields) -> list[RunRecord]:
    """Every shard size at `rows` at once; `step_s`: the per-step time; `fields`: method, dataset, workload."""
    tokens = sum(j.num_output_tokens for j in jobs)
    one_queue, fluid = run_seconds(jobs, rows, step_s), fluid_seconds(jobs, rows, step_s)
    records = []
    for shard in shards:
        seq = sequential_seconds(jobs, rows, step_s, shard, shard_io_s)
        stream = stream_seconds(jobs, rows, step_s, shard, shard_io_s)
        records.append(RunRecord(
            engine=f"run:{cost.name}", cost_model=cost.name, rows=rows, shard_size=shard, num_requests=len(jobs),
            num_output_tokens=tokens, tokens_per_forward=tokens / sum(j.forwards for j in jobs),
            sequential_s=seq, stream_s=stream, one_queue_s=one_queue, fluid_s=fluid, shard_io_s=shard_io_s,
            speedup=seq / stream, stream_vs_one_queue=stream / one_queue, stream_vs_fluid=stream / fluid, **fields))
    return records


def replayed_jobs(requests: Sequence[ReplayRequest], method: Method, k: int, rows: int, cost: CostModel,
                  max_model_len: int, warmup_epochs: Sequence[Sequence[ReplayRequest]] = ()) -> tuple[list[RunJob], float]:
    """(jobs, per-step time) of `method` replayed at `rows` at once: each request's forwards
    and drafts from the replay, the drafter's mean time per step added to the step's."""
    run = simulate_and_price(requests, method, k, rows, [cost], max_model_len, warmup_epochs)[0]
    paid = cost.run_by(method.synchronous)
    step_s = paid.step.fixed_s + paid.per_step_overhead_s + run.priced.draft_seconds / max(run.priced.num_steps, 1)
    jobs = [job(cost, len(req.prompt_token_ids), len(res.output_token_ids), res.stats.num_steps,
                sum(res.per_step_drafted), len(res.per_step_drafted))
            for req, res in zip(requests, run.simulation.results, strict=True)]
    return jobs, step_s


def length_jobs(lengths: Sequence[tuple[int, int]], cost: CostModel) -> tuple[list[RunJob], float]:
    """(jobs, per-step time) of requests given as (prompt tokens, output tokens), no drafting."""
    jobs = [job(cost, prompt, output, output) for prompt, output in lengths if output > 0]
    return jobs, cost.step.fixed_s + cost.per_step_overhead_s


def render_run_table(records: Sequence[RunRecord]) -> str:
    columns = [("shard", ">7"), ("sequential s", ">14.1f"), ("stream s", ">11.1f"), ("fluid s", ">10.1f"),
               ("stream x", ">10.2f"), ("/one queue", ">12.3f"), ("/fluid", ">8.3f")]
    blocks = []
    for group in grouped(records, lambda r: (r.cost_model, r.dataset, r.method, r.rows)):
        r = group[0]
        blocks.append("\n".join([
            f"run on {r.cost_model}: {r.dataset} {r.method}, {r.num_requests} requests, {r.rows} rows at once, "
            f"{r.tokens_per_forward:.2f} tokens/forward, one queue {r.one_queue_s:.1f} s, shard I/O {r.shard_io_s:g} s",
            *table(columns, [(r.shard_size, r.sequential_s, r.stream_s, r.fluid_s, r.speedup, r.stream_vs_one_queue,
                              r.stream_vs_fluid) for r in group])]))
    return "\n\n".join(blocks)
