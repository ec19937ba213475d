"""What grows with requests in a live engine, for the long-run engine test."""

from __future__ import annotations

from typing import Any

from specdec.engines.vllm_engine import VllmEngine


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
    if engine.drafter is not None:
        sizes.update({name: tuple(v) for name, v in engine.drafter.state_sizes().items()})  # type: ignore[misc]
    sizes["driver_worker_ids"] = (len(engine._worker_ids), None)  # finished requests whose counts wait
    return sizes
