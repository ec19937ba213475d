"""Frozen configuration objects inside the library, built from validated user input."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from typing import Any, Literal

from specdec.native import NativeDrafterMissing, load_core

Method = Literal["none", "ngram", "suffix", "draft", "specdec"]
METHODS: tuple[str, ...] = typing.get_args(Method)


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


@dataclasses.dataclass(frozen=True)
class SpecConfig:
    """What speculation to run. `method="none"` disables it. Every default here is the
    user's (specdec.params.GenerationParams takes them from this class)."""

    method: Method = "specdec"
    k_max: int = 4
    ngram_min: int = 2
    ngram_max: int = 5
    draft_model: str | None = None
    # specdec: memory bound of the cross-request draft cache, in cached tokens
    cache_max_tokens: int = 4_000_000
    # specdec on the real engine: cap drafts by a measured step-cost model (specdec.step_cost)
    budget: bool = True
    # specdec with its budget: the K ceiling once the batch has free rows (see k_ceiling)
    tail_k_max: int | None = None
    # specdec: the cross-request cache starts from this file and is written back (runs start warm)
    cache_file: str | None = None
    # draft: ranks the draft model is split over (None: vLLM's choice, the target's)
    draft_tensor_parallel_size: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.method != "none" and not 1 <= self.k_max <= 64:
            raise ConfigError(f"k_max={self.k_max} must be within [1, 64]")
        if not 1 <= self.ngram_min <= self.ngram_max:
            raise ConfigError(f"need 1 <= ngram_min ({self.ngram_min}) <= ngram_max ({self.ngram_max})")
        if self.method == "draft" and not self.draft_model:
            raise ConfigError("method 'draft' needs draft_model (--draft-model DIR)")
        if self.method == "specdec":
            if self.cache_max_tokens < 1:
                raise ConfigError(f"cache_max_tokens={self.cache_max_tokens} must be >= 1")
            if self.tail_k_max is not None and not self.k_max <= self.tail_k_max <= 64:
                raise ConfigError(f"tail_k_max={self.tail_k_max} must be within [k_max={self.k_max}, 64]")
            try:  # start-up fails here, saying what to do, when the compiled drafter is not installed
                load_core()
            except NativeDrafterMissing as exc:
                raise ConfigError(str(exc)) from exc

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    @property
    def budgeted(self) -> bool:
        """specdec with its batch budget: the one method whose engine calibrates."""
        return self.method == "specdec" and self.budget

    @property
    def k_ceiling(self) -> int:
        """The most draft tokens a step may verify (vLLM's K; statistics are sized by it): k_max, or
        for specdec with its budget the tail ceiling, reached only in a wave's tail (free rows)."""
        if not self.budgeted:
            return self.k_max
        return self.tail_k_max if self.tail_k_max is not None else min(2 * self.k_max, 64)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SpecConfig":
        return cls(**data)


# KV-cache memory of an engine on vLLM's CPU build when kv_cache_gib is not given
CPU_KV_CACHE_GIB = 2.0


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """vLLM engine options as the engine gets them (meanings in GenerationParams; None: vLLM's
    default). CPU builds take `kv_cache_gib`, GPU builds `gpu_memory_utilization`."""

    max_model_len: int
    model: str | None = None
    dtype: str = "float32"
    kv_cache_gib: float | None = None
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = True
    max_num_seqs: int = 16
    seed: int = 0
    reserved_cpus: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    quantization: str | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    engine_args: str = "{}"  # any other vLLM engine arguments, as sorted JSON (hashable)

    @property
    def world_size(self) -> int:
        """Processes one engine's model is split over."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


def config_hash(*parts: dict[str, Any]) -> str:
    """Stable short hash of JSON-able config dicts (sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
