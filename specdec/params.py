"""The one parameter model: every generation parameter users set, for every entry point
(the engine's and drafter's defaults are written once, in specdec.config). `config_hash`
covers only the fields marked `decides_output`: the models by content, never by path.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specdec.config import CPU_KV_CACHE_GIB, ConfigError, EngineConfig, Method, SpecConfig, config_hash
from specdec import models
from specdec.types import SamplingOptions

PromptFormat = Literal["chat", "raw"]
# auto: each kind of shard runs on none or specdec, whichever its pilot measured faster (specdec.pilot)
RunMethod = Literal["auto", Method]

SPECULATIVE: tuple[str, ...] = ("ngram", "suffix", "draft", "specdec", "auto")
# Most samples per prompt (the run's setting and a row's own `samples`): far beyond any use,
# low enough that one row cannot ask for millions of requests.
SAMPLES_LIMIT = 1024


def _default(config: type, name: str) -> Any:
    """The default `config` (SpecConfig or EngineConfig) gives field `name`: written there once."""
    return {f.name: f.default for f in dataclasses.fields(config)}[name]


def decides_output(description: str, methods: tuple[str, ...] | None = None, when_set: bool = False) -> dict[str, Any]:
    """Marks a field that enters the config hash (only for `methods`; with `when_set`, only
    when set, so that runs from before the field existed keep their hash)."""
    return {"description": description,
            "json_schema_extra": {"decides_output": True, "methods": methods, "when_set": when_set}}


# vLLM engine arguments that size, schedule or place the work, never what a request outputs:
# they stay out of the config hash (a resume across them is safe); other engine_args enter it.
ENGINE_ARGS_OUTSIDE_HASH = (
    "block_size", "cpu_offload_gb", "kv_offloading_size", "num_gpu_blocks_override", "enable_chunked_prefill",
    "long_prefill_token_threshold", "scheduling_policy", "async_scheduling", "distributed_executor_backend",
    "max_parallel_loading_workers", "data_parallel_size", "disable_custom_all_reduce", "cudagraph_capture_sizes",
    "max_cudagraph_capture_size",
)


class GenerationParams(BaseModel):
    """What to generate with and how; validated before any work."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(_default(EngineConfig, "model"), **decides_output(
        "Hugging Face model folder (default: the bundled SmolLM2-135M-Instruct)"))
    method: RunMethod = Field("auto", **decides_output(
        "speculation: auto (specdec or none, whichever a pilot on each kind of shard measures faster), "
        "specdec (ours), ngram (vLLM's prompt lookup), suffix, draft, none"))
    k_max: int = Field(_default(SpecConfig, "k_max"), ge=1, le=64, **decides_output(
        "most draft tokens per step", SPECULATIVE))
    ngram_min: int = Field(_default(SpecConfig, "ngram_min"), ge=1, **decides_output(
        "ngram: shortest match looked up", ("ngram",)))
    ngram_max: int = Field(_default(SpecConfig, "ngram_max"), ge=1, **decides_output(
        "ngram: longest match looked up", ("ngram",)))
    draft_model: str | None = Field(None, **decides_output(
        "draft: model folder with the target's tokenizer", ("draft",)))
    tail_k_max: int | None = Field(_default(SpecConfig, "tail_k_max"), ge=1, le=64, **decides_output(
        "specdec with its budget: most draft tokens per step once the batch has free rows (a "
        "wave's tail: nothing waiting, so a row's remaining steps decide when the wave ends); "
        "the engine verifies up to this many; default 2 x k_max, at most 64", ("specdec", "auto")))
    budget: bool = Field(_default(SpecConfig, "budget"), **decides_output(
        "specdec: size drafts by the measured cost of verifying them", ("specdec", "auto")))
    cache_file: str | None = Field(_default(SpecConfig, "cache_file"), description=(
        "specdec: load the cross-request draft cache from this file when it exists and save it "
        "back after each generate call"))
    cache_max_tokens: int = Field(_default(SpecConfig, "cache_max_tokens"), ge=1, description=(
        "specdec: memory bound of the cross-request cache, in cached tokens (whole oldest "
        "sequences are evicted beyond it; under 64 bytes per token)"))
    prompt_format: PromptFormat = Field("chat", **decides_output(
        "chat: a plain prompt is asked as one user turn through the model's chat template "
        "(when it has one); raw: the prompt text is completed as it is"))
    max_tokens: int = Field(128, ge=1, le=1 << 20, **decides_output(
        "most new tokens per request (a row's own max_tokens wins)"))
    temperature: float = Field(0.0, ge=0.0, **decides_output("0: greedy"))
    top_p: float = Field(1.0, gt=0.0, le=1.0, **decides_output("nucleus sampling mass"))
    top_k: int = Field(0, ge=0, **decides_output("0: off"))
    seed: int | None = Field(None, **decides_output(
        "sampling seed; each sample of each row gets its own seed derived from it, the row id "
        "and the sample index (reproducible across resumes and batches)"))
    samples: int = Field(1, ge=1, le=SAMPLES_LIMIT, **decides_output(
        "completions per prompt, each with its own seed (a row's own samples wins); above 1 "
        "needs temperature > 0"))
    dtype: str = Field(_default(EngineConfig, "dtype"), **decides_output(
        "weights and activations; float32 on CPUs (in bf16 greedy output varies with batch shape), auto on GPUs"))
    batch_size: int = Field(_default(EngineConfig, "max_num_seqs"), ge=1, le=4096,
                            description="most requests running at once")
    max_model_len: int | None = Field(None, ge=16, description=(
        "longest prompt + completion in tokens (default: the model's own context, lowered to "
        "what the KV cache holds)"))
    kv_cache_gib: float | None = Field(_default(EngineConfig, "kv_cache_gib"), gt=0.0, description=(
        f"vLLM's CPU build: KV-cache memory in GiB (default {CPU_KV_CACHE_GIB:g}); GPU builds size the "
        "engine with gpu_memory_utilization"))
    gpu_memory_utilization: float | None = Field(_default(EngineConfig, "gpu_memory_utilization"), gt=0.0, le=1.0,
                                                 description=(
        "GPU builds of vLLM: the share of each GPU's memory the engine may take, weights and KV cache "
        "(default: vLLM's); the CPU build sizes its KV cache with kv_cache_gib"))
    tensor_parallel_size: int = Field(_default(EngineConfig, "tensor_parallel_size"), ge=1, description=(
        "devices one engine's model is split over, layer by layer (tensor parallelism; on vLLM's CPU "
        "build each rank gets its own cores)"))
    pipeline_parallel_size: int = Field(_default(EngineConfig, "pipeline_parallel_size"), ge=1, description=(
        "stages one engine's layers are split into (pipeline parallelism; with tensor parallelism the "
        "engine takes their product of devices)"))
    draft_tensor_parallel_size: int | None = Field(_default(SpecConfig, "draft_tensor_parallel_size"), ge=1,
                                                   description=(
        "draft: devices the draft model is split over (vLLM allows 1 or the target's; default: vLLM's)"))
    quantization: str | None = Field(_default(EngineConfig, "quantization"), **decides_output(
        "the checkpoint's quantization as vLLM names it (awq, gptq, fp8, compressed-tensors...; default: "
        "what the checkpoint's config says)", when_set=True))
    max_num_batched_tokens: int | None = Field(_default(EngineConfig, "max_num_batched_tokens"), ge=1, description=(
        "most tokens one engine step processes, prefill chunks included (default: vLLM's)"))
    enable_prefix_caching: bool | None = Field(_default(EngineConfig, "enable_prefix_caching"), description=(
        "reuse the KV cache of prompt prefixes requests share (default: vLLM's, on)"))
    engine_args: dict[str, Any] = Field({}, **decides_output(
        "any other vLLM engine argument by its name (JSON on the command line), checked against vLLM's "
        "before any work; each enters the config hash unless it only sizes or places the work "
        f"({', '.join(ENGINE_ARGS_OUTSIDE_HASH)})", when_set=True))
    enforce_eager: bool = Field(_default(EngineConfig, "enforce_eager"),
                                description="skip vLLM's compilation (starts in ~25 s on CPU)")
    reserved_cpus: int | None = Field(_default(EngineConfig, "reserved_cpus"), ge=0, description=(
        "CPU cores vLLM-CPU keeps from its compute threads (default: none on machines with at "
        "most 4 CPUs, vLLM's own default elsewhere)"))
    stall_timeout_s: float = Field(600.0, gt=0.0, description=(
        "an engine that makes no step for this many seconds while it holds requests is stopped: "
        "the shards in it fail, naming them, and a fresh engine takes the rest"))
    read_ahead_requests: int = Field(4096, ge=1, description=(
        "requests read, validated and tokenized ahead of the engine (a bound on the worker's "
        "memory; a larger shard is still read, alone)"))
    pilot_requests: int = Field(64, ge=2, description=(
        "auto: requests of each kind of shard (its folder in the source) in the pilot, drawn evenly "
        "over the kind's first shards, neighbours on alternate engines (half on none, half on "
        "specdec); every result is kept, none runs twice"))
    pilot_min_requests: int = Field(256, ge=1, description=(
        "auto: a kind of shard with fewer requests runs specdec without a pilot (too small to pay "
        "for one); also how many of a kind's first requests the pilot's sample is drawn from"))
    pilot_margin: float = Field(0.03, ge=0.0, lt=1.0, description=(
        "auto: specdec runs only when its output tokens per engine-second beat none's by more "
        "than this share in the pilot"))
    long_first: bool = Field(True, description=(
        "once every shard is loaded, start the rest longest first by how long each prompt ran "
        "in earlier runs (the per-prompt history in --cache-file); before that, or without "
        "one, requests start in arrival order"))

    @model_validator(mode="after")
    def _consistent(self) -> "GenerationParams":
        if self.samples > 1 and self.temperature == 0:
            raise ValueError(f"samples={self.samples} with temperature=0: greedy decoding gives every "
                             "sample the same completion; set temperature > 0 or samples=1")
        if self.pilot_requests > self.pilot_min_requests:
            raise ValueError(f"pilot_requests={self.pilot_requests} must be at most pilot_min_requests="
                             f"{self.pilot_min_requests}: the sample is drawn from that many requests")
        try:
            self.spec_config()
            if self.engine_args:
                from specdec.engines.vllm_args import check_engine_args

                check_engine_args(self.engine_args)
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def spec_config(self) -> SpecConfig:
        return SpecConfig(
            method="specdec" if self.method == "auto" else self.method, k_max=self.k_max, ngram_min=self.ngram_min, ngram_max=self.ngram_max,
            draft_model=self.draft_model, budget=self.budget, cache_file=self.cache_file, tail_k_max=self.tail_k_max,
            cache_max_tokens=self.cache_max_tokens, draft_tensor_parallel_size=self.draft_tensor_parallel_size,
        )

    def engine_config(self, max_model_len: int) -> EngineConfig:
        """The engine's config once the model length is settled (specdec.models.fit_model_len)."""
        return EngineConfig(
            model=self.model, dtype=self.dtype, max_model_len=max_model_len,
            kv_cache_gib=self.kv_cache_gib, gpu_memory_utilization=self.gpu_memory_utilization,
            enforce_eager=self.enforce_eager, max_num_seqs=self.batch_size, seed=self.seed or 0,
            reserved_cpus=self.reserved_cpus, tensor_parallel_size=self.tensor_parallel_size,
            pipeline_parallel_size=self.pipeline_parallel_size, quantization=self.quantization,
            max_num_batched_tokens=self.max_num_batched_tokens, enable_prefix_caching=self.enable_prefix_caching,
            engine_args=json.dumps(self.engine_args, sort_keys=True),
        )

    def sampling(self) -> SamplingOptions:
        return SamplingOptions(self.temperature, self.top_p, self.top_k, self.seed)

    def output_config(self) -> dict[str, Any]:
        """The fields that decide the output, models by content (hashed, recorded with results)."""
        decided = {name: getattr(self, name) for name in output_fields(self)}
        engine_args = {k: v for k, v in self.engine_args.items() if k not in ENGINE_ARGS_OUTSIDE_HASH}
        if engine_args:
            decided["engine_args"] = engine_args
        else:
            decided.pop("engine_args", None)
        decided["model"] = models.model_digest(self.model)
        if "draft_model" in decided:
            decided["draft_model"] = models.model_digest(self.draft_model)
        return decided

    def config_hash(self) -> str:
        return config_hash(self.output_config())

    def recorded_config(self) -> dict[str, Any]:
        """Everything worth keeping next to the results: what decided them, and how it ran."""
        return {"output": self.output_config(), "params": self.model_dump(mode="json")}


def output_fields(params: GenerationParams) -> list[str]:
    """The fields that decide the output of `params`' run (`when_set` ones: only when set)."""
    marks = {name: field.json_schema_extra or {} for name, field in type(params).model_fields.items()}
    return [name for name, mark in marks.items() if mark.get("decides_output")
            and params.method in (mark["methods"] or (params.method,))
            and (not mark["when_set"] or getattr(params, name))]
