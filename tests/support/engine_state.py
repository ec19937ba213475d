"""What grows with requests in a live engine, for the long-run engine test."""

from __future__ import annotations

from typing import Any

from specdec.engines import vllm_proposer
from specdec.engines.vllm_engine import VllmEngine


def state_sizes(engine: VllmEngine) -> dict[str, tuple[int, int | None]]:
    """(size, bound) of what grows with requests, driver and drafter (see `drafter_sizes`);
    bound None: per request, empty between calls."""
    llm_engine: Any = engine.llm.llm_engine
    # vLLM internals (0.32.0): per-request output state, pending utility calls
    sizes: dict[str, tuple[int, int | None]] = {
        "driver_unfinished": (llm_engine.get_num_unfinished_requests(), None),
        "driver_request_states": (len(getattr(getattr(llm_engine, "output_processor", None),
                                              "request_states", {})), None),
        "driver_utility_calls": (len(getattr(llm_engine.engine_core, "utility_results", {})), None)}
    if engine.drafter is not None:
        drafter = next((reply for reply in engine.llm.collective_rpc(drafter_sizes) if reply is not None), {})
        sizes.update({name: tuple(v) for name, v in drafter.items()})  # type: ignore[misc]
    sizes["driver_worker_ids"] = (len(engine._worker_ids), None)  # finished requests whose counts wait
    return sizes


def drafter_sizes(worker: Any) -> dict[str, tuple[int, int | None]] | None:
    """In the worker: (size, bound) of every structure of specdec's drafter that grows with
    requests; a per-request one holds at most one batch, except the finished requests' source
    counts (bound None: kept until taken). None on a rank without the drafter."""
    drafter = vllm_proposer._drafter(worker)
    if drafter is None:
        return None
    sizes = {"step_samples": (len(drafter.timer), drafter.timer.max_samples)}
    if drafter.controller is not None:
        for name, (size, bound) in drafter.controller.state_sizes().items():
            per_batch = bound is None and name != "finished_counts"
            sizes[name] = (size, drafter.max_num_seqs if per_batch else bound)
    return sizes
