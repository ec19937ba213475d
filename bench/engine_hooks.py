"""What the bench asks of a running `VllmEngine` beyond generating, sent through its `llm`
(the proposer's worker functions or vLLM calls): the product's engine carries none of them."""

from __future__ import annotations

from specdec.engines import vllm_proposer
from specdec.engines.vllm_engine import VllmEngine


def reset_proposer(engine: VllmEngine) -> None:
    if engine.spec.method == "specdec":
        engine.llm.collective_rpc(vllm_proposer.reset_proposer)


def reset_prefix_cache(engine: VllmEngine) -> None:
    """Drop vLLM's prefix cache (no request running): prompts are prefilled anew."""
    if not engine.llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache")
