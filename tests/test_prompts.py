"""Prompt rows -> engine requests: chat template, per-row max_tokens, too-long prompts."""

import pyarrow as pa
import pytest
from transformers import AutoTokenizer

from specdec.prompts import InputError, to_requests, validate_rows


@pytest.fixture(scope="module")
def tokenizer(default_model_dir):
    return AutoTokenizer.from_pretrained(default_model_dir)


def rows_of(records):
    valid, rejected = validate_rows(pa.Table.from_pylist(records), "t.parquet")
    assert not rejected
    return valid


def test_messages_use_the_chat_template_and_rows_keep_their_max_tokens(tokenizer):
    rows = rows_of([
        {"id": "p", "prompt": "hello", "messages": None, "max_tokens": 5},
        {"id": "m", "prompt": None, "messages": '[{"role": "user", "content": "hello"}]', "max_tokens": None},
    ])
    plain, chat = to_requests(rows, tokenizer, 32, 2048, "t.parquet")
    assert plain.prompt_token_ids == tuple(tokenizer.encode("hello")) and plain.max_tokens == 5
    rendered = tokenizer.decode(list(chat.prompt_token_ids))
    assert "user" in rendered and "hello" in rendered and rendered.rstrip().endswith("assistant")
    assert chat.max_tokens == 32


def test_prompt_longer_than_the_model_is_an_error_naming_the_row(tokenizer):
    rows = rows_of([{"id": "ok", "prompt": "short"}, {"id": "long", "prompt": "word " * 3000}])
    with pytest.raises(InputError, match=r"t.parquet: row 1 \(id='long'\).*exceeds the model length 2048"):
        to_requests(rows, tokenizer, 16, 2048, "t.parquet")


def test_absurd_max_tokens_is_rejected_per_row():
    valid, rejected = validate_rows(
        pa.Table.from_pylist([{"id": "a", "prompt": "x", "max_tokens": 0}, {"id": "b", "prompt": "y", "max_tokens": 10}]),
        "t.parquet",
    )
    assert [r.id for r in valid] == ["b"]
    assert rejected[0].index == 0 and "max_tokens=0" in rejected[0].reason
