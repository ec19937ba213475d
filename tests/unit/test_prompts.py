"""Prompt rows -> engine requests: chat template, per-row max_tokens, too-long prompts. That
the default prompt format gets real answers from the model: tests/engine/test_prompt_format.py."""

import pyarrow as pa
import pytest

from specdec.params import GenerationParams
from specdec.prompts import InputError, to_requests, tokenize_rows, validate_rows


def rows_of(records):
    valid, rejected = validate_rows(pa.Table.from_pylist(records), "t.parquet")
    assert not rejected
    return valid


def test_messages_use_the_chat_template_and_rows_keep_their_max_tokens(tokenizer):
    rows = rows_of([
        {"id": "p", "prompt": "hello", "messages": None, "max_tokens": 5},
        {"id": "m", "prompt": None, "messages": '[{"role": "user", "content": "hello"}]', "max_tokens": None},
    ])
    plain, chat = to_requests(rows, tokenizer, 32, 2048, "t.parquet", "raw")
    assert plain.prompt_token_ids == tuple(tokenizer.encode("hello")) and plain.max_tokens == 5
    rendered = tokenizer.decode(list(chat.prompt_token_ids))
    assert "user" in rendered and "hello" in rendered and rendered.rstrip().endswith("assistant")
    assert chat.max_tokens == 32


def test_prompt_longer_than_the_model_is_an_error_naming_the_row(tokenizer):
    rows = rows_of([{"id": "ok", "prompt": "short"}, {"id": "long", "prompt": "word " * 3000}])
    with pytest.raises(InputError, match=r"t.parquet: row 1 \(id='long'\).*exceeds the model length 2048"):
        to_requests(rows, tokenizer, 16, 2048, "t.parquet", "raw")


def test_absurd_max_tokens_is_rejected_per_row():
    valid, rejected = validate_rows(
        pa.Table.from_pylist([{"id": "a", "prompt": "x", "max_tokens": 0}, {"id": "b", "prompt": "y", "max_tokens": 10}]),
        "t.parquet",
    )
    assert [r.id for r in valid] == ["b"]
    assert rejected[0].index == 0 and "max_tokens=0" in rejected[0].reason


def test_plain_prompt_is_one_user_turn_by_default_and_raw_keeps_the_text(tokenizer):
    rows = rows_of([{"id": "q", "prompt": "What is 2 + 3?"}])
    chat = tokenize_rows(rows, tokenizer, 8, 2048, "t.parquet", GenerationParams().prompt_format)[0][0]
    raw = tokenize_rows(rows, tokenizer, 8, 2048, "t.parquet", "raw")[0][0]
    assert raw.prompt_token_ids == tuple(tokenizer.encode("What is 2 + 3?"))  # today's tokens
    expected = tokenizer.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}],
                                             add_generation_prompt=True, tokenize=False)
    assert chat.prompt_token_ids == tuple(tokenizer.encode(expected, add_special_tokens=False))
