"""The cross-request cache's file (`--cache-file`): the cached sequences, oldest first.

Both drafters (the Python reference and the compiled core) save and load through this
module, so a file written by one loads into the other. The trie is never stored: it is
rebuilt from the sequences on load.

Formats (NumPy `.npz`, a JSON `meta` entry):

- version 2 (written now): `meta = {"format": 2, "max_depth", "ids"}`, `tokens` (int32, every
  sequence's tokens one after another) and `lengths` (int64, one per sequence);
- version 1 (written before the token budget): `meta = {"max_depth", "max_nodes", "ids"}`
  and one array `s<i>` per sequence. Still read; its node budget is ignored (the loading
  cache's token budget applies).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class CacheContents:
    """What a cache file holds: the trie depth and the sequences, oldest first."""

    max_depth: int
    ids: list[str]
    tokens: np.ndarray  # [sum(lengths)] int32: the sequences one after another
    lengths: np.ndarray  # [len(ids)] int64

    def sequences(self) -> list[np.ndarray]:
        """One int64 array per sequence, oldest first."""
        ends = np.cumsum(self.lengths)
        return [self.tokens[end - n : end].astype(np.int64) for end, n in zip(ends, self.lengths, strict=True)]


def write_cache_file(path: str | Path, contents: CacheContents) -> None:
    """Write `contents` atomically (a temporary file, then a rename)."""
    path = Path(path)
    if contents.tokens.size and (contents.tokens.min() < 0 or contents.tokens.max() >= 2**31):
        raise ValueError("cache file: token ids must lie in [0, 2**31)")
    meta = json.dumps({"format": FORMAT_VERSION, "max_depth": contents.max_depth, "ids": contents.ids})
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp,
        meta=np.asarray(meta),
        tokens=np.ascontiguousarray(contents.tokens, dtype=np.int32),
        lengths=np.asarray(contents.lengths, dtype=np.int64),
    )
    tmp.replace(path)


def read_cache_file(path: str | Path) -> CacheContents:
    """Read a cache file of any known format version.

    Raises:
        ValueError: the file is of a newer format than this code knows.
    """
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        version = meta.get("format", 1)
        if version == 1:
            seqs = [np.asarray(data[f"s{i}"], dtype=np.int64) for i in range(len(meta["ids"]))]
            tokens = np.concatenate(seqs).astype(np.int32) if seqs else np.zeros(0, dtype=np.int32)
            lengths = np.array([s.size for s in seqs], dtype=np.int64)
        elif version == FORMAT_VERSION:
            tokens = np.asarray(data["tokens"], dtype=np.int32)
            lengths = np.asarray(data["lengths"], dtype=np.int64)
        else:
            raise ValueError(f"cache file {path}: format {version} is newer than this specdec reads")
    return CacheContents(int(meta["max_depth"]), list(meta["ids"]), tokens, lengths)
