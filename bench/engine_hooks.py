"""What the bench asks of a running `VllmEngine` beyond generating, sent through its `llm`
(the proposer's worker functions or vLLM calls): the product's engine carries none of them."""

from __future__ import annotations

from typing import Any

from specdec.engines import vllm_proposer
from specdec.engines.vllm_engine import VllmEngine


def reset_proposer(engine: VllmEngine) -> None:
    if engine.spec.method == "specdec":
        engine.llm.collective_rpc(vllm_proposer.reset_proposer)


def set_drafting(engine: VllmEngine, enabled: bool) -> None:
    """Draft, or propose nothing from the next step on (specdec's drafter only)."""
    if engine.spec.method == "specdec":
        engine.llm.collective_rpc(vllm_proposer.set_drafting, args=(enabled,))


def reset_prefix_cache(engine: VllmEngine) -> None:
    """Drop vLLM's prefix cache (no request running): prompts are prefilled anew."""
    if not engine.llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache")


def state_sizes(engine: VllmEngine) -> dict[str, tuple[int, int | None]]:
    """(size, bound) of what grows with requests, driver and drafter (see
    SpecdecVllmProposer.state_sizes); bound None: per request, empty between calls."""
    llm_engine: Any = engine.llm.llm_engine
    # vLLM internals (0.32.0): per-request output state, pending utility calls
    sizes: dict[str, tuple[int, int | None]] = {
        "driver_unfinished": (llm_engine.get_num_unfinished_requests(), None),
        "driver_request_states": (len(getattr(getattr(llm_engine, "output_processor", None),
                                              "request_states", {})), None),
        "driver_utility_calls": (len(getattr(llm_engine.engine_core, "utility_results", {})), None)}
    if engine.spec.method == "specdec":
        for worker_sizes in engine.llm.collective_rpc(vllm_proposer.state_sizes):
            sizes.update({name: tuple(v) for name, v in (worker_sizes or {}).items()})  # type: ignore[misc]
    return sizes
