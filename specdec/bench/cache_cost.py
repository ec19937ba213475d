"""What the cross-request cache costs: adding a finished request (µs per token) and resident
memory per cached token (`specdec bench-propose` prints both).

Memory is measured in a fresh process (`python -m specdec.bench.cache_cost METHOD TOKENS`):
its resident set before and after filling a cache with TOKENS tokens of finished requests,
so nothing else the bench holds is counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from specdec.bench.propose_methods import add_finished_to_arctic
from specdec.bench.token_streams import finished_requests

REQUEST_TOKENS = 2048  # tokens of each finished request added
# The Python reference needs about 5 kB per cached token: it is measured on a smaller cache.
PYTHON_CACHE_TOKENS = 50_000


def make_cache(method: str, max_tokens: int):
    """An empty cross-request cache of `method` ('specdec-native', 'specdec-python',
    'suffix-arctic') and the function that adds one finished request to it."""
    if method == "specdec-native":
        from specdec.drafting.native import NativeSuffixCache

        cache = NativeSuffixCache.create(max_tokens=max_tokens)
        return cache, lambda seq_id, seq: cache.insert(seq_id, seq)
    if method == "specdec-python":
        from specdec.drafting.suffix_cache import SuffixTrieCache

        cache = SuffixTrieCache(max_tokens=max_tokens)
        return cache, cache.insert
    if method == "suffix-arctic":
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        cache = SuffixDecodingCache(max_tree_depth=24, max_cached_requests=max(max_tokens // REQUEST_TOKENS, 1))
        return cache, lambda seq_id, seq: add_finished_to_arctic(cache, [seq], prefix=seq_id)
    raise ValueError(f"no cache for method {method!r}")


def insert_cost(
    method: str, cache_tokens: int, num_requests: int = 4, clock: Callable[[], float] = time.process_time
) -> Callable[[], float]:
    """A cache of `method` holding `cache_tokens` tokens (its budget: each insert evicts as
    much); returns a function that adds `num_requests` more finished requests and gives the
    µs per token it took (call it once per repeat)."""
    cache, add = make_cache(method, cache_tokens)
    for i, seq in enumerate(finished_requests(cache_tokens)):
        add(f"fill-{i}", seq)
    fresh = finished_requests(10**12, REQUEST_TOKENS, seed=7)
    counter = iter(range(10**9))

    def once() -> float:
        batch = [next(fresh) for _ in range(num_requests)]
        started = clock()
        for seq in batch:
            add(f"new-{next(counter)}", seq)
        return (clock() - started) / sum(s.size for s in batch) * 1e6

    return once


def memory_per_token(method: str, tokens: int, timeout_s: float = 3600.0) -> dict[str, float]:
    """Resident bytes per cached token of a `method` cache holding `tokens` tokens, measured in
    a fresh process (and, for specdec-native, the bytes its own accounting reports)."""
    out = subprocess.run(
        [sys.executable, "-m", "specdec.bench.cache_cost", method, str(tokens)],
        capture_output=True, text=True, timeout=timeout_s, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _resident_bytes() -> int:
    """This process's resident set (Linux)."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _measure(method: str, tokens: int) -> dict[str, float]:
    cache, add = make_cache(method, tokens)
    before = _resident_bytes()
    started = time.process_time()
    for i, seq in enumerate(finished_requests(tokens)):
        add(f"fill-{i}", seq)
    seconds = time.process_time() - started
    resident = _resident_bytes() - before
    result = {"method": method, "cached_tokens": tokens, "resident_bytes_per_token": resident / tokens,
              "fill_us_per_token": seconds / tokens * 1e6}
    if method == "specdec-native":
        result["own_bytes_per_token"] = cache.memory_bytes() / tokens
        result["nodes_per_token"] = cache.num_nodes / tokens
    return result


if __name__ == "__main__":
    np.seterr(all="ignore")
    print(json.dumps(_measure(sys.argv[1], int(sys.argv[2]))))
