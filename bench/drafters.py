"""The methods the replay runs: specdec's controller, and the comparisons (vLLM's n-gram,
arctic's suffix cache, none, an oracle) behind a fixed-K adapter. Baselines' drafting is priced
by figures fitted to `python -m lab.propose_speed` (their Python wrappers are slower than vLLM's)."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from bench.cost_models import DraftCost
from bench.replay import Drafter, ReplayRequest
from specdec.config import SpecConfig
from specdec.controller import DraftController

NGRAM_DRAFT = DraftCost(per_call_s=10e-6, per_row_s=2.2e-6, source="vLLM numba n-gram, 10 us per step + 2.2 us per row")
SUFFIX_DRAFT = DraftCost(per_call_s=2e-6, per_row_s=10e-6, per_emitted_token_s=2.3e-6,
                         source="arctic suffix cache, 2 us per step + 10 us per row + 2.3 us per output token")
OUR_DRAFT = DraftCost(measured=True, source="measured: thread CPU time of the drafter's calls")
# vLLM's SpeculativeConfig defaults (suffix_decoding_*); tests check they still match.
VLLM_MAX_TREE_DEPTH = 24
VLLM_MAX_CACHED_REQUESTS = 10000
VLLM_MAX_SPEC_FACTOR = 1.0
VLLM_MAX_SPEC_OFFSET = 0.0  # arctic's default; vLLM does not pass one
VLLM_MIN_TOKEN_PROB = 0.1
_EMPTY = np.zeros(0, dtype=np.int64)


class Proposer(Protocol):
    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray: ...

    def forget(self, req_id: str) -> None: ...


class FixedK:
    def __init__(self, config: SpecConfig, proposer: Proposer) -> None:
        self.config, self.proposer = config, proposer

    def step_tokens(self, req_ids: list[str], tokens: Sequence[np.ndarray], num_accepted: Sequence[int],
                    cost: Any = None, num_prompt_tokens: Sequence[int] | None = None,
                    tail: bool = False) -> list[np.ndarray]:
        k = self.config.k_max
        return [self.proposer.propose(r, t, k)[:k] for r, t in zip(req_ids, tokens, strict=True)]

    def finish(self, req_id: str) -> None:
        self.proposer.forget(req_id)


class NullProposer:
    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        return tokens[:0]

    def forget(self, req_id: str) -> None:
        return None


class OracleProposer(NullProposer):
    def __init__(self, requests: Sequence[ReplayRequest]) -> None:
        self.sequences = {r.id: np.concatenate([np.asarray(r.prompt_token_ids, dtype=np.int64),  # prompt + reference
                                                np.asarray(r.reference_tokens, dtype=np.int64)]) for r in requests}

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        n = int(tokens.shape[0])
        return self.sequences[req_id][n : n + max(k, 0)]


@dataclasses.dataclass
class VllmNgramProposer(NullProposer):
    """vLLM's `ngram` method (its defaults: n_min = n_max = 5)."""

    n_min: int = 5
    n_max: int = 5

    def __post_init__(self) -> None:
        from vllm.v1.spec_decode.ngram_proposer import _find_longest_matched_ngram_and_propose_tokens

        self._find = _find_longest_matched_ngram_and_propose_tokens

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        if k <= 0:
            return tokens[:0]
        return self._find(tokens.astype(np.int32), self.n_min, self.n_max, 1 << 30, k).astype(np.int64)  # no length cap


class ArcticSuffixProposer:
    """vLLM's `suffix` method per request: arctic-inference's cache driven as vllm/v1/spec_decode/suffix_decoding.py
    (0.32) drives it, with vLLM's defaults."""

    def __init__(self, max_model_len: int = 1 << 30) -> None:
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        self.max_model_len = max_model_len
        self.cache = SuffixDecodingCache(max_tree_depth=VLLM_MAX_TREE_DEPTH, max_cached_requests=VLLM_MAX_CACHED_REQUESTS)
        self._num_seen: dict[str, int] = {}  # tokens of each active request already in the cache

    def propose(self, req_id: str, tokens: np.ndarray, k: int) -> np.ndarray:
        num_tokens = int(tokens.shape[0])
        if num_tokens >= self.max_model_len:
            return _EMPTY
        seq = np.ascontiguousarray(tokens, dtype=np.int32)
        if req_id not in self.cache.active_requests:
            if num_tokens < 2:
                raise ValueError(f"request {req_id}: first proposal needs prompt + one output token")
            if req_id in self.cache.cached_requests:
                self.cache.evict_cached_response(req_id)
            self.cache.start_request(req_id, seq[: num_tokens - 1])
            self._num_seen[req_id] = num_tokens - 1
        new = seq[self._num_seen[req_id] :]
        if new.shape[0]:
            self.cache.add_active_response(req_id, new.tolist())
            self._num_seen[req_id] = num_tokens
        max_spec = min(k, self.max_model_len - num_tokens - 1)
        if max_spec <= 0:
            return _EMPTY
        draft = self.cache.speculate(req_id, seq[max(0, num_tokens - VLLM_MAX_TREE_DEPTH) :], max_spec_tokens=max_spec,
                                     max_spec_factor=VLLM_MAX_SPEC_FACTOR, max_spec_offset=VLLM_MAX_SPEC_OFFSET,
                                     min_token_prob=VLLM_MIN_TOKEN_PROB)
        return np.asarray(draft.token_ids, dtype=np.int64)

    def forget(self, req_id: str) -> None:
        if req_id in self.cache.active_requests:
            self.cache.stop_request(req_id)
        self._num_seen.pop(req_id, None)


def arctic_available() -> bool:
    return importlib.util.find_spec("arctic_inference") is not None


@dataclasses.dataclass(frozen=True)
class Method:
    name: str
    make_drafter: Callable[[int, Sequence[ReplayRequest]], Drafter]  # (K, every request it will see)
    draft_cost: DraftCost
    budget: bool = False  # projected with the batch budget sizing drafts, learning the step cost
    tuned_k: bool = True  # projected at every K and shown at its best (else at the largest K)
    # vLLM on a GPU schedules this method's steps synchronously (a host-side drafter: custom_class,
    # ngram, suffix; the oracle as their ceiling), paying the cost model's host term; `none` is async.
    synchronous: bool = True


def fixed_k(method: str, proposer: Callable[[], Proposer], **spec: int) -> Callable[[int, Sequence[ReplayRequest]], Drafter]:
    return lambda k, _: FixedK(SpecConfig(method=method, k_max=k, **spec), proposer())  # type: ignore[arg-type]


def oracle(k: int, requests: Sequence[ReplayRequest]) -> Drafter:
    return FixedK(SpecConfig(method="ngram", k_max=k), OracleProposer(requests))  # any speculative method


def all_methods() -> dict[str, Method]:
    ours = lambda k, _: DraftController(SpecConfig(method="specdec", k_max=k))  # noqa: E731
    methods = [
        Method("none", fixed_k("none", NullProposer), DraftCost(), tuned_k=False, synchronous=False),
        Method("ngram", fixed_k("ngram", lambda: VllmNgramProposer(5, 5), ngram_min=5, ngram_max=5), NGRAM_DRAFT),
        Method("ngram[2..5]", fixed_k("ngram", lambda: VllmNgramProposer(2, 5), ngram_min=2), NGRAM_DRAFT),
        Method("specdec", ours, OUR_DRAFT, budget=True, tuned_k=False),
        Method("specdec[no-budget]", ours, OUR_DRAFT),
        Method("oracle", oracle, DraftCost()),  # the ceiling of any drafter
    ]
    if arctic_available():
        methods.insert(3, Method("suffix", fixed_k("suffix", ArcticSuffixProposer), SUFFIX_DRAFT))
    return {m.name: m for m in methods}
