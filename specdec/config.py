"""Configuration objects shared by the engines, the CLI and the pipeline.

Frozen dataclasses inside the library; the CLI and flows validate user input at the edge and
build these. `SpecConfig.config_hash()` identifies the configuration actually used and is
recorded next to every result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from typing import Any

from specdec.drafting.live_text import DEFAULT_GROUP_MAX_TOKENS
from specdec.drafting.prompt_history import DEFAULT_MAX_TOKENS as DEFAULT_HISTORY_MAX_TOKENS
from specdec.drafting.prompt_history import DEFAULT_PER_PROMPT as DEFAULT_HISTORY_PER_PROMPT
from specdec.params import DrafterKind, GenerationParams, Method

METHODS: tuple[str, ...] = typing.get_args(Method)
# Defaults of the user-facing parameters come from the one parameter model.
_DEFAULT = {name: field.default for name, field in GenerationParams.model_fields.items()}


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


@dataclasses.dataclass(frozen=True)
class PolicyConfig:
    """Per-request K before the batch budget (see specdec.policy).

    `adaptive=False` (default) starts every request at k_max and leaves sizing to the batch
    budget, which weighs each request's acceptance against the measured cost of verifying;
    `adaptive=True` is the acceptance-window state machine (raise/lower/pause).
    """

    adaptive: bool = False
    k_init: int | None = None  # None: min(4, k_max)
    window: int = 4
    raise_above: float = 0.8
    lower_below: float = 0.5
    max_consecutive_rejects: int = 3
    reprobe_after: int = 8

    def validate(self, k_max: int) -> None:
        if self.adaptive and self.k_init is not None and not 1 <= self.k_init <= k_max:
            raise ConfigError(f"k_init={self.k_init} must be within [1, k_max={k_max}]")
        if self.window < 1:
            raise ConfigError(f"window={self.window} must be >= 1")
        if not 0.0 <= self.lower_below <= self.raise_above <= 1.0:
            raise ConfigError(
                f"need 0 <= lower_below ({self.lower_below}) <= raise_above ({self.raise_above}) <= 1"
            )
        if self.max_consecutive_rejects < 1 or self.reprobe_after < 1:
            raise ConfigError("max_consecutive_rejects and reprobe_after must be >= 1")


@dataclasses.dataclass(frozen=True)
class SpecConfig:
    """What speculation to run. `method="none"` disables it."""

    method: Method = _DEFAULT["method"]
    k_max: int = _DEFAULT["k_max"]
    ngram_min: int = _DEFAULT["ngram_min"]
    ngram_max: int = _DEFAULT["ngram_max"]
    draft_model: str | None = None
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    # specdec only: the cross-request draft cache (see specdec.drafting.hybrid)
    cache: bool = True
    cache_max_tokens: int = _DEFAULT["cache_max_tokens"]
    cache_min_prob: float = 0.1
    # specdec's own-text lookup: match lengths considered (one-token matches draft often
    # and are often wrong; the learned confidence lets the budget price them)
    lookup_min: int = 1
    lookup_max: int = 16
    # specdec on the real engine: cap drafts by a measured step-cost model (specdec.budget)
    budget: bool = _DEFAULT["budget"]
    # specdec with its budget: the K ceiling once the batch has free rows (see k_ceiling)
    tail_k_max: int | None = _DEFAULT["tail_k_max"]
    # specdec: start the cross-request cache from this file when it exists, and write the
    # cache back to it after every generate call (a nightly run then starts warm)
    cache_file: str | None = None
    # specdec: native (the compiled core) or python (the reference); the same drafts
    drafter: DrafterKind = _DEFAULT["drafter"]
    # specdec: requests of the same prompt draft from each other (prompt groups, bounded in
    # tokens over all groups), and from earlier completions of the prompt kept in the cache
    # file (the history: bounded in tokens over all prompts and in completions per prompt)
    group_max_tokens: int = DEFAULT_GROUP_MAX_TOKENS
    history_max_tokens: int = DEFAULT_HISTORY_MAX_TOKENS
    history_per_prompt: int = DEFAULT_HISTORY_PER_PROMPT

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
            self.policy.validate(self.k_max)
            if not 0.0 <= self.cache_min_prob <= 1.0:
                raise ConfigError(f"cache_min_prob={self.cache_min_prob} must be within [0, 1]")
            if self.cache_max_tokens < 1:
                raise ConfigError(f"cache_max_tokens={self.cache_max_tokens} must be >= 1")
            if self.drafter not in typing.get_args(DrafterKind):
                raise ConfigError(f"unknown drafter {self.drafter!r}; choose native or python")
            if self.drafter == "native" and self.cache:
                _require_native()
            for name in ("group_max_tokens", "history_max_tokens", "history_per_prompt"):
                if getattr(self, name) < 0:
                    raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
            if self.tail_k_max is not None and not self.k_max <= self.tail_k_max <= 64:
                raise ConfigError(f"tail_k_max={self.tail_k_max} must be within [k_max={self.k_max}, 64]")
            if not 1 <= self.lookup_min <= self.lookup_max:
                raise ConfigError(f"need 1 <= lookup_min ({self.lookup_min}) <= lookup_max ({self.lookup_max})")

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    @property
    def budgeted(self) -> bool:
        """specdec with its batch budget: the one method whose engine calibrates."""
        return self.method == "specdec" and self.budget

    @property
    def k_ceiling(self) -> int:
        """The most draft tokens a step may verify: k_max, or for specdec with its budget the
        tail ceiling (tail_k_max, default 2 x k_max up to 64), which the drafts may reach
        only while the batch has free rows (nothing waits to join, so the wave's remaining
        rows decide when it ends and the step's fixed cost weighs most) and only as far as
        the budget finds each drafted token worth its verification. vLLM is started with
        this K, and per-request statistics are sized by it."""
        if not self.budgeted:
            return self.k_max
        return self.tail_k_max if self.tail_k_max is not None else min(2 * self.k_max, 64)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SpecConfig":
        data = dict(data)
        policy = PolicyConfig(**data.pop("policy", {}) or {})
        return cls(policy=policy, **data)


def _require_native() -> None:
    """Start-up fails here, with what to do, when the compiled drafter is not installed."""
    from specdec.drafting.native import NativeDrafterMissing, load_core

    try:
        load_core()
    except NativeDrafterMissing as exc:
        raise ConfigError(str(exc)) from exc


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """vLLM engine options as the engine gets them (see GenerationParams for each one's
    meaning); `max_model_len` is settled from the model (GenerationParams.engine_config)."""

    max_model_len: int
    model: str | None = _DEFAULT["model"]
    dtype: str = _DEFAULT["dtype"]
    kv_cache_gib: float = _DEFAULT["kv_cache_gib"]
    enforce_eager: bool = _DEFAULT["enforce_eager"]
    max_num_seqs: int = _DEFAULT["batch_size"]
    seed: int = 0
    reserved_cpus: int | None = _DEFAULT["reserved_cpus"]


def config_hash(*parts: dict[str, Any]) -> str:
    """Stable short hash of JSON-able config dicts (sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
