"""The drafters `specdec bench-propose` times, each driven the way its engine adapter drives
it, and the synthetic token streams they draft from.

A runner sees what vLLM hands a drafter every step: `token_ids` ([num_rows, width] int32,
vLLM's `token_ids_cpu`) and `lengths` ([num_rows], `num_tokens_no_spec`); specdec's also each
row's prompt length (vLLM's `num_prompt_tokens`). `step` is one engine step for the whole
batch after each request gained one token; the first (`start`) is not timed.

- `specdec-worker`: what specdec costs per step in vLLM's worker, all of it: the proposer call
  vLLM makes (`SpecdecVllmProposer.propose`), batch budget and step timer on;
- `suffix-arctic`: arctic-inference's suffix cache as vLLM's `suffix` method drives it;
- `ngram-vllm`: vLLM's own n-gram proposer class (numba), prompt lookup 2..5.
"""

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
    """A drafter behind one call per engine step, and the cross-request state it starts with."""

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """Finished requests into the cross-request cache (none by default)."""

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        """One engine step; returns the tokens drafted."""
        raise NotImplementedError


class WorkerRunner(Runner):
    """specdec's proposer call as vLLM's worker makes it each step (`SpecdecVllmProposer.
    propose`), budget and step timer on. Every draft is reported accepted and verifying is
    nearly free, so that the budget keeps drafting (its costly path); the step timer refits
    from the intervals between calls as it does in the engine."""

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
    """arctic-inference's suffix cache, per request, as vLLM's `suffix` method drives it."""

    def __init__(self, k: int, num_rows: int) -> None:
        from bench.suffix_baseline import ArcticSuffixProposer

        self.proposer = ArcticSuffixProposer()
        self.ids = [f"r{i}" for i in range(num_rows)]
        self.k = k

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """Finished requests into arctic's global tree the way vLLM's adapter does it: the
        prompt (here the first token) starts the request, each new token is added, then it stops."""
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
    """vLLM's NgramProposer (its numba batch path, one thread as vLLM sets it)."""

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
    """A fresh runner for `method` (its cache budget holds `cache_tokens` twice over); specdec's
    are told that each row's first `prompt_len` tokens are its prompt (None: unknown)."""
    if method == "specdec-worker":
        return WorkerRunner(k, num_rows, cache_tokens, prompt_len)
    if method == "suffix-arctic":
        return ArcticRunner(k, num_rows)
    if method == "ngram-vllm":
        return VllmNgramRunner(k, num_rows, width)
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def synthetic_sequence(rng: np.random.Generator, length: int, donors: list[np.ndarray] | None = None) -> np.ndarray:
    """`length` random tokens with a 32-token span copied every 256 tokens (from the sequence
    itself, or from one of `donors` for every other span where given)."""
    tokens = rng.integers(0, VOCAB, size=length)
    for i in range(length // 256):
        src = donors[int(rng.integers(len(donors)))] if donors and i % 2 else tokens
        a = int(rng.integers(0, max(src.size - 32, 1)))
        b = int(rng.integers(0, max(length - 32, 1)))
        piece = src[a : a + 32]
        tokens[b : b + piece.size] = piece[: length - b]
    return tokens.astype(np.int64)


def finished_requests(total_tokens: int, length: int = 2048, seed: int = 1) -> Iterator[np.ndarray]:
    """Finished requests of `length` tokens (the last one shorter) adding up to `total_tokens`."""
    rng = np.random.default_rng(seed)
    left = total_tokens
    while left > 0:
        yield synthetic_sequence(rng, min(length, left))
        left -= length


def request_buffer(num_rows: int, context: int, extra: int, donors: list[np.ndarray], seed: int = 0) -> np.ndarray:
    """vLLM's `token_ids_cpu` for a batch: [num_rows, context + extra] int32. Each row is a
    `context`-token prompt whose tail repeats tokens [100, 108), followed by `extra` tokens
    that go on copying from there (a request copying from its prompt: drafts every step)."""
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
    """Rows in groups of `rows_per_prompt` with the first row's prompt (token_ids[:, :context])
    and its output with about 1 token in 16 changed (samples of one prompt write similar text)."""
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
