"""Long requests first, the driver's side: each prompt's expected output length is the mean of
its completions in the cache file's per-prompt history (found by the drafter's prompt digest),
a prompt without history gets the history's mean, neither above the request's max tokens; no
file, an empty history or an unusable file gives no history (arrival order), and the driver
leaves an unusable file where it is (the drafter reports it and sets it aside)."""

from __future__ import annotations

import numpy as np
import pytest

from oracles.prompt_digest import prompt_digest
from oracles.prompt_history import with_history
from specdec.drafting import cache_file
from specdec.length_history import LengthHistory
from specdec.types import GenerationRequest

TOKENIZER = "tok-a"
PROMPTS = {"short": (5, 6, 7), "long": (9, 8), "never run": (1, 2, 3, 4)}


def write_history(path, completions: list[tuple[tuple[int, ...], int]], tokenizer: str = TOKENIZER) -> None:
    contents = cache_file.CacheContents(8, [], np.zeros(0, np.int32), np.zeros(0, np.int64))
    history = [(prompt_digest(prompt), np.arange(n) % 50) for prompt, n in completions]
    cache_file.write_contents(path, with_history(contents, history), tokenizer)


def request(name: str, max_tokens: int = 1000) -> GenerationRequest:
    return GenerationRequest(name, PROMPTS[name], max_tokens)


def test_expected_lengths_are_each_prompts_mean_the_historys_mean_for_a_new_one_and_at_most_max_tokens(tmp_path):
    path = tmp_path / "cache.npz"
    write_history(path, [(PROMPTS["short"], 10), (PROMPTS["long"], 200), (PROMPTS["short"], 20), (PROMPTS["long"], 300)])
    history = LengthHistory.read(path, TOKENIZER)
    assert history is not None
    got = history.expected_tokens([request("short"), request("long"), request("never run"), request("long", 100)])
    assert got == [15.0, 250.0, pytest.approx(132.5), 100.0]


def test_no_file_an_empty_history_or_an_unusable_file_gives_arrival_order_and_the_file_stays(tmp_path):
    path = tmp_path / "cache.npz"
    assert LengthHistory.read(None, TOKENIZER) is None
    assert LengthHistory.read(path, TOKENIZER) is None
    write_history(path, [])
    assert LengthHistory.read(path, TOKENIZER) is None
    write_history(path, [(PROMPTS["short"], 10)], tokenizer="tok-b")
    assert LengthHistory.read(path, TOKENIZER) is None  # another tokenizer's token ids
    path.write_bytes(b"not a cache file")
    assert LengthHistory.read(path, TOKENIZER) is None
    assert path.read_bytes() == b"not a cache file"
