"""How many compiled kernels oneDNN keeps in vLLM-CPU's worker: one per operation and input
shape, and a batch job's prefill shapes are new almost every step, so the default (1024) grew
the worker's memory; a quarter keeps it flat (docs/notes/2026-12-01-onednn-kernel-cache.md)."""

from __future__ import annotations

import os

CAPACITY_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
DEFAULT_CAPACITY = 256


def apply_primitive_cache_capacity() -> str:
    """Bound oneDNN's primitive cache for engines started from now on, unless the user chose a
    capacity; returns the capacity in effect."""
    return os.environ.setdefault(CAPACITY_ENV, str(DEFAULT_CAPACITY))
