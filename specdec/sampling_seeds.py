"""One sampling seed per (run seed, row id, sample index): a hash of what identifies the
sample, never its position, so that resumes and other batchings give each sample the same seed."""

from __future__ import annotations

import hashlib

SEED_LIMIT = 2**31  # seeds stay non-negative int32s, which every sampler accepts


def sample_seed(seed: int, row_id: str, sample: int) -> int:
    """The seed of sample `sample` of row `row_id` in a run seeded with `seed`: stable across
    processes and Python versions (blake2b, not `hash()`), in [0, 2**31)."""
    digest = hashlib.blake2b(f"{seed}|{row_id}|{sample}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % SEED_LIMIT
