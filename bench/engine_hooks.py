"""How the bench drives a started `VllmEngine` (or a double): its fixed-batch loop over the product's
one stream (specdec.streaming), and resets through the engine's `llm` that the engine has no method for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specdec.stats import ShardStats
from specdec.streaming import EngineHolder, ShardOutcome, ShardRequests, run_stream
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions


def run_batches(engine: Any, requests: Sequence[GenerationRequest], sampling: SamplingOptions,
                batch_size: int | None = None, *, show_progress: bool = False,
                stats: ShardStats | None = None) -> list[GenerationResult]:
    """`requests` on `engine`, results in request order: as one group, or groups of `batch_size` each run to its end,
    each a shard of a sequential stream (an unseeded request gets `sampling.seed` + its index in its group). `stats`
    gains each group's statistics; raises what failed a group."""
    from tqdm import tqdm

    size = batch_size or len(requests) or 1
    groups = [ShardRequests(str(start), f"requests {start}..{start + size - 1}", list(requests[start:start + size]), None)
              for start in range(0, len(requests), size)]
    results: list[GenerationResult] = []
    errors: list[BaseException] = []

    def collect(outcome: ShardOutcome[None]) -> None:
        results.extend(outcome.results)
        if outcome.error is not None:
            errors.append(outcome.error)
        elif stats is not None:
            stats.add(outcome.stats)

    bar = tqdm(total=len(requests), unit="req", disable=not show_progress)
    try:  # the engine's `finish_stream` (specdec's cache file written) comes once, after the last group
        run_stream(groups, EngineHolder(lambda: (engine, 0.0)), sampling, collect, read_ahead_requests=size,
                   sequential=True, on_progress=lambda _: bar.update(1))
    except Exception:
        if not errors:  # else a later group met the engine the first error left stopped
            raise
    finally:
        bar.close()
    if errors:
        raise errors[0]
    return results


def reset_proposer(engine: Any) -> None:
    if engine.drafter is not None:
        engine.drafter.reset()


def reset_prefix_cache(engine: Any) -> None:
    """Drop vLLM's prefix cache (no request running): prompts are prefilled anew."""
    if not engine.llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache")
