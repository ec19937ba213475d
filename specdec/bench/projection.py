"""Projected throughput at real batch sizes: every method replayed in batches, every step
priced by a step-time model (`specdec bench --engine replay --cost ...`).

Acceptance comes from replaying the bundled model's greedy outputs (what each drafter would
have had accepted, step by step); the time of each step comes from the cost model (e.g. the
published Llama-3.1-8B / H100 fit) plus the drafter's own time. A projection therefore says
what our drafter and budget would do on that hardware if the target accepted what the
bundled model accepts; it is not a measurement.

Every method is priced the same way. Methods with a fixed K are replayed for every K of the
sweep and shown at their best K for each batch size and cost model; `specdec` runs at the
largest K, its batch budget sizing the drafts from a step-cost model it learns from the
simulated step times (never handed the cost model itself). `oracle` drafts the target's own
tokens, always accepted, at no drafting cost: the ceiling any drafter can reach.

With a sampled reference the target's tokens are one sample per request (several per prompt),
and a draft token counts as accepted iff it equals the sampled one: as likely as the
engine's rejection sampling accepting it (docs/internals.md, "Benchmarks"). With warm-up
epochs, every method's controller (and specdec's step timer) first replays those epochs in
batches, untimed and unpriced, and keeps its state for the measured epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from specdec.bench.batched_replay import SimulatedStepTimer, Simulation, simulate
from specdec.bench.cost_models import CostModel
from specdec.bench.pricing import DraftCost, Priced, price
from specdec.bench.records import ProjectionRecord, Workload
from specdec.bench.replay_bench import NullProposer, expected_output
from specdec.config import ConfigError, PolicyConfig, SpecConfig
from specdec.controller import Controller, DraftController
from specdec.controller import make_controller as controller_for
from specdec.drafting.base import Proposer
from specdec.drafting.native import native_available
from specdec.engines.replay import ReplayRequest
from specdec.params import DrafterKind
from specdec.stats import ShardStats, Totals

FIXED = PolicyConfig(adaptive=False)
STARTED_FROM = "cold cross-request cache; a request joins when one finishes (vLLM max_num_seqs)"

# vLLM's own drafters, fitted to what `specdec bench-propose` measures on the project's 2-core
# machine (docs/internals.md, contexts of 1k tokens as in the projected sets): vLLM's n-gram
# 12 us per step at batch 1 and 2.3-2.9 us per request per step at batch 64-256; arctic's
# suffix cache 11.6 at batch 1 and 9-11 at 64-256, plus 2.3 us per output token to update its
# tree (its insert cost there).
NGRAM_DRAFT = DraftCost(per_call_s=10e-6, per_row_s=2.2e-6, source="vLLM numba n-gram, 10 us per step + 2.2 us per row")
SUFFIX_DRAFT = DraftCost(per_call_s=2e-6, per_row_s=10e-6, per_emitted_token_s=2.3e-6,
                         source="arctic suffix cache, 2 us per step + 10 us per row + 2.3 us per output token")
OUR_DRAFT = DraftCost(measured=True, source="measured: thread CPU time of the worker's proposer calls")
# specdec's proposer call as the worker makes it (`specdec bench-propose`, specdec-worker:
# 4.4-4.8 us per step at batch 1, 0.4-0.6 us per request per step at 64-256; 0.44 us per
# token added to the cache, here counted per output token). It prices specdec where the
# replay has to run the Python reference: the same drafts, many times the time.
NATIVE_DRAFT = DraftCost(per_call_s=4e-6, per_row_s=0.5e-6, per_emitted_token_s=0.44e-6,
                         source="figure: compiled controller and drafter (bench-propose), 4 us per step + "
                                "0.5 us per row + 0.44 us per output token")


def draft_cost_figure(text: str) -> DraftCost:
    """`ROW` or `ROW+TOKEN` microseconds: per row per step, plus per output token."""
    row, _, token = text.partition("+")
    try:
        per_row, per_token = float(row), float(token or 0.0)
    except ValueError as exc:
        raise ConfigError(f"drafting cost {text!r}: expected ROW or ROW+TOKEN microseconds") from exc
    return DraftCost(per_row_s=per_row * 1e-6, per_emitted_token_s=per_token * 1e-6,
                     source=f"figure: {per_row:g} us per row per step + {per_token:g} us per output token")


@dataclasses.dataclass(frozen=True)
class ProjectedMethod:
    name: str
    make_controller: Callable[[int, Sequence[ReplayRequest]], Controller]  # (K, the requests)
    draft_cost: DraftCost
    budget: bool = False  # the batch budget sizes drafts, learning the step cost in the loop
    tuned_k: bool = True  # replayed for every K, shown at its best


class OracleProposer:
    """Drafts the target's own next tokens: every draft is accepted."""

    def __init__(self, requests: Sequence[ReplayRequest]) -> None:
        self._sequences = {
            r.id: np.concatenate([np.asarray(r.prompt_token_ids, dtype=np.int64), np.asarray(r.greedy_tokens, dtype=np.int64)])
            for r in requests
        }

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        n = int(tokens.shape[0])
        return self._sequences[req_id][n : n + max(k, 0)]

    def forget(self, req_id: str) -> None:
        return None


def fixed_k_controller(method: str, proposer: Callable[[int, Sequence[ReplayRequest]], Proposer]):
    def make(k: int, requests: Sequence[ReplayRequest]) -> DraftController:
        return DraftController(SpecConfig(method=method, k_max=k, policy=FIXED), proposer(k, requests))

    return make


def specdec_drafter(requested: DrafterKind = "native") -> tuple[DrafterKind, DraftCost]:
    """The drafter a projection runs for specdec, and how its time is counted. A projection
    prices the drafter the product ships, the compiled one: timed where it is installed and
    asked for; otherwise the Python reference drafts (the same tokens) and the compiled
    drafter's bench-propose figure prices them."""
    if requested == "native" and native_available():
        return "native", OUR_DRAFT
    return "python", NATIVE_DRAFT


def projected_methods(our_draft: DraftCost | None = None, drafter: DrafterKind = "native") -> dict[str, ProjectedMethod]:
    """The methods a projection compares; `drafter` and `our_draft` as `specdec_drafter`
    says, unless `our_draft` is given (a figure answers what a faster drafter would project)."""
    from specdec.engines.baselines import VllmNgramProposer

    drafter, default_draft = specdec_drafter(drafter)
    our_draft = our_draft or default_draft
    ours = lambda k, _: controller_for(SpecConfig(method="specdec", k_max=k, drafter=drafter))  # noqa: E731
    methods = [
        ProjectedMethod("none", fixed_k_controller("none", lambda k, _: NullProposer()), DraftCost(), tuned_k=False),
        ProjectedMethod("ngram", fixed_k_controller("ngram", lambda k, _: VllmNgramProposer(5, 5)), NGRAM_DRAFT),
        ProjectedMethod("ngram[2..5]", fixed_k_controller("ngram", lambda k, _: VllmNgramProposer(2, 5)), NGRAM_DRAFT),
        ProjectedMethod("specdec", ours, our_draft, budget=True, tuned_k=False),
        ProjectedMethod("specdec[no-budget]", ours, our_draft),
        # Any speculative method name will do: the proposer is given.
        ProjectedMethod("oracle", fixed_k_controller("ngram", lambda k, reqs: OracleProposer(reqs)), DraftCost()),
    ]
    methods[3:3] = _suffix_methods()
    return {m.name: m for m in methods}


def _suffix_methods() -> list[ProjectedMethod]:
    try:
        from specdec.drafting.suffix_baseline import ArcticSuffixProposer  # needs arctic-inference
    except ImportError:
        return []
    return [
        # As vLLM runs it: at most min(K, 1.0 x match length + 0) tokens.
        ProjectedMethod("suffix", fixed_k_controller("suffix", lambda k, _: ArcticSuffixProposer()), SUFFIX_DRAFT),
        # K tokens whatever the match length (the tree's probabilities still cut it).
        ProjectedMethod("suffix[fixed-K]", fixed_k_controller("suffix", lambda k, _: ArcticSuffixProposer(
            max_spec_factor=0.0, max_spec_offset=float(k))), SUFFIX_DRAFT),
    ]


@dataclasses.dataclass(frozen=True)
class _Run:
    method: ProjectedMethod
    k: int
    batch_size: int
    cost: CostModel
    priced: Priced
    simulation: Simulation


def project(
    requests: Sequence[ReplayRequest],
    dataset: str,
    methods: Sequence[ProjectedMethod],
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
    through each method's controller, at the same batch size, unpriced; `requests` is the
    epoch measured."""
    if all(m.name != "none" for m in methods):
        methods = [projected_methods()["none"], *methods]
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


def _ks(method: ProjectedMethod, ks: Sequence[int]) -> list[int]:
    if method.name == "none":
        return [0]
    return list(ks) if method.tuned_k else [max(ks)]


def _simulate_and_price(
    requests: Sequence[ReplayRequest], method: ProjectedMethod, k: int, batch_size: int,
    costs: Sequence[CostModel], max_model_len: int, warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
) -> list[_Run]:
    """Without the budget a replay's decisions do not depend on the clock: one replay per
    scheduler token budget serves every cost model with that budget."""
    runs = []
    shared: dict[int, Simulation] = {}
    every = [r for epoch in warmup_epochs for r in epoch] + list(requests)  # the oracle knows them all

    def run(learner: SimulatedStepTimer | None, max_batched_tokens: int) -> Simulation:
        controller = method.make_controller(k, every)
        for epoch in warmup_epochs:  # the controller and the step timer keep what they learn
            simulate(epoch, controller, batch_size, max_batched_tokens, learner)
        return simulate(requests, controller, batch_size, max_batched_tokens, learner)

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
