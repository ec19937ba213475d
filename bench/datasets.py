"""Prompt sets for the benchmark: built-in ones by name (read by prompt_sets/) or any prompt Parquet file/folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prompt_sets.humaneval import humaneval_rows
from prompt_sets.sharegpt import sharegpt_long_rows, sharegpt_multiturn_rows, sharegpt_rows
from specdec.prompts import InputError, PromptRow, prompt_token_ids, read_prompt_table, validate_rows

# name -> loader(limit): rows with id, prompt and (for chats) messages
BUILTIN_LOADERS: dict[str, Callable[[int | None], list[dict[str, str]]]] = {
    "humaneval": humaneval_rows,
    "sharegpt": sharegpt_rows,
    "sharegpt-mt": sharegpt_multiturn_rows,
    "sharegpt-long": sharegpt_long_rows,
}
BUILTIN = tuple(BUILTIN_LOADERS)


def load_rows(name_or_path: str, limit: int | None) -> tuple[list[PromptRow], str]:
    """(rows, dataset name) for a built-in set or a Parquet file / folder of shards."""
    if name_or_path in BUILTIN_LOADERS:
        items = BUILTIN_LOADERS[name_or_path](limit)
        messages = [json.loads(r["messages"]) if r.get("messages") else None for r in items]
        return [PromptRow(i, r["id"], r["prompt"], m, None) for i, (r, m) in enumerate(zip(items, messages))], name_or_path
    path = Path(name_or_path)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise InputError(f"{path}: no .parquet files")
    rows: list[PromptRow] = []
    for file in files:
        valid, rejected = validate_rows(read_prompt_table(file), str(file))
        if rejected:  # left out, not fatal: the bench measures the rows that can run
            print(f"{file}: {len(rejected)} invalid row(s) left out, first: row {rejected[0].index}: "
                  f"{rejected[0].reason}")
        rows.extend(valid)
        if limit is not None and len(rows) >= limit:
            break
    return (rows[:limit] if limit is not None else rows), path.stem


def sharegpt_reply_lengths(tokenizer: Any, limit: int | None, prompt_format: str = "chat") -> list[tuple[int, int]]:
    """(prompt tokens, reply tokens + EOS) of ShareGPT's first exchanges, through `tokenizer`."""
    lengths = []
    for i, item in enumerate(sharegpt_multiturn_rows(limit, max_prompt_chars=1 << 20)):
        user, reply = json.loads(item["messages"])[:2]
        row = PromptRow(i, item["id"], user["content"], [user], None)
        lengths.append((len(prompt_token_ids(row, tokenizer, prompt_format)),
                        len(tokenizer.encode(reply["content"], add_special_tokens=False)) + 1))
    return lengths
