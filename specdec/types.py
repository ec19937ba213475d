"""Request and result types shared by the engines, the CLI and the pipeline."""

from __future__ import annotations

import dataclasses

from specdec.stats import RequestStats


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """One prompt, already tokenized (chat templates are applied before this point); one
    request per sample, all samples of a row with the row's id."""

    id: str
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    sample: int = 0  # index among the row's samples, 0 .. samples - 1
    seed: int | None = None  # this request's own sampling seed (None: the engine's rule)


@dataclasses.dataclass(frozen=True)
class SamplingOptions:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    seed: int | None = None
    ignore_eos: bool = False


@dataclasses.dataclass
class GenerationResult:
    id: str
    completion: str
    output_token_ids: list[int]
    finish_reason: str
    stats: RequestStats
    # Verified drafts step by step, as the engine reported them (empty without speculation).
    per_step_drafted: list[int] = dataclasses.field(default_factory=list)
    per_step_accepted: list[int] = dataclasses.field(default_factory=list)
    sample: int = 0  # the request's sample index: results are keyed by (id, sample)
    # Engine seconds attributed to this request (specdec.engines.engine_stream); 0.0: not attributed
    engine_s: float = 0.0
    method: str = ""  # the engine that generated it, where not the shard's (method auto's pilot)
