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
DEFAULT_METHODS = ("none", "ngram", "ngram[2..5]", "suffix", "specdec")


def engine_methods(k: int, draft_model: str | None = None) -> dict[str, SpecConfig]:
    """The real-engine methods by bench name (`ngram` is vLLM's default 5..5 lookup)."""
    methods = {
        "none": SpecConfig(method="none", k_max=k),
        "ngram": SpecConfig(method="ngram", k_max=k, ngram_min=5, ngram_max=5),
        "ngram[2..5]": SpecConfig(method="ngram", k_max=k, ngram_min=2, ngram_max=5),
        "suffix": SpecConfig(method="suffix", k_max=k),
        "specdec": SpecConfig(method="specdec", k_max=k),
        "specdec[no-budget]": SpecConfig(method="specdec", k_max=k, budget=False),
    }
    if draft_model:
        methods["draft"] = SpecConfig(method="draft", k_max=k, draft_model=draft_model)
    return methods


def prompts_for_batch(requests: Sequence[GenerationRequest], batch_size: int, min_prompts: int) -> Sequence[GenerationRequest]:
    """At least one full batch, and at least `min_prompts` (small batches need several rounds)."""
    return requests[: max(batch_size, min_prompts)]


def run_method(
    name: str,
    spec: SpecConfig,
    engine_cfg: EngineConfig,
    requests: Sequence[GenerationRequest],
    warmup: Sequence[GenerationRequest],
    batch_sizes: Sequence[int],
    dataset: str,
    reference: dict[str, list[int]] | None,
    min_prompts: int = 16,
) -> tuple[list[BenchRecord], dict[str, list[int]]]:
    """Start an engine for `spec`, warm it up, time each batch size; return records + outputs.

    Every batch size starts from a cold cross-request cache, so no prompt is scored against a
    cache holding its own output: ours is reset in place; vLLM's suffix cache cannot be
    cleared from outside, so `suffix` gets a fresh engine for every batch size.
    """
    records: list[BenchRecord] = []
    outputs: dict[str, list[int]] = {}
    engine = None
    try:
        for batch_size in batch_sizes:
            if engine is None or spec.method in _UNRESETTABLE:
                if engine is not None:
                    engine.close()
                engine = _started(spec, engine_cfg, max(batch_sizes), warmup)
            engine.reset_proposer()
            batch = prompts_for_batch(requests, batch_size, min_prompts)
            started = time.perf_counter()
            results = engine.generate(batch, GREEDY, batch_size=batch_size)
            seconds = time.perf_counter() - started
            outputs.update({r.id: r.output_token_ids for r in results})
            records.append(_record(name, spec, dataset, batch_size, len(batch), seconds, results, reference))
        step_cost = engine.step_cost() if engine is not None else None
        if step_cost is not None:
            print(f"{name}: budget step cost {_format_cost(step_cost)}", flush=True)
        return records, outputs
    finally:
        if engine is not None:
            engine.close()


_UNRESETTABLE = frozenset({"suffix"})  # cross-request state inside vLLM we cannot clear


def _started(spec: SpecConfig, engine_cfg: EngineConfig, max_batch: int, warmup: Sequence[GenerationRequest]):
    from specdec.engines.vllm_engine import VllmEngine

    engine = VllmEngine(dataclasses.replace(engine_cfg, max_num_seqs=max_batch), spec)
    engine.generate(warmup, GREEDY)
    return engine


def _format_cost(cost: dict[str, float]) -> str:
    return ", ".join(f"{key} {value * 1000:.2f} ms" for key, value in cost.items())


def _record(
    name: str,
    spec: SpecConfig,
    dataset: str,
    batch_size: int,
    num_requests: int,
    seconds: float,
    results: Sequence[GenerationResult],
    reference: dict[str, list[int]] | None,
) -> BenchRecord:
    total = ShardStats.aggregate(r.stats for r in results)
    identical = None if reference is None else all(reference.get(r.id) == r.output_token_ids for r in results)
    return BenchRecord.from_stats(
        total,
        method=name,
        engine="vllm",
        dataset=dataset,
        batch_size=batch_size,
        k_max=spec.k_max,
        num_requests=num_requests,
        outputs_identical_to_none=identical,
        started_from=(
            "fresh engine per batch size, warmed up on other prompts"
            if spec.method in _UNRESETTABLE
            else "fresh engine warmed up on other prompts; cold cross-request cache per batch size"
        ),
        tokens_per_s=total.num_output_tokens / seconds,
        seconds=seconds,
    )


def render_table(records: Sequence[BenchRecord]) -> str:
    base = {(r.dataset, r.batch_size): r.tokens_per_s for r in records if r.method == "none"}
    header = f"{'method':<20}{'batch':>6}{'tok/s':>9}{'x none':>8}{'tok/fwd':>9}{'accept':>8}  identical"
    lines = [header, "-" * len(header)]
    for r in records:
        ratio = r.tokens_per_s / base[(r.dataset, r.batch_size)] if (r.dataset, r.batch_size) in base else float("nan")
        ident = "-" if r.outputs_identical_to_none is None else ("yes" if r.outputs_identical_to_none else "NO")
        lines.append(
            f"{r.method:<20}{r.batch_size:>6}{r.tokens_per_s:>9.1f}{ratio:>8.2f}"
            f"{r.tokens_per_forward:>9.2f}{r.acceptance_rate:>8.2f}  {ident}"
        )
    return "\n".join(lines)
