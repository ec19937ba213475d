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


def prompt_streams(rng: np.random.Generator, num: int, alphabet: int) -> list[tuple[np.ndarray, int]]:
    """Requests as (tokens, prompt length): a few prompts, each asked several times (siblings),
    whose outputs copy a shared answer with changes here and there, as samples of one prompt do."""
    prompts = repetitive_streams(rng, max(1, num // 3), alphabet)
    answers = repetitive_streams(rng, len(prompts), alphabet)
    out: list[tuple[np.ndarray, int]] = []
    for _ in range(num):
        which = int(rng.integers(len(prompts)))
        prompt = prompts[which]
        if rng.random() < 0.1:  # a prefix of it: another prompt
            prompt = prompt[: int(rng.integers(0, prompt.size + 1))]
        answer = answers[which].copy()
        for _ in range(int(rng.integers(0, 3))):  # a few changed spans
            at = int(rng.integers(answer.size))
            answer[at : at + int(rng.integers(1, 6))] = rng.integers(0, alphabet)
        out.append((np.concatenate([prompt, answer[: int(rng.integers(1, answer.size + 1))]]), prompt.size))
    return out
