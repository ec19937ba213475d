"""A prompt's content digest: what groups requests of the same prompt and keys their history.

FNV-1a, 64 bits, over the prompt's token ids, each fed as the 4 little-endian bytes of its
uint32 value (offset basis 14695981039346656037, prime 1099511628211, arithmetic mod 2**64).
The compiled core computes the same function, so both drafters group alike and a history
saved by one is found by the other. It runs once per request, so a plain loop is fine.
"""

from __future__ import annotations

from collections.abc import Iterable

FNV_OFFSET_BASIS = 14695981039346656037
FNV_PRIME = 1099511628211
_MASK = (1 << 64) - 1


def prompt_digest(tokens: Iterable[int]) -> int:
    """FNV-1a 64 of `tokens` ([num_prompt_tokens] ids, each as 4 little-endian bytes)."""
    digest = FNV_OFFSET_BASIS
    for token in tokens:
        value = int(token) & 0xFFFFFFFF
        for shift in (0, 8, 16, 24):
            digest ^= (value >> shift) & 0xFF
            digest = (digest * FNV_PRIME) & _MASK
    return digest
