"""`specdec bench --engine replay`: every method replayed in batches on the reference outputs, each step
priced by a step-time model. Fixed-K methods run at every K (tables show the best), specdec at the largest,
its budget learning the step cost from the simulated times; warm-up epochs first, unpriced, states kept."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from bench.cost_models import CostModel, Priced, price
from bench.drafters import Method, all_methods
from bench.plots import MethodRecord, grouped, table
from bench.reference import Workload
from bench.replay import ReplayRequest, SimulatedStepTimer, Simulation, expected_output, simulate
from specdec.pilot import PilotPass, decide, skipped
from specdec.stats import ShardStats

BASELINES = ("ngram", "ngram[2..5]", "suffix")
METHOD_ORDER = ("none", *BASELINES, "specdec[no-budget]", "specdec", "oracle")


@dataclasses.dataclass(frozen=True)
class ProjectionRecord(MethodRecord):
    cost_model: str
    mean_running: float  # requests running per step
    projected_tokens_per_s: float  # end to end: prefill, decode and drafting
    projected_decode_tokens_per_s: float  # decode steps (their share of mixed steps) and drafting
    speedup_vs_none: float  # end to end, against none at the same batch size and cost model
    decode_speedup_vs_none: float
    mean_drafted_tokens_per_step: float  # draft tokens verified per running request per step
    drafting_share: float  # the drafter's share of the projected time
    best_k: bool  # the fastest K of this method, dataset, batch size and cost model
    draft_cost: str  # how the drafter's time was counted
    host_s: float = 0.0  # the cost model's host term per step, paid by synchronous methods
    synchronous: bool = True  # vLLM would schedule this method synchronously on a GPU


@dataclasses.dataclass(frozen=True)
class _Run:
    method: Method
    k: int
    batch_size: int
    cost: CostModel
    priced: Priced
    simulation: Simulation


def project(requests: Sequence[ReplayRequest], dataset: str, methods: Sequence[Method], ks: Sequence[int],
            batch_sizes: Sequence[int], costs: Sequence[CostModel], max_model_len: int,
            progress: Callable[[str], None] = lambda _: None, warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
            workload: Workload = Workload()) -> list[ProjectionRecord]:
    """Records for every method, K, batch size (at most the requests) and cost model; `none` always runs."""
    if all(m.name != "none" for m in methods):
        methods = [all_methods()["none"], *methods]
    runs: list[_Run] = []
    for batch_size in batch_sizes:
        if batch_size > len(requests):
            progress(f"{dataset}: batch {batch_size} skipped: only {len(requests)} prompts")
            continue
        for method in methods:
            for k in [0] if method.name == "none" else list(ks) if method.tuned_k else [max(ks)]:
                runs += simulate_and_price(requests, method, k, batch_size, costs, max_model_len, warmup_epochs)
                progress(f"{dataset} batch {batch_size} {method.name} K={k}: done")
    totals = [ShardStats.aggregate(r.stats for r in run.simulation.results) for run in runs]
    n = len(requests)  # each request's first token is its prefill's
    rates = [(t.num_output_tokens / (run.priced.seconds or math.inf),
              (t.num_output_tokens - n) / (run.priced.decode_seconds or math.inf)) for run, t in zip(runs, totals)]
    none = {(run.batch_size, run.cost.name): r for run, r in zip(runs, rates) if run.method.name == "none"}
    expected = [expected_output(req) for req in requests]
    started_from = (f"state kept from {workload.epochs - 1} earlier epoch(s) of the same prompts" if workload.epochs > 1
                    else "cold cross-request cache") + "; a request joins when one finishes (vLLM max_num_seqs)"
    records = []
    for run, total, (e2e, decode) in zip(runs, totals, rates):
        base, priced = none[(run.batch_size, run.cost.name)], run.priced
        records.append(ProjectionRecord(
            method=run.method.name, engine=f"projected:{run.cost.name}", cost_model=run.cost.name,
            dataset=dataset, batch_size=run.batch_size, k_max=run.k, num_requests=n,
            mean_running=priced.mean_running, projected_tokens_per_s=e2e, projected_decode_tokens_per_s=decode,
            speedup_vs_none=e2e / base[0], decode_speedup_vs_none=decode / base[1],
            tokens_per_forward=total.num_output_tokens / (priced.num_decode_row_steps + n),  # prefill's forward too
            acceptance_rate=total.acceptance_rate, mean_drafted_tokens_per_step=priced.mean_drafted_per_row_step,
            drafting_share=priced.draft_seconds / priced.seconds if priced.seconds else 0.0, best_k=False,
            outputs_identical_to_none=[res.output_token_ids for res in run.simulation.results] == expected,
            started_from=started_from, draft_cost=run.method.draft_cost.source,
            accepted_per_pos=total.accepted_per_pos, num_output_tokens=total.num_output_tokens,
            tokens_per_s=e2e, host_s=run.cost.host_s, synchronous=run.method.synchronous, **workload.record_fields(),
        ))
    runs_of = grouped(records, lambda r: (r.method, r.dataset, r.batch_size, r.cost_model))
    best = {id(max(runs, key=lambda r: r.projected_tokens_per_s)) for runs in runs_of}  # each one's best K
    return [dataclasses.replace(r, best_k=id(r) in best) for r in records]


def simulate_and_price(requests: Sequence[ReplayRequest], method: Method, k: int, batch_size: int,
                       costs: Sequence[CostModel], max_model_len: int,
                       warmup_epochs: Sequence[Sequence[ReplayRequest]] = ()) -> list[_Run]:
    """Without the budget a replay does not depend on the clock: one per token budget."""
    runs = []
    shared: dict[int, Simulation] = {}
    every = [r for epoch in warmup_epochs for r in epoch] + list(requests)  # the oracle knows them all

    def run(learner: SimulatedStepTimer | None, max_batched_tokens: int) -> Simulation:
        drafter = method.make_drafter(k, every)
        for epoch in warmup_epochs:  # the drafter and the step timer keep what they learn
            simulate(epoch, drafter, batch_size, max_batched_tokens, learner)
        return simulate(requests, drafter, batch_size, max_batched_tokens, learner)

    for cost in costs:
        paid = cost.run_by(method.synchronous)  # the budget learns the host term with the step it is in
        if method.budget:
            sim = run(SimulatedStepTimer(paid, k, batch_size, max_model_len), cost.max_batched_tokens)
        elif (sim := shared.get(cost.max_batched_tokens)) is None:
            sim = shared[cost.max_batched_tokens] = run(None, cost.max_batched_tokens)
        runs.append(_Run(method, k, batch_size, cost, price(sim.log, paid, method.draft_cost), sim))
    return runs


def shown(records: Sequence[ProjectionRecord]) -> list[ProjectionRecord]:
    """Each method's best K per dataset, batch size and cost model, in table order."""
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    picked = [r for r in records if r.best_k]
    return sorted(picked, key=lambda r: (r.cost_model, r.dataset, r.batch_size, order.get(r.method, len(order)), r.method))


@dataclasses.dataclass(frozen=True)
class AutoPilot:
    """Method auto on `run_requests` requests: a pilot runs `requests` of them, half on none, half on specdec (every
    result kept), the rest on the one specdec.pilot picks (the pilot measures the run's rates; starts not priced)."""

    requests: int  # the pilot's sample, split between the engines
    margin: float  # the share by which specdec must beat none
    min_requests: int  # smaller kinds run specdec without a pilot
    run_requests: int  # the kind's requests

    def figure(self, none_rate: float, specdec_rate: float, tokens_per_request: float) -> tuple[str, float]:
        """(engine the kind runs on, tokens/s over the run, the pilot's share on the other engine included)."""
        rates = {"none": none_rate, "specdec": specdec_rate}
        if self.run_requests < self.min_requests:
            method = skipped("", self.run_requests, self.min_requests, self.margin).method
            return method, rates[method]
        n = min(self.requests, self.run_requests)
        shares = {"none": (n + 1) // 2, "specdec": n // 2}
        passes = {m: PilotPass(m, shares[m], round(shares[m] * tokens_per_request),
                               shares[m] * tokens_per_request / rate) for m, rate in rates.items()}
        method = decide("", passes["none"], passes["specdec"], self.margin).method
        rest_s = (self.run_requests - n) * tokens_per_request / rates[method]
        return method, self.run_requests * tokens_per_request / (rest_s + sum(p.engine_s for p in passes.values()))


def render_projection_table(records: Sequence[ProjectionRecord], pilots: Sequence[AutoPilot] = ()) -> str:
    """A table per cost model and dataset; a method slower than `none` is marked BELOW; method auto's row per pilot."""
    columns = [("batch", ">5"), ("running", ">8.1f"), ("  method", "<21"), ("K", ">3"), ("tok/s", ">10.1f"),
               ("decode", ">10.1f"), ("x none", ">8.3f"), ("tok/fwd", ">8.2f"), ("accept", ">7.2f"), ("drafted", ">8.2f"),
               ("drafting", ">9.1%"), ("", "")]
    below = lambda speedup: "  BELOW none" if speedup < 1 else ""  # noqa: E731
    blocks = []
    for group in grouped(shown(records), lambda r: (r.cost_model, r.dataset)):
        rows = []
        for at in grouped(group, lambda r: r.batch_size):
            rows += [(r.batch_size, r.mean_running, "  " + method_label(r), None if r.method == "none" else r.k_max,
                      r.projected_tokens_per_s, r.projected_decode_tokens_per_s, r.speedup_vs_none, r.tokens_per_forward,
                      r.acceptance_rate, r.mean_drafted_tokens_per_step, r.drafting_share, below(r.speedup_vs_none)
                      + ("" if r.outputs_identical_to_none else "  OUTPUT DIFFERS")) for r in at]
            pair = {r.method: r for r in at if r.method in ("none", "specdec")}
            for p in pilots if len(pair) == 2 else ():
                method, rate = p.figure(pair["none"].projected_tokens_per_s, pair["specdec"].projected_tokens_per_s,
                                        pair["none"].num_output_tokens / pair["none"].num_requests)
                x = rate / pair["none"].projected_tokens_per_s
                rows.append((at[0].batch_size, None, f"  auto[{p.run_requests}] {method}", None, rate, None, x, None,
                             None, None, None, below(x)))
        r = group[0]
        host = f"; synchronous methods pay a host term of {r.host_s * 1e3:.3f} ms per step that none (async) overlaps"
        auto = (f"; auto[N] X: method auto on N requests, its pilot running {pilots[0].requests} of them, half on none "
                f"and half on specdec (margin {pilots[0].margin:.0%}), the rest on X") if pilots else ""
        prompts = f"{r.num_requests} prompts" if r.temperature == 0 else (
            f"{r.num_requests} requests ({r.num_requests // r.samples} prompts x {r.samples} samples at T={r.temperature:g})")
        blocks.append("\n".join([f"projected on {r.cost_model}: {r.dataset}, {prompts}{f', epoch {r.epoch}' * (r.epoch > 1)} "
                                 f"(tok/s end to end; decode: decode steps and drafting only; drafted: draft tokens "
                                 f"per running request per step{host * (r.host_s > 0)}{auto})", *table(columns, rows), "",
                                 *standing(group)]))
    return "\n\n".join(blocks)


def method_label(r: ProjectionRecord) -> str:
    """`none (async)` where the cost model has a host term the synchronous methods pay."""
    return f"{r.method} (async)" if r.host_s and not r.synchronous else r.method


def standing(group: Sequence[ProjectionRecord]) -> list[str]:
    lines = []
    for batch in sorted({r.batch_size for r in group}):
        at = {r.method: r for r in group if r.batch_size == batch}
        ours = at.get("specdec")
        baselines = [at[m] for m in BASELINES if m in at]
        if ours is None or not baselines:
            continue
        best = max(baselines, key=lambda r: r.projected_tokens_per_s)
        oracle = at.get("oracle")
        ceiling = f", oracle {oracle.speedup_vs_none:.2f}x none" if oracle else ""
        below = " (BELOW none)" if ours.speedup_vs_none < 1 else ""
        lines.append(f"batch {batch:>4}: specdec {ours.speedup_vs_none:.2f}x {method_label(at['none'])}{below}, "
                     f"{ours.projected_tokens_per_s / best.projected_tokens_per_s:.2f}x the best baseline "
                     f"({best.method} K={best.k_max}, {best.speedup_vs_none:.2f}x none){ceiling}")
    return lines
