"""What vLLM's `LLM(...)` is given for an EngineConfig and a SpecConfig: the one place where
our configuration becomes vLLM's engine arguments."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.engines import vllm_proposer
from specdec.models import resolve_model


def speculative_config(spec: SpecConfig) -> dict[str, Any] | None:
    """vLLM's `speculative_config` for a SpecConfig (None: no speculation). Every method is
    started with `num_speculative_tokens = spec.k_ceiling`, the most its steps verify."""
    if spec.method == "none":
        return None
    if spec.method == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": spec.k_ceiling,
            "prompt_lookup_min": spec.ngram_min,
            "prompt_lookup_max": spec.ngram_max,
        }
    if spec.method == "suffix":
        if importlib.util.find_spec("arctic_inference") is None:
            raise ConfigError(
                "method 'suffix' needs arctic-inference's suffix tree, which is not installed "
                "here; use --method specdec or ngram"
            )
        return {"method": "suffix", "num_speculative_tokens": spec.k_ceiling}
    if spec.method == "draft":
        return {
            "method": "draft_model",
            "model": str(resolve_model(spec.draft_model)),
            "num_speculative_tokens": spec.k_ceiling,
        }
    return {
        "method": "custom_class",
        "model": vllm_proposer.CLASS_PATH,
        "num_speculative_tokens": spec.k_ceiling,  # k_max, or the budget's tail ceiling
    }


def llm_kwargs(engine: EngineConfig, spec: SpecConfig, model_path: Path) -> dict[str, Any]:
    """Keyword arguments of `vllm.LLM` for this engine."""
    spec_cfg = speculative_config(spec)
    return dict(
        model=str(model_path),
        tokenizer=str(model_path),
        dtype=engine.dtype,
        max_model_len=engine.max_model_len,
        kv_cache_memory_bytes=int(engine.kv_cache_gib * 2**30),
        enforce_eager=engine.enforce_eager,
        max_num_seqs=engine.max_num_seqs,
        seed=engine.seed,
        speculative_config=spec_cfg,
        disable_log_stats=False,
        # per-request statistics come from vLLM's own record of every step, for every method
        per_request_spec_decode_metrics="detailed" if spec_cfg else "none",
    )
