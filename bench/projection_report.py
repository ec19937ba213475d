"""Tables of projected throughput (bench/projection.py): one per cost model and
dataset, each method at the K shown (its best for fixed-K methods), then how `specdec`
stands against `none`, the best baseline and the oracle's ceiling at each batch size."""

from __future__ import annotations

from collections.abc import Sequence

from bench.records import ProjectionRecord

BASELINES = ("ngram", "ngram[2..5]", "suffix", "suffix[fixed-K]")
METHOD_ORDER = ("none", *BASELINES, "specdec[no-budget]", "specdec", "oracle")


def shown(records: Sequence[ProjectionRecord]) -> list[ProjectionRecord]:
    """The records a table shows: each method's best K per dataset, batch size and cost model
    (methods replayed at one K have only that one)."""
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    picked = [r for r in records if r.best_k]
    return sorted(picked, key=lambda r: (r.cost_model, r.dataset, r.batch_size, order.get(r.method, len(order)), r.method))


def render_projection_table(records: Sequence[ProjectionRecord]) -> str:
    header = (f"{'batch':>5}{'running':>8}  {'method':<19}{'K':>3}{'tok/s':>10}{'decode':>10}{'x none':>8}"
              f"{'tok/fwd':>8}{'accept':>7}{'drafted':>8}{'drafting':>9}")
    blocks = []
    rows = shown(records)
    for cost_model, dataset in dict.fromkeys((r.cost_model, r.dataset) for r in rows):
        group = [r for r in rows if (r.cost_model, r.dataset) == (cost_model, dataset)]
        lines = [f"projected on {cost_model}: {dataset}, {_requests(group[0])} "
                 f"(tok/s end to end; decode: decode steps and drafting only; drafted: draft tokens "
                 f"per running request per step)", header, "-" * len(header)]
        for r in group:
            k = "-" if r.method == "none" else str(r.k_max)
            lines.append(
                f"{r.batch_size:>5}{r.mean_running:>8.1f}  {r.method:<19}{k:>3}{r.projected_tokens_per_s:>10.1f}"
                f"{r.projected_decode_tokens_per_s:>10.1f}{r.speedup_vs_none:>8.2f}{r.tokens_per_forward:>8.2f}"
                f"{r.acceptance_rate:>7.2f}{r.mean_drafted_tokens_per_step:>8.2f}{r.drafting_share:>9.1%}"
                + ("" if r.outputs_identical_to_none else "  OUTPUT DIFFERS")
            )
        blocks.append("\n".join(lines + [""] + standing(group)))
    return "\n\n".join(blocks)


def _requests(r: ProjectionRecord) -> str:
    """"16 prompts" (greedy), "128 requests (16 prompts x 8 samples at T=0.8), epoch 2"."""
    if r.temperature == 0:
        text = f"{r.num_requests} prompts"
    else:
        text = (f"{r.num_requests} requests ({r.num_requests // r.samples} prompts x {r.samples} samples "
                f"at T={r.temperature:g})")
    return text + (f", epoch {r.epoch}" if r.epoch > 1 else "")


def standing(group: Sequence[ProjectionRecord]) -> list[str]:
    """specdec against none, the best baseline (at its best K) and the oracle, per batch size."""
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
        lines.append(
            f"batch {batch:>4}: specdec {ours.speedup_vs_none:.2f}x none, "
            f"{ours.projected_tokens_per_s / best.projected_tokens_per_s:.2f}x the best baseline "
            f"({best.method} K={best.k_max}, {best.speedup_vs_none:.2f}x none){ceiling}"
        )
    return lines
