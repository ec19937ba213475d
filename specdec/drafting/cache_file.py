"""The file a cross-request draft cache is saved to (`--cache-file`): a NumPy `.npz` whose
`meta` entry is JSON `{"format": "specdec-draft-cache", "version": 3, "tokenizer": <hash or
null>, "max_depth", "ids"}`; the payload is `CacheContents`' arrays. The trie is rebuilt on load.

Versions 1 (one array `s<i>` per sequence; its node budget is ignored) and 2 (no history) still
load. A file of another tokenizer (its token ids mean nothing here), or without the header, is
refused like a damaged one."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "specdec-draft-cache"
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
_MAX_TOKEN_ID = 2**31  # the payload stores int32 ids
_DEPTHS = range(2, 256)  # what both caches accept (the compiled one stores depths in a byte)


class CacheFileError(ValueError):
    """A cache file that cannot be used; the message names the file and the reason."""


@dataclasses.dataclass(frozen=True)
class CacheContents:
    """What a cache file holds: the trie depth, the sequences, oldest first, and the
    per-prompt history's completions, oldest first."""

    max_depth: int
    ids: list[str]
    tokens: np.ndarray  # [sum(lengths)] int32: the sequences one after another
    lengths: np.ndarray  # [len(ids)] int64
    # The history: [num_completions] digests and lengths, [sum(history_lengths)] tokens.
    history_digests: np.ndarray = dataclasses.field(default_factory=partial(np.zeros, 0, np.uint64))
    history_lengths: np.ndarray = dataclasses.field(default_factory=partial(np.zeros, 0, np.int64))
    history_tokens: np.ndarray = dataclasses.field(default_factory=partial(np.zeros, 0, np.int32))

    def sequences(self) -> list[np.ndarray]:
        """One int64 array per sequence, oldest first."""
        return _split(self.tokens, self.lengths)

    def history(self) -> list[tuple[int, np.ndarray]]:
        """(prompt digest, completion as int64) per history completion, oldest first."""
        return list(zip((int(d) for d in self.history_digests), _split(self.history_tokens, self.history_lengths)))


def _split(tokens: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    ends = np.cumsum(lengths)
    return [tokens[end - n : end].astype(np.int64) for end, n in zip(ends, lengths, strict=True)]


def write_contents(path: str | Path, contents: CacheContents, tokenizer: str | None) -> None:
    """Write a cache's sequences and history under the current header (atomically)."""
    tokens, history = np.asarray(contents.tokens), np.asarray(contents.history_tokens)
    for ids in (tokens, history):
        if ids.size and (ids.min() < 0 or ids.max() >= _MAX_TOKEN_ID):
            raise ValueError("cache file: token ids must lie in [0, 2**31)")
    arrays = {"tokens": np.ascontiguousarray(tokens, dtype=np.int32),
              "lengths": np.asarray(contents.lengths, dtype=np.int64),
              "history_digests": np.asarray(contents.history_digests, dtype=np.uint64),
              "history_lengths": np.asarray(contents.history_lengths, dtype=np.int64),
              "history_tokens": np.ascontiguousarray(history, dtype=np.int32)}
    write(path, {"max_depth": contents.max_depth, "ids": list(contents.ids)}, arrays, tokenizer)


def read_contents(path: str | Path, tokenizer: str | None) -> CacheContents:
    """The contents of a usable file of any readable version. Raises FileNotFoundError or
    CacheFileError (also for a payload that does not add up)."""
    meta, arrays = read(path, tokenizer)
    try:
        return _contents(meta, arrays)
    except (KeyError, TypeError, ValueError) as exc:
        raise CacheFileError(f"{path}: damaged payload ({exc})") from None


def _contents(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> CacheContents:
    ids, max_depth = meta["ids"], int(meta["max_depth"])
    if not isinstance(ids, list) or max_depth not in _DEPTHS:
        raise ValueError("bad sequence list or trie depth")
    if meta["version"] == 1:  # one array per sequence
        if sorted(arrays) != sorted(f"s{i}" for i in range(len(ids))):
            raise ValueError("sequence list does not match the stored arrays")
        seqs = [arrays[f"s{i}"] for i in range(len(ids))]
        tokens = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int32)
        lengths = np.array([s.size for s in seqs], dtype=np.int64)
        if any(s.ndim != 1 for s in seqs):
            raise ValueError("a stored sequence is not 1-D")
    else:
        tokens, lengths = arrays["tokens"], arrays["lengths"]
    _check_tokens(tokens, lengths)
    if lengths.size != len(ids):
        raise ValueError("sequence lengths do not match the sequence list")
    contents = CacheContents(max_depth, [str(i) for i in ids], tokens.astype(np.int32), lengths.astype(np.int64))
    if meta["version"] < 3:  # no history before version 3
        return contents
    digests, lengths, tokens = arrays["history_digests"], arrays["history_lengths"], arrays["history_tokens"]
    if digests.ndim != 1 or digests.dtype != np.uint64 or digests.size != lengths.size:
        raise ValueError("history digests of the wrong shape or type")
    _check_tokens(tokens, lengths)
    return dataclasses.replace(contents, history_digests=digests, history_lengths=lengths.astype(np.int64),
                               history_tokens=tokens.astype(np.int32))


def _check_tokens(tokens: np.ndarray, lengths: np.ndarray) -> None:
    if tokens.ndim != 1 or lengths.ndim != 1 or tokens.dtype.kind not in "iu" or lengths.dtype.kind not in "iu":
        raise ValueError("token arrays of the wrong shape or type")
    if (lengths < 0).any() or int(lengths.sum()) != tokens.size:
        raise ValueError("lengths do not add up to the stored tokens")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= _MAX_TOKEN_ID):
        raise ValueError("token ids outside [0, 2**31)")


def write(path: str | Path, meta: dict[str, Any], arrays: dict[str, np.ndarray], tokenizer: str | None) -> None:
    """Write `arrays` with the header and `meta` to `path`: a unique temporary file, then an atomic
    rename, so that two workers saving at once leave one complete file."""
    path = Path(path)
    header = {**meta, "format": FORMAT, "version": VERSION, "tokenizer": tokenizer}
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "wb") as out:  # a file object: numpy would append ".npz" to a name
            np.savez_compressed(out, meta=np.asarray(json.dumps(header)), **arrays)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read(path: str | Path, tokenizer: str | None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, arrays) of a file with a readable header. `tokenizer=None` skips the tokenizer
    check (replay, tests: no tokenizer identity). Raises FileNotFoundError or CacheFileError."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = _header(data, tokenizer)
            arrays = {name: data[name] for name in data.files if name != "meta"}  # decompresses: finds corruption
    except FileNotFoundError:
        raise
    except CacheFileError as exc:
        raise CacheFileError(f"{path}: {exc}") from None
    except Exception as exc:  # zip, zlib, npy and JSON errors alike: the file is damaged
        raise CacheFileError(f"{path}: damaged ({type(exc).__name__}: {exc})") from exc
    return meta, arrays


def _header(data: Any, tokenizer: str | None) -> dict[str, Any]:
    if "meta" not in data.files:
        raise CacheFileError("no specdec header (not a draft cache file)")
    meta = json.loads(str(data["meta"]))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CacheFileError("no specdec header (not a draft cache file, or one from an older specdec)")
    if meta.get("version") not in READABLE_VERSIONS:
        raise CacheFileError(f"format version {meta.get('version')!r}, this specdec reads versions "
                             f"{', '.join(map(str, READABLE_VERSIONS))}")
    if tokenizer is not None and meta.get("tokenizer") != tokenizer:
        raise CacheFileError(f"written for another tokenizer ({meta.get('tokenizer')}, this run uses {tokenizer})")
    return meta


def set_aside(path: str | Path) -> Path:
    """Move an unusable file out of the way (kept for a look); returns where it went."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.unusable-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    os.replace(path, aside)
    return aside
