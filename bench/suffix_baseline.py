"""vLLM's `suffix` method as a per-request proposer for the replay: arctic-inference's cache
driven as vllm/v1/spec_decode/suffix_decoding.py (0.32) drives it, with vLLM's defaults."""

from __future__ import annotations

import importlib.util

import numpy as np

# vLLM's SpeculativeConfig defaults (suffix_decoding_*); tests check they still match.
VLLM_MAX_TREE_DEPTH = 24
VLLM_MAX_CACHED_REQUESTS = 10000
VLLM_MAX_SPEC_FACTOR = 1.0
VLLM_MAX_SPEC_OFFSET = 0.0  # arctic's default; vLLM does not pass one
VLLM_MIN_TOKEN_PROB = 0.1

_EMPTY = np.zeros(0, dtype=np.int64)


def arctic_available() -> bool:
    return importlib.util.find_spec("arctic_inference") is not None


class ArcticSuffixProposer:
    def __init__(self, max_tree_depth: int = VLLM_MAX_TREE_DEPTH, max_cached_requests: int = VLLM_MAX_CACHED_REQUESTS,
                 max_spec_factor: float = VLLM_MAX_SPEC_FACTOR, min_token_prob: float = VLLM_MIN_TOKEN_PROB,
                 max_spec_offset: float = VLLM_MAX_SPEC_OFFSET, max_model_len: int = 1 << 30) -> None:
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        self.max_tree_depth, self.max_spec_factor, self.max_spec_offset = max_tree_depth, max_spec_factor, max_spec_offset
        self.min_token_prob, self.max_model_len = min_token_prob, max_model_len
        self.cache = SuffixDecodingCache(max_tree_depth=max_tree_depth, max_cached_requests=max_cached_requests)
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
        draft = self.cache.speculate(req_id, seq[max(0, num_tokens - self.max_tree_depth) :], max_spec_tokens=max_spec,
                                     max_spec_factor=self.max_spec_factor, max_spec_offset=self.max_spec_offset,
                                     min_token_prob=self.min_token_prob)
        return np.asarray(draft.token_ids, dtype=np.int64)

    def forget(self, req_id: str) -> None:
        if req_id in self.cache.active_requests:
            self.cache.stop_request(req_id)
        self._num_seen.pop(req_id, None)
