"""What a finished run shows in the Prefect UI: a per-shard table and a markdown summary."""

from __future__ import annotations

import re

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from specdec.pilot import WHOLE_SHARES, PilotDecision
from specdec.stats import RunStats
from tasks.charts import charts_markdown
from tasks.staging import RunManifest, ShardManifest


def _key(run_id: str, what: str) -> str:
    # Artifact keys allow lowercase letters, digits and dashes only.
    return re.sub(r"[^a-z0-9-]+", "-", f"{what}-{run_id}".lower()).strip("-")[:120]


def shard_rows(outcomes: list[ShardManifest]) -> list[dict[str, object]]:
    rows = []
    for m in outcomes:
        s = m.stats
        rows.append({
            "shard": m.shard_id,
            "prompts": m.num_prompts,
            "rejected": m.num_rejected,
            "output tokens": s.num_output_tokens,
            "acceptance rate": round(s.acceptance_rate, 4) if s.num_draft_tokens else None,
            "tokens per target forward": round(s.tokens_per_forward, 3) if s.num_steps else None,
            "tokens/s": round(s.num_output_tokens / m.generate_s, 1) if m.generate_s else None,
        })
    return rows


def summary_markdown(run: RunManifest, outcomes: list[ShardManifest]) -> str:
    total = RunStats.aggregate(m.stats for m in outcomes)
    generate_s = sum(m.generate_s for m in outcomes)
    wall = run.wall_s or 0.0
    lines = [
        f"# Run `{run.run_id}`: {run.status}",
        f"- method `{run.method}`, config `{run.config_hash}`, source `{run.source}`",
        f"- shards: {len(outcomes)} of {run.num_shards}; prompts: {sum(m.num_prompts for m in outcomes)}",
        f"- output tokens: {total.num_output_tokens}; acceptance rate {total.acceptance_rate:.3f}; "
        f"tokens per target forward {total.tokens_per_forward:.3f}",
        f"- wall {wall:.1f} s: generation {generate_s:.1f} s, engine start {run.engine_start_s or 0:.1f} s, "
        f"outside generation {(1 - generate_s / wall) if wall else 0:.1%}",
    ]
    if run.message:
        lines.append(f"- failures: {run.message}")
    return "\n".join(lines + engine_choice_lines(run.pilot))


def engine_choice_lines(pilot: list[dict[str, object]]) -> list[str]:
    """Method auto: each kind's decision in its own sentence, with the pilot's figures."""
    if not pilot:
        return []
    lines = ["", "## Engine choice"]
    for decision in map(PilotDecision.from_dict, pilot):
        measured = [f"{p.method} {p.tokens_per_s_on(decision.basis):.1f}"
                    for p in (decision.none, decision.specdec) if p is not None]
        figures = f". Pilot: {', '.join(measured)} output tokens/s on {decision.basis or WHOLE_SHARES}" if measured else ""
        lines.append(f"- {decision.reason}{figures}.")
    return lines


def publish_run_artifacts(run_id: str, run: RunManifest, outcomes: list[ShardManifest], db: str | None = None) -> None:
    """The shard table and the summary, with the run's charts from `db` (ingested) below it."""
    create_table_artifact(table=shard_rows(outcomes), key=_key(run_id, "shards"),
                          description=f"Per-shard acceptance and throughput of run {run_id}")
    charts = f"\n\n{charts_markdown(db, run_id)}" if db else ""
    create_markdown_artifact(markdown=summary_markdown(run, outcomes) + charts, key=_key(run_id, "summary"),
                             description=f"Summary of run {run_id}")
