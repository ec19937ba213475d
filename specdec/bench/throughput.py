"""Real-engine throughput, methods side by side in one run (`specdec bench --engine vllm`).

Every method gets its own engine, started fresh (same model, same engine options), warmed
up on prompts that are not measured, then runs each batch size on the same prompts. Greedy
outputs are compared with `none`'s and the table says whether they are identical.

`specdec[warm]` measures the persisted-cache mode (what a nightly run gains from the cache
file the previous night saved): its engine first generates a disjoint set of prompts, which
saves the cache file, and every batch size then starts from a copy of that file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from specdec.bench.records import BenchRecord
from specdec.config import EngineConfig, SpecConfig
from specdec.stats import ShardStats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

GREEDY = SamplingOptions(temperature=0.0)
DEFAULT_METHODS = ("none", "ngram", "ngram[2..5]", "suffix", "specdec")
WARM_CACHE_NAME = "warm-cache.npz"


def engine_methods(k: int, draft_model: str | None = None) -> dict[str, SpecConfig]:
    """The real-engine methods by bench name (`ngram` is vLLM's default 5..5 lookup)."""
    methods = {
        "none": SpecConfig(method="none", k_max=k),
        "ngram": SpecConfig(method="ngram", k_max=k, ngram_min=5, ngram_max=5),
        "ngram[2..5]": SpecConfig(method="ngram", k_max=k, ngram_min=2, ngram_max=5),
        "suffix": SpecConfig(method="suffix", k_max=k),
        "specdec": SpecConfig(method="specdec", k_max=k),
        "specdec[no-budget]": SpecConfig(method="specdec", k_max=k, budget=False),
        # The cache file lives in a folder of the bench's own (see run_method).
        "specdec[warm]": SpecConfig(method="specdec", k_max=k, cache_file=WARM_CACHE_NAME),
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
    warm_from: Sequence[GenerationRequest] = (),
) -> tuple[list[BenchRecord], dict[str, list[int]]]:
    """Start an engine for `spec`, warm it up, time each batch size; return records + outputs.

    Every batch size starts from a cold cross-request cache, so no prompt is scored against a
    cache holding its own output: ours is reset in place; vLLM's suffix cache cannot be
    cleared from outside, so `suffix` gets a fresh engine for every batch size. With a cache
    file (`specdec[warm]`) every batch size starts instead from the file saved after
    generating `warm_from`, prompts that are not measured.
    """
    if spec.cache_file and not warm_from:
        raise ValueError(f"{name}: the persisted-cache mode needs prompts to build its cache from")
    with _private_cache_file(spec) as spec:
        records: list[BenchRecord] = []
        outputs: dict[str, list[int]] = {}
        engine = None
        snapshot = Path(spec.cache_file + ".saved") if spec.cache_file else None
        try:
            for batch_size in batch_sizes:
                if engine is None or spec.method in _UNRESETTABLE:
                    if engine is not None:
                        engine.close()
                    engine = _started(spec, engine_cfg, max(batch_sizes), warmup)
                    if snapshot is not None:
                        _save_warm_cache(engine, spec.cache_file, warm_from, snapshot)
                if snapshot is not None:
                    # The engine rewrites its cache file after every call: start from the saved one.
                    shutil.copyfile(snapshot, spec.cache_file)
                engine.reset_proposer()
                batch = prompts_for_batch(requests, batch_size, min_prompts)
                started = time.perf_counter()
                results = engine.generate(batch, GREEDY, batch_size=batch_size)
                seconds = time.perf_counter() - started
                outputs.update({r.id: r.output_token_ids for r in results})
                records.append(_record(name, spec, dataset, batch_size, len(batch), seconds, results, reference,
                                       len(warm_from)))
            step_cost = engine.step_cost() if engine is not None else None
            if step_cost is not None:
                print(f"{name}: budget step cost {_format_cost(step_cost)}", flush=True)
            return records, outputs
        finally:
            if engine is not None:
                engine.close()


@contextlib.contextmanager
def _private_cache_file(spec: SpecConfig) -> Iterator[SpecConfig]:
    """`spec` with its cache file moved into a temporary folder of the bench's own."""
    if not spec.cache_file:
        yield spec
        return
    with tempfile.TemporaryDirectory(prefix="specdec-bench-") as folder:
        yield dataclasses.replace(spec, cache_file=str(Path(folder) / Path(spec.cache_file).name))


_UNRESETTABLE = frozenset({"suffix"})  # cross-request state inside vLLM we cannot clear


def _save_warm_cache(engine, cache_file: str, warm_from: Sequence[GenerationRequest], snapshot: Path) -> None:
    """The previous night's run: generate `warm_from` from a cold cache; the engine saves
    the cache file, and a copy of it is what every measured batch size starts from."""
    Path(cache_file).unlink(missing_ok=True)
    engine.reset_proposer()
    engine.generate(warm_from, GREEDY)
    shutil.copyfile(cache_file, snapshot)


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
    num_warm_prompts: int = 0,
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
        started_from=_started_from(spec, num_warm_prompts),
        tokens_per_s=total.num_output_tokens / seconds,
        seconds=seconds,
    )


def _started_from(spec: SpecConfig, num_warm_prompts: int) -> str:
    if spec.method in _UNRESETTABLE:
        return "fresh engine per batch size, warmed up on other prompts"
    if spec.cache_file:
        return (f"fresh engine warmed up on other prompts; every batch size starts from the cache file "
                f"saved after generating {num_warm_prompts} other prompts")
    return "fresh engine warmed up on other prompts; cold cross-request cache per batch size"


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
