"""The ShareGPT loader: streaming parse of a truncated JSON array, complete items only."""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from prompt_sets.json_array import iter_json_array
from prompt_sets.sharegpt import sharegpt_rows

items = st.lists(
    st.fixed_dictionaries({"id": st.text(max_size=5), "v": st.lists(st.text(max_size=8), max_size=3)}),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(items=items, cut=st.integers(min_value=0), chunk=st.integers(min_value=1, max_value=16))
def test_truncated_array_yields_exactly_the_complete_items(items, cut, chunk):
    text = json.dumps(items, indent=1, ensure_ascii=False)
    data = text.encode()[: cut % (len(text.encode()) + 1)]  # cut anywhere, even inside a character
    parsed = list(iter_json_array(io.BytesIO(data), chunk_size=chunk))
    assert parsed == items[: _complete_count(items, len(data))]


def _complete_count(items, cut_bytes) -> int:
    """How many elements end before the cut (their serialisation lies wholly in the data)."""
    count = 0
    for k in range(1, len(items) + 1):
        prefix = json.dumps(items[:k], indent=1, ensure_ascii=False)[:-2]  # drop "\n]"
        if len(prefix.encode()) <= cut_bytes:
            count = k
    return count


def test_bundled_sharegpt_gives_short_complete_first_turns():
    rows = sharegpt_rows(limit=20, max_prompt_chars=500)
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    for row in rows:
        assert 0 < len(row["prompt"]) <= 500
        assert json.loads(row["messages"]) == [{"role": "user", "content": row["prompt"]}]
