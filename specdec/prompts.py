"""Read and validate a Parquet file of prompts, and turn rows into engine requests: one
policy for every entry point (`validate_rows`, then `tokenize_rows`). Columns: `id`, `prompt`;
optional `messages` (JSON chat turns, used instead of `prompt` when not null), `max_tokens`
and `samples` (null: the run's setting). Every problem names the file and the row."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from specdec.params import SAMPLES_LIMIT
from specdec.sampling_seeds import sample_seed
from specdec.types import GenerationRequest

MAX_TOKENS_LIMIT = 1 << 20


class InputError(ValueError):
    """A prompt file or row is invalid; the message names the file and the row."""


@dataclasses.dataclass(frozen=True)
class PromptRow:
    index: int
    id: str
    prompt: str | None
    messages: list[dict[str, str]] | None
    max_tokens: int | None
    samples: int | None = None  # the row's own samples; None: the run's setting


@dataclasses.dataclass(frozen=True)
class RejectedRow:
    index: int
    id: str | None
    reason: str
    stage: str = "validate"  # validate (row checks) | tokenize (needs the model's tokenizer)


def read_prompt_table(path: str | Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from exc


def validate_rows(table: pa.Table, source: str) -> tuple[list[PromptRow], list[RejectedRow]]:
    """Split a prompt table into valid rows and rejected rows (with reasons); a missing
    column or a wrong column type raises InputError for the whole file."""
    names = set(table.column_names)
    for required in ("id", "prompt"):
        if required not in names:
            raise InputError(f"{source}: missing column {required!r} (has: {sorted(names)})")
    for name, predicate in (("id", pa.types.is_string), ("prompt", pa.types.is_string),
                            ("messages", pa.types.is_string), ("max_tokens", pa.types.is_integer)):
        col_type = table.schema.field(name).type if name in names else pa.null()  # absent: nothing to check
        if not (predicate(col_type) or pa.types.is_null(col_type) or pa.types.is_large_string(col_type)):
            raise InputError(f"{source}: column {name!r} has type {col_type}, expected the usual type")
    columns = {name: _cells(table, name) for name in names & {"id", "prompt", "messages", "max_tokens"}}
    if "samples" in names:
        columns["samples"] = _sample_cells(table.column("samples"))
    valid: list[PromptRow] = []
    rejected: list[RejectedRow] = []
    seen: set[str] = set()
    for i in range(table.num_rows):
        row_id = columns["id"][i]
        row_id = row_id if isinstance(row_id, str) else None  # undecodable ids are reported as null
        try:
            row = _validate_row(i, columns, seen)
        except InputError as exc:
            rejected.append(RejectedRow(i, row_id, str(exc)))
            continue
        seen.add(row.id)
        valid.append(row)
    return valid, rejected


@dataclasses.dataclass(frozen=True)
class InvalidText:  # a cell that rejects its row: invalid UTF-8, a non-integer sample count
    reason: str


def _cells(table: pa.Table, name: str) -> list[Any]:
    """A column's values; string cells are decoded one by one so that one cell of invalid
    UTF-8 rejects its row instead of the whole column (pyarrow decodes columns at once)."""
    column = table.column(name)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column.to_pylist()
    raw = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    return [None if b is None else _decode(b) for b in raw.to_pylist()]


def _decode(data: bytes) -> str | InvalidText:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InvalidText(f"invalid UTF-8 at byte {exc.start}: {data[exc.start:exc.start + 4]!r}")


def _validate_row(i: int, columns: dict[str, list[Any]], seen: set[str]) -> PromptRow:
    for name in ("id", "prompt", "messages"):
        cell = columns[name][i] if name in columns else None
        if isinstance(cell, InvalidText):
            raise InputError(f"{name}: {cell.reason}")
    row_id = columns["id"][i]
    if row_id is None or row_id == "":
        raise InputError("null or empty id")
    if row_id in seen:
        raise InputError(f"duplicate id {row_id!r}")
    prompt = columns["prompt"][i]
    messages = _parse_messages(columns["messages"][i]) if "messages" in columns else None
    if messages is None and (prompt is None or not prompt.strip()):
        raise InputError("null or empty prompt")  # blank (whitespace only) counts as empty
    max_tokens = columns["max_tokens"][i] if "max_tokens" in columns else None
    if max_tokens is not None and not 1 <= max_tokens <= MAX_TOKENS_LIMIT:  # the model length is checked later
        raise InputError(f"max_tokens={max_tokens} outside [1, {MAX_TOKENS_LIMIT}]")
    samples = columns["samples"][i] if "samples" in columns else None
    if isinstance(samples, InvalidText):
        raise InputError(f"samples: {samples.reason}")
    if samples is not None and not 1 <= samples <= SAMPLES_LIMIT:
        raise InputError(f"samples={samples} outside [1, {SAMPLES_LIMIT}]")
    return PromptRow(i, row_id, prompt, messages, max_tokens, samples)


def _sample_cells(column: pa.ChunkedArray) -> list[Any]:
    """The `samples` column's values: ints, None, or InvalidText. Any column type is read, so
    that one odd cell rejects its row, never the file; whole floats count (pandas writes an
    integer column with nulls as floats)."""
    kind = column.type
    values = column.to_pylist()
    if pa.types.is_integer(kind) or pa.types.is_null(kind):
        return values
    whole = pa.types.is_floating(kind)
    return [None if v is None else int(v) if whole and math.isfinite(v) and v == int(v)
            else InvalidText(f"{v!r} is not an integer") for v in values]


def reject_greedy_samples(rows: Sequence[PromptRow], temperature: float, source: str
                          ) -> tuple[list[PromptRow], list[RejectedRow]]:
    """Rejects the rows asking for more than one sample under greedy decoding (every sample
    would be the same); the others pass."""
    many = [temperature == 0 and (row.samples or 1) > 1 for row in rows]
    rejected = [RejectedRow(row.index, row.id, f"{source}: row {row.index} (id={row.id!r}): samples={row.samples} "
                            "with temperature=0: greedy decoding gives every sample the same completion")
                for row, rejects in zip(rows, many) if rejects]
    return [row for row, rejects in zip(rows, many) if not rejects], rejected


def _parse_messages(raw: str | None) -> list[dict[str, str]] | None:
    if raw is None:
        return None
    try:
        messages = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"messages is not valid JSON: {exc}") from exc
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages):
        raise InputError('messages must be a non-empty JSON list of {"role": str, "content": str}')
    return messages


def to_requests(rows: Sequence[PromptRow], tokenizer: Any, default_max_tokens: int, max_model_len: int, source: str,
                prompt_format: str, samples: int = 1, seed: int | None = None) -> list[GenerationRequest]:
    """Tokenize rows; a too-long prompt raises InputError. A row becomes one request per sample,
    adjacent so that they run in the same batch; with a run `seed`, each gets its own seed."""
    requests = []
    for row in rows:
        max_tokens = row.max_tokens or default_max_tokens
        token_ids = prompt_token_ids(row, tokenizer, prompt_format)
        if len(token_ids) + max_tokens > max_model_len:
            raise InputError(f"{source}: row {row.index} (id={row.id!r}): prompt has {len(token_ids)} tokens; "
                             f"with max_tokens={max_tokens} it exceeds the model length {max_model_len}")
        tokens = tuple(int(t) for t in token_ids)
        requests.extend(
            GenerationRequest(row.id, tokens, max_tokens, sample=i,
                              seed=None if seed is None else sample_seed(seed, row.id, i))
            for i in range(row.samples or samples))
    return requests


def prompt_token_ids(row: PromptRow, tokenizer: Any, prompt_format: str) -> list[int]:
    """The tokenize policy: `messages` always go through the chat template; a plain `prompt`
    is asked as one user turn when prompt_format is "chat" and the model has a template,
    and completed as raw text otherwise."""
    messages = row.messages
    if messages is None and prompt_format == "chat" and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": row.prompt}]
    if messages is None:
        return list(tokenizer.encode(row.prompt))
    # Render to text, then encode: the template already holds the special tokens.
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))


def tokenize_rows(rows: Sequence[PromptRow], tokenizer: Any, default_max_tokens: int, max_model_len: int,
                  source: str, prompt_format: str, samples: int = 1, seed: int | None = None
                  ) -> tuple[list[GenerationRequest], list[RejectedRow]]:
    """Requests for the rows that tokenize and fit (see `to_requests`); any other row is
    rejected with its reason, never the batch."""
    requests: list[GenerationRequest] = []
    rejected: list[RejectedRow] = []
    for row in rows:
        try:
            requests.extend(to_requests([row], tokenizer, default_max_tokens, max_model_len, source, prompt_format,
                                        samples, seed))
        except InputError as exc:
            rejected.append(RejectedRow(row.index, row.id, str(exc), "tokenize"))
        except Exception as exc:
            reason = f"{source}: row {row.index} (id={row.id!r}): cannot tokenize: {type(exc).__name__}: {exc}"
            rejected.append(RejectedRow(row.index, row.id, reason, "tokenize"))
    return requests, rejected
