"""Real-engine throughput, methods side by side in one run (`specdec bench --engine vllm`).

Every method gets its own engine, started fresh (same model, same engine options), warmed
up on prompts that are not measured, then runs each batch size on the same prompts. Greedy
outputs are compared with `none`'s and the table says whether they are identical.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from specdec.bench.records import BenchRecord
from specdec.config import EngineConfig, SpecConfig
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)


def run_method(
    spec: SpecConfig,
    engine_cfg: EngineConfig,
    requests: Sequence[GenerationRequest],
    warmup: Sequence[GenerationRequest],
    batch_sizes: Sequence[int],
    dataset: str,
    reference: dict[str, list[int]] | None,
) -> tuple[list[BenchRecord], dict[str, list[int]]]:
    """Start an engine for `spec`, warm it up, time each batch size; return records + outputs."""
    from specdec.engines.vllm_engine import VllmEngine

    engine = VllmEngine(dataclasses.replace(engine_cfg, max_num_seqs=max(batch_sizes)), spec)
    try:
        engine.generate(warmup, GREEDY)
        records, outputs = [], {}
        for batch_size in batch_sizes:
            # A cold cross-request cache for every measurement: never score prompts against
            # a cache that already holds their own outputs.
            engine.reset_proposer()
            started = time.perf_counter()
            results = engine.generate(requests, GREEDY, batch_size=batch_size)
            seconds = time.perf_counter() - started
            outputs = {r.id: r.output_token_ids for r in results}
            records.append(_record(spec, dataset, batch_size, len(requests), seconds, results, reference))
        return records, outputs
    finally:
        engine.close()


def _record(
    spec: SpecConfig,
    dataset: str,
    batch_size: int,
    num_requests: int,
    seconds: float,
    results: Sequence[GenerationResult],
    reference: dict[str, list[int]] | None,
) -> BenchRecord:
    total = ShardStats.aggregate(r.stats for r in results)
    identical = None if reference is None else all(reference[r.id] == r.output_token_ids for r in results)
    return BenchRecord.from_stats(
        total,
        method=spec.method,
        engine="vllm",
        dataset=dataset,
        batch_size=batch_size,
        k_max=spec.k_max,
        num_requests=num_requests,
        outputs_identical_to_none=identical,
        started_from="fresh engine warmed up on other prompts; cold cross-request cache",
        tokens_per_s=total.num_output_tokens / seconds,
        seconds=seconds,
    )


def render_table(records: Sequence[BenchRecord]) -> str:
    base = {(r.dataset, r.batch_size): r.tokens_per_s for r in records if r.method == "none"}
    header = f"{'method':<10}{'batch':>6}{'tok/s':>9}{'x none':>8}{'tok/fwd':>9}{'accept':>8}  identical"
    lines = [header, "-" * len(header)]
    for r in records:
        ratio = r.tokens_per_s / base[(r.dataset, r.batch_size)] if (r.dataset, r.batch_size) in base else float("nan")
        ident = "-" if r.outputs_identical_to_none is None else ("yes" if r.outputs_identical_to_none else "NO")
        lines.append(
            f"{r.method:<10}{r.batch_size:>6}{r.tokens_per_s:>9.1f}{ratio:>8.2f}"
            f"{r.tokens_per_forward:>9.2f}{r.acceptance_rate:>8.2f}  {ident}"
        )
    return "\n".join(lines)
