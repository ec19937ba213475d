"""Two processes saving one draft cache file at once leave one complete file (one writer's) and
no temporary files. The file format without processes: tests/unit/test_cache_file.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oracles.suffix_cache import SuffixTrieCache
from support import REPO

pytestmark = pytest.mark.slow

TOKENIZER = "tok-a"
NUM_SEQUENCES = 400

# Each writer saves its own cache (sequence ids "seed<seed>-<i>") again and again.
SAVE_REPEATEDLY = """
import sys
import numpy as np
from oracles.suffix_cache import SuffixTrieCache
path, seed, times, tokenizer, num_sequences = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
rng = np.random.default_rng(seed)
cache = SuffixTrieCache(max_depth=8)
for i in range(num_sequences):
    cache.insert(f"seed{seed}-{i}", rng.integers(0, 50, size=30))
for _ in range(times):
    cache.save(path, tokenizer)
print("done", flush=True)
"""


def test_two_processes_saving_one_file_at_once_leave_one_complete_file(tmp_path):
    path = tmp_path / "shared.npz"
    env = {"PYTHONPATH": f"{REPO}:{REPO / 'tests'}", "PATH": ""}
    writers = [subprocess.Popen([sys.executable, "-c", SAVE_REPEATEDLY, str(path), str(seed), "30", TOKENIZER,
                                 str(NUM_SEQUENCES)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) for seed in (1, 2)]
    for writer in writers:
        out, _ = writer.communicate(timeout=300)
        assert writer.returncode == 0 and "done" in out, out
    loaded = SuffixTrieCache.load(path, tokenizer=TOKENIZER)
    loaded.check_invariants()
    prefixes = {seq_id.split("-")[0] for seq_id in loaded._sequences}
    assert len(loaded) == NUM_SEQUENCES and prefixes in ({"seed1"}, {"seed2"})  # one writer's whole file
    assert [p.name for p in tmp_path.iterdir()] == ["shared.npz"]  # no temporary files
