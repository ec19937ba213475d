"""Random token streams for the drafter and controller property tests."""

from __future__ import annotations

import numpy as np


def repetitive_streams(rng: np.random.Generator, num: int, alphabet: int) -> list[np.ndarray]:
    """Token streams that repeat themselves and each other, as real text does."""
    out: list[np.ndarray] = []
    for _ in range(num):
        seq = rng.integers(0, alphabet, size=int(rng.integers(2, 120)))
        for _ in range(int(rng.integers(0, 4))):
            src = out[int(rng.integers(len(out)))] if out and rng.random() < 0.5 else seq
            n = int(rng.integers(1, 16))
            a, b = int(rng.integers(max(src.size - n, 1))), int(rng.integers(max(seq.size - n, 1)))
            piece = src[a : a + n]
            seq[b : b + piece.size] = piece[: seq.size - b]
        out.append(seq)
    return out
