"""Replay benchmark: reference outputs (greedy, or sampled) generated once, then every
proposer replayed on them.

Each method starts from a fresh controller (a cold cross-request cache) for every K; requests
are replayed one after another in input order, so the cache only ever holds requests that
finished before the one being scored. With warm-up epochs, the controller first replays
those (untimed, unreported: new samples of the same prompts) and keeps its state for the
measured epoch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from specdec.bench.records import BenchRecord, Workload
from specdec.config import PolicyConfig, SpecConfig
from specdec.controller import make_controller
from specdec.default_proposer import default_proposer
from specdec.drafting.base import Proposer
from specdec.engines.replay import ReplayRequest, ReplayResult, replay, replay_with
from specdec.stats import ShardStats


class NullProposer:
    """Never drafts: decoding without speculation."""

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        return tokens[:0]

    def forget(self, req_id: str) -> None:
        return None


@dataclasses.dataclass(frozen=True)
class ReplayMethod:
    """A named way to draft: a SpecConfig plus, for baselines, the proposer to use."""

    name: str
    make_config: Callable[[int], SpecConfig]
    make_proposer: Callable[[], Proposer] | None = None
    started_from: str = "cold: no cross-request state"
    warm: bool = False  # persisted-cache mode: scored with a cache built from the other prompts


def builtin_methods(drafter: str = "native") -> dict[str, ReplayMethod]:
    """The replay methods; `drafter` is the implementation the specdec ones run (native or
    python: the same drafts, so the same figures)."""
    from specdec.engines.baselines import VllmNgramProposer

    fixed = PolicyConfig(adaptive=False)
    methods = {
        "none": ReplayMethod("none", lambda k: SpecConfig(method="none", k_max=k, policy=fixed), NullProposer),
        "ngram": ReplayMethod(
            "ngram", lambda k: SpecConfig(method="ngram", k_max=k, policy=fixed), lambda: VllmNgramProposer(5, 5)
        ),
        "ngram[2..5]": ReplayMethod(
            "ngram[2..5]", lambda k: SpecConfig(method="ngram", k_max=k, policy=fixed), lambda: VllmNgramProposer(2, 5)
        ),
        # Replay has no clock, so the batch budget (which prices verification) does not
        # apply: every request drafts up to K, as on the real engine when verifying is cheap.
        "specdec": ReplayMethod("specdec", lambda k: SpecConfig(method="specdec", k_max=k, drafter=drafter)),
        # The same drafter sized by the acceptance-window policy instead of the budget.
        "specdec[window-K]": ReplayMethod(
            "specdec[window-K]",
            lambda k: SpecConfig(method="specdec", k_max=k, policy=PolicyConfig(adaptive=True), drafter=drafter),
        ),
        # What a nightly run gains from the cache file the previous run saved (--cache-file).
        "specdec[warm]": ReplayMethod(
            "specdec[warm]",
            lambda k: SpecConfig(method="specdec", k_max=k, drafter=drafter),
            started_from="warm: cache of the other half of the prompts' outputs (2-fold)",
            warm=True,
        ),
    }
    suffix = _suffix_method()
    if suffix is not None:
        methods["suffix"] = suffix
    return methods


def _suffix_method() -> ReplayMethod | None:
    try:
        from specdec.drafting.suffix_baseline import ArcticSuffixProposer  # needs arctic-inference
    except ImportError:
        return None
    return ReplayMethod(
        "suffix", lambda k: SpecConfig(method="suffix", k_max=k, policy=PolicyConfig(adaptive=False)), ArcticSuffixProposer
    )


def run_replay(
    method: ReplayMethod,
    requests: Sequence[ReplayRequest],
    k: int,
    dataset: str,
    warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
    workload: Workload = Workload(),
) -> tuple[BenchRecord, list[ReplayResult]]:
    """`method` on `requests` (the measured epoch), after replaying `warmup_epochs` in order
    through the same controller; only `requests` are scored."""
    started_from = method.started_from
    if method.warm:
        if warmup_epochs:
            raise ValueError(f"{method.name} starts from its own 2-fold cache: no warm-up epochs")
        results = _replay_warm(method, requests, k)
    else:
        proposer = method.make_proposer() if method.make_proposer else None
        controller = make_controller(method.make_config(k), proposer)
        for epoch in warmup_epochs:
            replay_with(controller, epoch)
        results = replay_with(controller, requests)
        if warmup_epochs:
            started_from = f"state kept from {len(warmup_epochs)} earlier epoch(s) of the same prompts"
    total = ShardStats.aggregate(r.stats for r in results)
    identical = all(
        r.output_token_ids == expected_output(req) for r, req in zip(results, requests, strict=True)
    )
    record = BenchRecord.from_stats(
        total,
        method=method.name,
        engine="replay",
        dataset=dataset,
        batch_size=1,
        k_max=k,
        num_requests=len(requests),
        outputs_identical_to_none=identical,
        started_from=started_from,
        **workload.fields(),
    )
    return record, results


def _replay_warm(method: ReplayMethod, requests: Sequence[ReplayRequest], k: int) -> list[ReplayResult]:
    """Each half is scored by a controller whose cache already holds the other half's
    outputs, as if loaded from the file a previous run saved; no prompt is ever scored
    against a cache holding its own output, and every prompt is scored once."""
    half = len(requests) // 2
    folds = [(requests[half:], requests[:half]), (requests[:half], requests[half:])]
    scored: dict[str, ReplayResult] = {}
    for warm_up, score in folds:
        config = method.make_config(k)
        proposer, _ = default_proposer(config)  # its cache carries over from one replay to the next
        replay(warm_up, config, proposer)
        scored.update({r.id: r for r in replay(score, config, proposer)})
    return [scored[r.id] for r in requests]


def expected_output(req: ReplayRequest) -> list[int]:
    out = [int(t) for t in req.greedy_tokens[: req.max_tokens]]
    for i, tok in enumerate(out):
        if tok in req.stop_token_ids:
            return out[: i + 1]
    return out


def render_replay_table(records: Sequence[BenchRecord]) -> str:
    best_ngram = {}
    for r in records:
        if r.method == "ngram":  # vLLM ngram, its default settings
            best_ngram[(r.dataset, r.k_max)] = r.tokens_per_forward
    header = f"{'dataset':<12}{'method':<17}{'K':>3}{'tok/fwd':>9}{'x ngram':>9}{'accept':>8}  identical"
    lines = [header, "-" * len(header)]
    for r in records:
        base = best_ngram.get((r.dataset, r.k_max))
        ratio = f"{r.tokens_per_forward / base:>9.2f}" if base else f"{'-':>9}"
        lines.append(
            f"{r.dataset:<12}{r.method:<17}{r.k_max:>3}{r.tokens_per_forward:>9.3f}{ratio}"
            f"{r.acceptance_rate:>8.3f}  {'yes' if r.outputs_identical_to_none else 'NO'}"
        )
    return "\n".join(lines)
