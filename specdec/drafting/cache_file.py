"""The file a cross-request draft cache is saved to (`--cache-file`): a versioned header,
checked before anything is used, and an atomic write.

Format: a NumPy `.npz` archive. Its `meta` entry is JSON:
`{"format": "specdec-draft-cache", "version": 1, "tokenizer": <hash or null>, ...}` plus
what the cache itself records; the other entries are the cache's arrays. Token ids only mean
something to the tokenizer that made them, so a file written with another tokenizer is
refused like a damaged one. `read` raises CacheFileError, naming the file and what is wrong,
for a truncated, corrupt or foreign file, another format version or another tokenizer;
`set_aside` moves such a file out of the way so the run can start cold and the next save
starts a good one. `write` goes through a temporary file of its own (unique per writer) and
an atomic rename: two workers saving the same file at once leave one complete file.

Kept apart from the cache's data structure so that another implementation of the cache (a
compiled one) can store its own payload under the same header.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "specdec-draft-cache"
VERSION = 1


class CacheFileError(ValueError):
    """A cache file that cannot be used; the message names the file and the reason."""


def write(path: str | Path, meta: dict[str, Any], arrays: dict[str, np.ndarray], tokenizer: str | None) -> None:
    """Write `arrays` with the header and `meta` to `path` atomically."""
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
    """(meta, arrays) of a usable file. `tokenizer=None` skips the tokenizer check (replay,
    tests: no tokenizer identity). Raises FileNotFoundError or CacheFileError."""
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
    if meta.get("version") != VERSION:
        raise CacheFileError(f"format version {meta.get('version')!r}, this specdec reads version {VERSION}")
    if tokenizer is not None and meta.get("tokenizer") != tokenizer:
        raise CacheFileError(f"written for another tokenizer ({meta.get('tokenizer')}, this run uses {tokenizer})")
    return meta


def set_aside(path: str | Path) -> Path:
    """Move an unusable file out of the way (kept for a look); returns where it went."""
    path = Path(path)
    aside = path.with_name(f"{path.name}.unusable-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    os.replace(path, aside)
    return aside
