"""The built-in long-context set, sharegpt-long: ShareGPT histories up to a user turn, within
a character window of about 1-2k tokens; and sharegpt-mt's rows after the shared refactor."""

from __future__ import annotations

import inspect
import json
import statistics

from bench.datasets import BUILTIN, load_rows
from prompt_sets.sharegpt import _long_history, sharegpt_long_rows, sharegpt_multiturn_rows
from specdec.prompts import prompt_token_ids

WINDOW = {k: p.default for k, p in inspect.signature(sharegpt_long_rows).parameters.items() if k != "limit"}


def chars(messages) -> int:
    return sum(len(m["content"]) for m in messages)


def conversation(*sizes: int, roles: str = "") -> dict:
    """A ShareGPT item whose turns have these lengths, alternating human/gpt unless `roles`
    (h/g/s per turn) says otherwise."""
    names = {"h": "human", "g": "gpt", "s": "system"}
    froms = [names[r] for r in roles] if roles else ["human" if i % 2 == 0 else "gpt" for i in range(len(sizes))]
    return {"id": "c", "conversations": [{"from": f, "value": "x" * n} for f, n in zip(froms, sizes)]}


def test_history_ends_at_the_last_user_turn_that_fits_the_window():
    item = conversation(300, 300, 300, 300, 300, 300)
    assert [chars([m]) for m in _long_history(item, 500, 1000)] == [300, 300, 300]
    assert len(_long_history(item, 500, 1600)) == 5  # 1,500 chars; the answer after it is left out
    assert _long_history(item, 1600, 5000) is None  # the longest user-ending history is 1,500 chars
    assert _long_history(conversation(2000), 500, 1000) is None  # its first turn is already too long


def test_history_stops_at_a_turn_that_breaks_the_alternation():
    assert len(_long_history(conversation(300, 300, 300, 300, 300, roles="hghhg"), 100, 5000)) == 3
    assert len(_long_history(conversation(300, 300, 0, 300, 300), 100, 5000)) == 1  # an empty turn
    assert _long_history(conversation(300, 300, 300, roles="sgh"), 100, 5000) is None


def test_rows_are_alternating_histories_ending_with_the_prompt_within_the_window():
    rows = sharegpt_long_rows(limit=40)
    assert len(rows) == 40
    assert len({r["id"] for r in rows}) == 40
    for row in rows:
        assert row["id"].startswith("sharegpt-long/")
        history = json.loads(row["messages"])
        assert [m["role"] for m in history] == ["user", "assistant"] * (len(history) // 2) + ["user"]
        assert all(m["content"] and m["content"] == m["content"].strip() for m in history)
        assert history[-1]["content"] == row["prompt"]
        assert WINDOW["min_chars"] <= chars(history) <= WINDOW["max_chars"]
    assert statistics.median(len(json.loads(r["messages"])) for r in rows) >= 3  # histories, not single turns


def test_limit_takes_the_first_rows_and_a_narrower_window_is_honoured():
    first = sharegpt_long_rows(limit=40)
    assert sharegpt_long_rows(limit=5) == first[:5]
    narrow = sharegpt_long_rows(limit=10, min_chars=1000, max_chars=2000)
    assert len(narrow) == 10
    assert all(1000 <= chars(json.loads(r["messages"])) <= 2000 for r in narrow)


def test_the_window_means_about_one_to_two_thousand_prompt_tokens(tokenizer):
    rows, _ = load_rows("sharegpt-long", 64)
    tokens = [len(prompt_token_ids(r, tokenizer, "chat")) for r in rows]
    assert 1000 <= statistics.median(tokens) <= 2000
    assert sum(1000 <= n <= 2000 for n in tokens) >= len(tokens) * 2 // 3
    assert 800 <= min(tokens) and max(tokens) <= 3000  # the tails: code and other languages tokenize denser


def test_bench_loads_the_set_by_name():
    assert "sharegpt-long" in BUILTIN
    rows, name = load_rows("sharegpt-long", 8)
    assert (name, len(rows)) == ("sharegpt-long", 8)
    assert [r.index for r in rows] == list(range(8))
    assert all(r.id.startswith("sharegpt-long/") and r.messages[-1]["content"] == r.prompt for r in rows)


def test_sharegpt_mt_rows_are_still_the_first_three_turns():
    rows = sharegpt_multiturn_rows(limit=20)
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    for row in rows:
        history = json.loads(row["messages"])
        assert [m["role"] for m in history] == ["user", "assistant", "user"]
        assert row["id"].startswith("sharegpt-mt/") and chars(history) <= 1500
