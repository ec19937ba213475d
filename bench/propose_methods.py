"""The drafters `specdec bench-propose` times, each driven as its vLLM adapter drives it on
vLLM's buffers (`token_ids` [num_rows, width] int32, `lengths` [num_rows]), and the synthetic
token streams: `specdec-worker` (specdec's whole proposer call, budget and timer on),
`suffix-arctic` (arctic's suffix cache), `ngram-vllm` (vLLM's numba n-gram, lookup 2..5)."""

from __future__ import annotations

import types
from collections.abc import Iterator, Sequence

import numpy as np

from specdec.config import SpecConfig
from specdec.step_cost import StepCost

# Verification nearly free: the budget keeps every draft (its costly path).
FREE = StepCost(fixed_s=0.07, per_seq_s=0.0, per_token_s=1e-5)
METHODS = ("specdec-worker", "suffix-arctic", "ngram-vllm")
VOCAB = 32_000


class Runner:
    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """Finished requests into the cross-request cache."""

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        """One engine step; returns the tokens drafted."""
        raise NotImplementedError


class WorkerRunner(Runner):
    """specdec's proposer call per step, every draft accepted and verifying nearly free (the
    budget's costly path: it keeps drafting)."""

    def __init__(self, k: int, num_rows: int, cache_tokens: int, prompt_len: int | None = None) -> None:
        from specdec.engines.vllm_proposer import SpecdecVllmProposer

        cfg = SpecConfig(method="specdec", k_max=k, cache_max_tokens=max(cache_tokens, 1) * 2)
        self.proposer = SpecdecVllmProposer(types.SimpleNamespace(
            speculative_config=types.SimpleNamespace(num_speculative_tokens=cfg.k_ceiling),  # vLLM's K
            scheduler_config=types.SimpleNamespace(max_num_seqs=num_rows)))  # a full batch: no tail
        # vLLM's internal ids: the external id and 8 random characters
        batch = types.SimpleNamespace(req_ids=[f"r{i}-0123abcd" for i in range(num_rows)])
        if prompt_len is not None:  # vLLM's input_batch.num_prompt_tokens
            batch.num_prompt_tokens = np.full(num_rows, prompt_len, dtype=np.int32)
        self.proposer.bind(batch, cfg)
        self.proposer.timer.model = FREE
        self.sampled = [[0]] * num_rows

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        controller = self.proposer.controller
        assert controller is not None
        for i, seq in enumerate(sequences):
            controller.drafter.cache.insert(f"done-{i}", np.ascontiguousarray(seq, dtype=np.int32))

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.sampled, lengths, token_ids)
        self.sampled = [[0] * (len(d) + 1) for d in drafts]  # vLLM's sampled tokens: every draft accepted
        return sum(map(len, drafts))


class ArcticRunner(Runner):
    def __init__(self, k: int, num_rows: int) -> None:
        from bench.suffix_baseline import ArcticSuffixProposer

        self.proposer = ArcticSuffixProposer()
        self.ids = [f"r{i}" for i in range(num_rows)]
        self.k = k

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """As vLLM's adapter adds them: started, a token at a time, stopped."""
        cache = self.proposer.cache
        for i, seq in enumerate(sequences):
            cache.start_request(f"done-{i}", np.ascontiguousarray(seq[:1], dtype=np.int32))
            for tok in seq[1:].tolist():
                cache.add_active_response(f"done-{i}", [tok])
            cache.stop_request(f"done-{i}")

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        propose = self.proposer.propose
        return sum(propose(r, token_ids[i, :n], self.k).shape[0] for i, (r, n) in enumerate(zip(self.ids, lengths.tolist())))


class VllmNgramRunner(Runner):
    def __init__(self, k: int, num_rows: int, width: int) -> None:
        from vllm.v1.spec_decode.ngram_proposer import NgramProposer

        config = types.SimpleNamespace(
            speculative_config=types.SimpleNamespace(prompt_lookup_min=2, prompt_lookup_max=5, num_speculative_tokens=k),
            model_config=types.SimpleNamespace(max_model_len=width + k + 1),
            scheduler_config=types.SimpleNamespace(max_num_seqs=num_rows),
            parallel_config=types.SimpleNamespace(tensor_parallel_size=1),
        )
        self.proposer = NgramProposer(config)  # compiles its numba code (seconds)
        self.k = k
        self.sampled = [[0]] * num_rows  # every row decoding

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.k, self.sampled, lengths, token_ids)
        return sum(len(d) for d in drafts)


def make_runner(method: str, k: int, num_rows: int, width: int, cache_tokens: int,
                prompt_len: int | None = None) -> Runner:
    """A fresh runner (its cache holds `cache_tokens` twice over; `prompt_len`: each row's prompt)."""
    if method == "specdec-worker":
        return WorkerRunner(k, num_rows, cache_tokens, prompt_len)
    if method == "suffix-arctic":
        return ArcticRunner(k, num_rows)
    if method == "ngram-vllm":
        return VllmNgramRunner(k, num_rows, width)
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def synthetic_sequence(rng: np.random.Generator, length: int, donors: list[np.ndarray] | None = None) -> np.ndarray:
    """Random tokens with a 32-token span copied every 256 (from itself, or every other from `donors`)."""
    tokens = rng.integers(0, VOCAB, size=length)
    for i in range(length // 256):
        src = donors[int(rng.integers(len(donors)))] if donors and i % 2 else tokens
        a = int(rng.integers(0, max(src.size - 32, 1)))
        b = int(rng.integers(0, max(length - 32, 1)))
        piece = src[a : a + 32]
        tokens[b : b + piece.size] = piece[: length - b]
    return tokens.astype(np.int64)


def finished_requests(total_tokens: int, length: int = 2048, seed: int = 1) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    left = total_tokens
    while left > 0:
        yield synthetic_sequence(rng, min(length, left))
        left -= length


def request_buffer(num_rows: int, context: int, extra: int, donors: list[np.ndarray], seed: int = 0) -> np.ndarray:
    """vLLM's `token_ids_cpu` [num_rows, context + extra] int32: prompts whose tail repeats
    tokens [100, 108), then `extra` tokens copying on from there (drafts every step)."""
    rng = np.random.default_rng(seed)
    if context < 116:
        raise ValueError(f"context {context} too short (at least 116 tokens)")
    period = context - 108  # generated token j repeats the stream's token 108 + j
    out = np.zeros((num_rows, context + extra), dtype=np.int32)
    for row in range(num_rows):
        tokens = synthetic_sequence(rng, context, donors)
        tokens[-8:] = tokens[100:108]
        out[row, :context] = tokens
        for start in range(context, context + extra, period):
            n = min(period, context + extra - start)
            out[row, start : start + n] = out[row, start - period : start - period + n]
    return out


def share_prompts(token_ids: np.ndarray, context: int, rows_per_prompt: int, seed: int = 0) -> np.ndarray:
    """Rows in groups sharing the first's prompt, and its output with 1 token in 16 changed."""
    if rows_per_prompt < 1:
        raise ValueError(f"rows_per_prompt={rows_per_prompt} must be >= 1")
    rng = np.random.default_rng(seed)
    out = token_ids.copy()
    for row in range(out.shape[0]):
        first = row - row % rows_per_prompt
        if row != first:
            out[row] = out[first]
            changed = context + np.flatnonzero(rng.random(out.shape[1] - context) < 1 / 16)
            out[row, changed] = rng.integers(0, VOCAB, size=changed.size)
    return out
