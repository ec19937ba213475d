"""Replay benchmark (`specdec bench --engine replay` without `--cost`): reference outputs
generated once, then every method replayed on them, tokens per target forward per K.

Each method starts from a fresh drafter (a cold cross-request cache) for every K; requests
are replayed one after another in input order, so the cache only ever holds requests that
finished before the one being scored. With warm-up epochs the drafter first replays those
(untimed, unreported: new samples of the same prompts) and keeps its state for the measured
epoch.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.methods import Method
from bench.records import BenchRecord, Workload
from bench.replay import ReplayRequest, ReplayResult, expected_output, replay
from specdec.stats import ShardStats

STARTED_FROM = "cold: no cross-request state"


def run_replay(
    method: Method,
    requests: Sequence[ReplayRequest],
    k: int,
    dataset: str,
    warmup_epochs: Sequence[Sequence[ReplayRequest]] = (),
    workload: Workload = Workload(),
) -> tuple[BenchRecord, list[ReplayResult]]:
    """`method` on `requests` (the measured epoch), after replaying `warmup_epochs` in order
    through the same drafter; only `requests` are scored."""
    drafter = method.make_drafter(k, [r for epoch in warmup_epochs for r in epoch] + list(requests))
    for epoch in warmup_epochs:
        replay(epoch, drafter)
    results = replay(requests, drafter)
    started_from = STARTED_FROM
    if warmup_epochs:
        started_from = f"state kept from {len(warmup_epochs)} earlier epoch(s) of the same prompts"
    identical = all(r.output_token_ids == expected_output(req) for r, req in zip(results, requests, strict=True))
    record = BenchRecord.from_stats(
        ShardStats.aggregate(r.stats for r in results),
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


def render_replay_table(records: Sequence[BenchRecord]) -> str:
    """Tokens per forward per method and K, and the ratio to vLLM's default n-gram."""
    ngram = {(r.dataset, r.k_max): r.tokens_per_forward for r in records if r.method == "ngram"}
    header = f"{'dataset':<12}{'method':<19}{'K':>3}{'tok/fwd':>9}{'x ngram':>9}{'accept':>8}  identical"
    lines = [header, "-" * len(header)]
    for r in records:
        base = ngram.get((r.dataset, r.k_max))
        ratio = f"{r.tokens_per_forward / base:>9.2f}" if base else f"{'-':>9}"
        lines.append(
            f"{r.dataset:<12}{r.method:<19}{r.k_max:>3}{r.tokens_per_forward:>9.3f}{ratio}"
            f"{r.acceptance_rate:>8.3f}  {'yes' if r.outputs_identical_to_none else 'NO'}"
        )
    return "\n".join(lines)
