"""Synthetic token streams for the drafting benches: random tokens with copied spans, so that
lookups find matches as they do in real text, and a tail that repeats an earlier span."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

VOCAB = 32_000


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
