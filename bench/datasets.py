"""Prompt sets for the benchmark: built-in ones or any prompt Parquet file/folder."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import Any

from specdec.datasets import first_human_turn, humaneval_rows, sharegpt_history_rows, sharegpt_rows
from specdec.prompts import InputError, PromptRow, prompt_token_ids, read_prompt_table, validate_rows

def sharegpt_multiturn_rows(limit: int | None = None, max_prompt_chars: int = 1500) -> list[dict[str, str]]:
    """Multi-turn ShareGPT prompts: the conversation up to its second user turn (the first answer included), as chat
    `messages`; the model then writes the second answer (later turns often quote earlier ones: drafting from the
    request's own text pays). Conversations whose history exceeds `max_prompt_chars` are skipped."""
    def history(item: object) -> list[dict[str, str]] | None:
        turns = _chat_turns(item)[:3]
        return turns if len(turns) == 3 and sum(len(m["content"]) for m in turns) <= max_prompt_chars else None

    return sharegpt_history_rows("sharegpt-mt", history, limit)


def sharegpt_long_rows(limit: int | None = None, min_chars: int = 4500, max_chars: int = 7500) -> list[dict[str, str]]:
    """Long-context ShareGPT prompts: each conversation's history up to its last user turn that keeps it within
    `max_chars`, kept if it reaches `min_chars`; the model then writes the next answer. At SmolLM2's 4.1 characters
    per token on these histories that is 1-2k prompt tokens, leaving room for denser text (code)."""
    return sharegpt_history_rows("sharegpt-long", lambda item: _long_history(item, min_chars, max_chars), limit)


def _long_history(item: object, min_chars: int, max_chars: int) -> list[dict[str, str]] | None:
    turns = _chat_turns(item)
    # Totals only grow, so the last user turn that fits gives the longest history.
    ends = [i + 1 for i, total in enumerate(accumulate(len(m["content"]) for m in turns))
            if turns[i]["role"] == "user" and min_chars <= total <= max_chars]
    return turns[: ends[-1]] if ends else None


def _chat_turns(item: object) -> list[dict[str, str]]:
    """A conversation's leading run of non-empty turns alternating human/gpt, as chat
    messages (empty for a malformed item): later turns from other roles are cut off."""
    if first_human_turn(item) is None:
        return []
    messages = []
    for i, turn in enumerate(item["conversations"]):  # type: ignore[index]
        text = turn["value"].strip()
        if turn["from"] != ("human" if i % 2 == 0 else "gpt") or not text:
            break
        messages.append({"role": "user" if turn["from"] == "human" else "assistant", "content": text})
    return messages


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
