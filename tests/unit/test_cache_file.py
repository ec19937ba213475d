"""The draft cache file (`--cache-file`): a file loads into the controller and its oracle alike, versions 1 and 2
of the header too (without history), version 3 with the per-prompt history; a damaged,
foreign, header-less, future-format or other-tokenizer file starts the run cold with a
warning naming it and is moved aside. Two processes saving one file at once:
tests/process/test_cache_file_writers.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from oracles.controller import DraftController as OracleController
from oracles.prompt_history import with_history
from oracles.suffix_cache import SuffixTrieCache
from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.drafting import cache_file
from support.native_core import NativeSuffixCache

TOKENIZER = "tok-a"


def saved_cache(path: Path, num_sequences: int = 20, seed: int = 0, tokenizer: str | None = TOKENIZER) -> SuffixTrieCache:
    rng = np.random.default_rng(seed)
    cache = SuffixTrieCache(max_depth=8)
    for i in range(num_sequences):
        cache.insert(f"seed{seed}-{i}", rng.integers(0, 50, size=30))
    cache.save(path, tokenizer)
    return cache


def controller(path: Path, tokenizer: str | None = TOKENIZER, make=DraftController):
    """The controller (or its oracle) starting from the cache file at `path`."""
    return make(SpecConfig(method="specdec", cache_file=str(path)), tokenizer=tokenizer)


def cache_of(ctl) -> SuffixTrieCache | NativeSuffixCache:
    return NativeSuffixCache(ctl.drafter.cache) if isinstance(ctl, DraftController) else ctl.proposer.cache


def contents_of(ctl) -> cache_file.CacheContents:
    return ctl.contents() if isinstance(ctl, DraftController) else ctl.proposer.contents()


BOTH = pytest.mark.parametrize("make", [DraftController, OracleController])


@BOTH
def test_a_good_file_loads_with_its_header(tmp_path, make):
    path = tmp_path / "cache.npz"
    saved = saved_cache(path)
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
    assert (meta["format"], meta["version"], meta["tokenizer"]) == (cache_file.FORMAT, cache_file.VERSION, TOKENIZER)
    ctl = controller(path, make=make)
    assert ctl.cache_warning is None and len(cache_of(ctl)) == len(saved) == 20
    assert cache_of(ctl).dump() == saved.dump()
    cache_of(ctl).check_invariants()
    ctl.save_cache(str(path))  # either writes the same file back, header and all
    assert cache_file.read_contents(path, TOKENIZER).ids == saved.contents().ids
    assert [p.name for p in tmp_path.iterdir()] == ["cache.npz"]


def first_header(path: Path, cache: SuffixTrieCache, tokenizer: str = TOKENIZER) -> None:
    """Version 1 of the header, as written before the token budget: one array per sequence."""
    meta = {"format": cache_file.FORMAT, "version": 1, "tokenizer": tokenizer, "max_depth": cache.max_depth,
            "max_nodes": 100, "ids": cache.contents().ids}
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=np.asarray(json.dumps(meta)),
                            **{f"s{i}": seq for i, seq in enumerate(cache.contents().sequences())})


@BOTH
def test_a_version_1_file_still_loads(tmp_path, make):
    path = tmp_path / "cache.npz"
    first_header(path, saved_cache(tmp_path / "v2.npz"))
    ctl = controller(path, make=make)
    assert ctl.cache_warning is None and len(cache_of(ctl)) == 20  # its node bound is not used


def second_header(path: Path, cache: SuffixTrieCache, tokenizer: str = TOKENIZER) -> None:
    """Version 2: the cached sequences in one token array, no history."""
    contents = cache.contents()
    meta = {"format": cache_file.FORMAT, "version": 2, "tokenizer": tokenizer, "max_depth": cache.max_depth,
            "ids": contents.ids}
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=np.asarray(json.dumps(meta)), tokens=contents.tokens, lengths=contents.lengths)


@BOTH
def test_a_version_2_file_still_loads_without_history(tmp_path, make):
    path = tmp_path / "cache.npz"
    saved = saved_cache(tmp_path / "v3.npz")
    second_header(path, saved)
    assert cache_file.read_contents(path, TOKENIZER).history() == []
    ctl = controller(path, make=make)
    assert ctl.cache_warning is None and cache_of(ctl).dump() == saved.dump()
    assert contents_of(ctl).history() == []


def run_prompts(ctl: DraftController, prompts: list[list[int]], outputs: list[list[int]]) -> None:
    """Each prompt answered by its output (grown a few tokens a step), then finished."""
    ids = [f"r{i}" for i in range(len(prompts))]
    seqs = [np.array(p + o, dtype=np.int64) for p, o in zip(prompts, outputs)]
    lens = [len(p) for p in prompts]
    longest = max(len(o) for o in outputs)
    for n in [*range(1, longest, 3), longest]:
        ctl.step_tokens(ids, [seq[: min(len(seq), p + n)] for seq, p in zip(seqs, lens)], [0] * len(ids), None, lens)
    for req_id in ids:
        ctl.finish(req_id)


@BOTH
def test_version_3_keeps_the_history_across_runs(tmp_path, make):
    path = tmp_path / "cache.npz"
    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, 50, size=12).tolist() for _ in range(3)]
    outputs = [rng.integers(0, 50, size=int(rng.integers(5, 20))).tolist() for _ in range(3)]
    first = controller(path, make=make)
    run_prompts(first, prompts + prompts[:1], outputs + [outputs[0][:4]])
    want = [(digest, tokens.tolist()) for digest, tokens in contents_of(first).history()]
    assert [tokens for _, tokens in want] == outputs + [outputs[0][:4]]  # oldest first
    assert want[0][0] == want[3][0] != want[1][0]  # one digest per prompt
    first.save_cache(str(path))
    assert [(d, t.tolist()) for d, t in cache_file.read_contents(path, TOKENIZER).history()] == want
    for other in (DraftController, OracleController):  # the file loads into either
        later = controller(path, make=other)
        assert later.cache_warning is None
        assert [(d, t.tolist()) for d, t in contents_of(later).history()] == want


def test_history_round_trips_exactly_with_any_digest(tmp_path):
    contents = with_history(cache_file.CacheContents(8, ["a"], np.arange(3, dtype=np.int32), np.array([3])), [
        (2**64 - 1, np.array([4, 5])), (0, np.array([2**31 - 1])), (2**63, np.zeros(0, dtype=np.int64))])
    cache_file.write_contents(tmp_path / "c.npz", contents, None)
    got = cache_file.read_contents(tmp_path / "c.npz", None)
    assert [(d, t.tolist()) for d, t in got.history()] == [(2**64 - 1, [4, 5]), (0, [2**31 - 1]), (2**63, [])]
    assert got.ids == ["a"] and got.tokens.tolist() == [0, 1, 2]


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def foreign_npz(path: Path) -> None:
    with open(path, "wb") as out:
        np.savez(out, weights=np.zeros(3))


def older_specdec(path: Path) -> None:  # the header-less format this module replaced
    meta = json.dumps({"max_depth": 8, "max_nodes": 100, "ids": ["a"]})
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=np.asarray(meta), s0=np.arange(5))


def headerless_token_store(path: Path) -> None:  # the compiled drafter's first, header-less format
    meta = json.dumps({"format": 2, "max_depth": 8, "ids": ["a"]})
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=np.asarray(meta), tokens=np.arange(5, dtype=np.int32),
                            lengths=np.array([5]))


def lengths_off(path: Path) -> None:  # a good header over a payload that does not add up
    cache_file.write(path, {"max_depth": 8, "ids": ["a", "b"]},
                     {"tokens": np.arange(5, dtype=np.int32), "lengths": np.array([3, 4])}, TOKENIZER)


def depth_off(path: Path) -> None:  # a trie depth neither cache accepts
    empty = {"tokens": np.zeros(0, dtype=np.int32), "lengths": np.zeros(0, dtype=np.int64)}
    cache_file.write(path, {"max_depth": 10**12, "ids": []}, empty, TOKENIZER)


def history_off(path: Path) -> None:  # a good cache payload, a history that does not add up
    arrays = {"tokens": np.arange(5, dtype=np.int32), "lengths": np.array([5]),
              "history_digests": np.array([1, 2], dtype=np.uint64), "history_lengths": np.array([2, 2]),
              "history_tokens": np.arange(3, dtype=np.int32)}
    cache_file.write(path, {"max_depth": 8, "ids": ["a"]}, arrays, TOKENIZER)


def future_version(path: Path) -> None:
    cache_file.write(path, {"max_depth": 8, "ids": []}, {}, TOKENIZER)
    with np.load(path) as data:
        meta = {**json.loads(str(data["meta"])), "version": cache_file.VERSION + 1}
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=np.asarray(json.dumps(meta)))


DAMAGE = {
    "truncated": (truncate, "damaged"),
    "corrupt": (flip_middle, "damaged"),
    "not numpy": (lambda p: p.write_text("hello, I am a text file"), "damaged"),
    "foreign npz": (foreign_npz, "no specdec header"),
    "older specdec": (older_specdec, "no specdec header"),
    "header-less token store": (headerless_token_store, "no specdec header"),
    "payload off": (lengths_off, "damaged payload"),
    "depth off": (depth_off, "damaged payload"),
    "history off": (history_off, "damaged payload"),
    "future version": (future_version, f"format version {cache_file.VERSION + 1}"),
    "other tokenizer": (lambda p: saved_cache(p, tokenizer="tok-b"), "written for another tokenizer"),
    "version 1, other tokenizer": (lambda p: first_header(p, saved_cache(p), "tok-b"), "written for another tokenizer"),
}


@BOTH
@pytest.mark.parametrize("case", DAMAGE)
def test_an_unusable_file_starts_cold_with_a_warning_and_is_moved_aside(tmp_path, case, make):
    path = tmp_path / "cache.npz"
    saved_cache(path)
    damage, reason = DAMAGE[case]
    damage(path)
    ctl = controller(path, make=make)
    assert len(cache_of(ctl)) == 0  # cold, no exception
    assert ctl.cache_warning is not None and str(path) in ctl.cache_warning and reason in ctl.cache_warning
    assert not path.exists()
    (aside,) = tmp_path.iterdir()
    assert aside.name.startswith("cache.npz.unusable-") and str(aside) in ctl.cache_warning
    ctl.save_cache(str(path))  # the run's save starts a good file again
    assert controller(path).cache_warning is None


def test_a_missing_file_is_a_first_run_without_warning(tmp_path):
    ctl = controller(tmp_path / "none-yet.npz")
    assert ctl.cache_warning is None and len(cache_of(ctl)) == 0
