"""Engine requests from prompt rows ({"id", "prompt"}) through the product's own path: the rows
as a prompt file's table, `specdec.prompts.validate_rows`, then `tokenize_rows` with raw
prompts, as `specdec generate --prompt-format raw` sends them to the engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow as pa

from specdec.prompts import tokenize_rows, validate_rows
from specdec.types import GenerationRequest

SOURCE = "test prompts"


def prompt_requests(rows: Sequence[dict[str, str]], tokenizer, max_tokens: int, max_model_len: int,
                    prompt_chars: int | None = None, prompt_tokens: int | None = None) -> list[GenerationRequest]:
    """One request per row, each prompt cut to its first `prompt_chars` characters before
    tokenizing or to its first `prompt_tokens` tokens after (prefill is the slow part on CPU).
    Every row must pass: a rejected one fails the test, naming its reason."""
    records = [{"id": row["id"], "prompt": row["prompt"][:prompt_chars]} for row in rows]
    valid, invalid = validate_rows(pa.Table.from_pylist(records), SOURCE)
    assert not invalid, invalid
    requests, rejected = tokenize_rows(valid, tokenizer, max_tokens, max_model_len, SOURCE, "raw")
    assert not rejected, rejected
    if prompt_tokens is not None:
        requests = [dataclasses.replace(r, prompt_token_ids=r.prompt_token_ids[:prompt_tokens]) for r in requests]
    return requests
