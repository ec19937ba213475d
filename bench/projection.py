"""Projected throughput at real batch sizes: every method replayed in batches, every step
priced by a step-time model (`specdec bench --engine replay --cost ...`).

Acceptance comes from replaying the bundled model's outputs (what each drafter would have had
accepted, step by step); each step's time comes from the cost model (e.g. the published
Llama-3.1-8B / H100 fit) plus the drafter's own time. A projection says what the drafters and
the budget would do on that hardware if the target accepted what the bundled model accepts;
it is not a measurement.

Methods with a fixed K are replayed for every K of the sweep and shown at their best K per
batch size and cost model; `specdec` runs at the largest K, its batch budget sizing drafts
from a step-cost model it learns from the simulated step times (never handed the cost model
itself). With warm-up epochs every method's drafter (and specdec's step timer) first replays
those epochs in batches, unpriced, and keeps its state for the measured epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from bench.batched_replay import SimulatedStepTimer, Simulation, simulate
from bench.cost_models import CostModel
from bench.methods import Method, all_methods
from bench.pricing import Priced, price
from bench.records import ProjectionRecord, Workload
from bench.replay import ReplayRequest, expected_output
from specdec.stats import ShardStats, Totals

STARTED_FROM = "cold cross-request cache; a request joins when one finishes (vLLM max_num_seqs)"


@dataclasses.dataclass(frozen=True)
class _Run:
    method: Method
    k: int
    batch_size: int
    cost: CostModel
    priced: Priced
    simulation: Simulation


def project(
    requests: Sequence[ReplayRequest],
    dataset: str,
    methods: Sequence[Method],
    ks: Sequence[int],
    batch_sizes: Sequence[int],
    costs: Sequence[CostModel],
    max_model_len: int,
    progress: Callable[[str], None] = lambda _: None,
    warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
    workload: Workload = Workload(),
) -> list[ProjectionRecord]:
    """Records for every method, K, batch size and cost model (batch sizes larger than the
    prompt set are skipped: every prompt is used once, never repeated). `none` is replayed
    whether asked for or not: the speed-ups are against it. `warmup_epochs` run first
    through each method's drafter, at the same batch size, unpriced; `requests` is the
    epoch measured."""
    if all(m.name != "none" for m in methods):
        methods = [all_methods()["none"], *methods]
    runs: list[_Run] = []
    for batch_size in batch_sizes:
        if batch_size > len(requests):
            progress(f"{dataset}: batch {batch_size} skipped: only {len(requests)} prompts")
            continue
        for method in methods:
            for k in _ks(method, ks):
                runs += _simulate_and_price(requests, method, k, batch_size, costs, max_model_len, warmup_epochs)
                progress(f"{dataset} batch {batch_size} {method.name} K={k}: done")
    return _records(runs, dataset, requests, workload, len(warmup_epochs))


def _ks(method: Method, ks: Sequence[int]) -> list[int]:
    if method.name == "none":
        return [0]
    return list(ks) if method.tuned_k else [max(ks)]


def _simulate_and_price(
    requests: Sequence[ReplayRequest], method: Method, k: int, batch_size: int,
    costs: Sequence[CostModel], max_model_len: int, warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
) -> list[_Run]:
    """Without the budget a replay's decisions do not depend on the clock: one replay per
    scheduler token budget serves every cost model with that budget."""
    runs = []
    shared: dict[int, Simulation] = {}
    every = [r for epoch in warmup_epochs for r in epoch] + list(requests)  # the oracle knows them all

    def run(learner: SimulatedStepTimer | None, max_batched_tokens: int) -> Simulation:
        drafter = method.make_drafter(k, every)
        for epoch in warmup_epochs:  # the drafter and the step timer keep what they learn
            simulate(epoch, drafter, batch_size, max_batched_tokens, learner)
        return simulate(requests, drafter, batch_size, max_batched_tokens, learner)

    for cost in costs:
        if method.budget:
            sim = run(SimulatedStepTimer(cost, k, batch_size, max_model_len), cost.max_batched_tokens)
        else:
            if cost.max_batched_tokens not in shared:
                shared[cost.max_batched_tokens] = run(None, cost.max_batched_tokens)
            sim = shared[cost.max_batched_tokens]
        runs.append(_Run(method, k, batch_size, cost, price(sim.log, cost, method.draft_cost), sim))
    return runs


@dataclasses.dataclass(frozen=True)
class _Rates:
    total: Totals
    tokens_per_s: float  # end to end
    decode_tokens_per_s: float


def _rates(run: _Run, num_requests: int) -> _Rates:
    total = ShardStats.aggregate(r.stats for r in run.simulation.results)
    return _Rates(total, run.priced.tokens_per_s(total.num_output_tokens),
                  run.priced.decode_tokens_per_s(total.num_output_tokens, num_requests))


def _records(runs: list[_Run], dataset: str, requests: Sequence[ReplayRequest], workload: Workload = Workload(),
             num_warmup_epochs: int = 0) -> list[ProjectionRecord]:
    rates = [_rates(run, len(requests)) for run in runs]
    none = {(run.batch_size, run.cost.name): r for run, r in zip(runs, rates) if run.method.name == "none"}
    expected = [expected_output(req) for req in requests]
    started_from = STARTED_FROM if not num_warmup_epochs else (
        f"state kept from {num_warmup_epochs} earlier epoch(s) of the same prompts; "
        "a request joins when one finishes (vLLM max_num_seqs)")
    records = []
    for run, r in zip(runs, rates):
        base = none[(run.batch_size, run.cost.name)]  # project() always replays none
        priced = run.priced
        records.append(ProjectionRecord(
            method=run.method.name, engine=f"projected:{run.cost.name}", cost_model=run.cost.name,
            dataset=dataset, batch_size=run.batch_size, k_max=run.k, num_requests=len(requests),
            mean_running=priced.mean_running, projected_tokens_per_s=r.tokens_per_s,
            projected_decode_tokens_per_s=r.decode_tokens_per_s, speedup_vs_none=r.tokens_per_s / base.tokens_per_s,
            decode_speedup_vs_none=r.decode_tokens_per_s / base.decode_tokens_per_s,
            tokens_per_forward=priced.tokens_per_forward(r.total.num_output_tokens, len(requests)),
            acceptance_rate=r.total.acceptance_rate, mean_drafted_tokens_per_step=priced.mean_drafted_per_row_step,
            drafting_share=priced.draft_seconds / priced.seconds if priced.seconds else 0.0, best_k=False,
            outputs_identical_to_none=[res.output_token_ids for res in run.simulation.results] == expected,
            started_from=started_from, draft_cost=run.method.draft_cost.source,
            accepted_per_pos=r.total.accepted_per_pos, num_output_tokens=r.total.num_output_tokens,
            tokens_per_s=r.tokens_per_s, **workload.fields(),
        ))
    return mark_best_k(records)


def mark_best_k(records: list[ProjectionRecord]) -> list[ProjectionRecord]:
    """`best_k` on the fastest K of each method, dataset, batch size and cost model."""
    best: dict[tuple, ProjectionRecord] = {}
    for r in records:
        key = (r.method, r.dataset, r.batch_size, r.cost_model)
        if key not in best or r.projected_tokens_per_s > best[key].projected_tokens_per_s:
            best[key] = r
    chosen = {id(r) for r in best.values()}
    return [dataclasses.replace(r, best_k=id(r) in chosen) for r in records]
