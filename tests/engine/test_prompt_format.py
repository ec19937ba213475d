"""The default prompt format through the real engine: questions an instruct model mostly stops
at once when asked as raw text get real answers."""

import pyarrow as pa
import pytest

from bench.engine_hooks import run_batches
from specdec.params import GenerationParams
from specdec.prompts import tokenize_rows, validate_rows

pytestmark = pytest.mark.slow

# GSM8K test questions (MIT): an instruct model asked these as raw text mostly stops at once.
GSM8K = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh "
    "duck egg. How much in dollars does she make every day at the farmers' market?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
    "Josh decides to try flipping a house. He buys a house for $80,000 and then puts in $50,000 in repairs. "
    "This increased the value of the house by 150%. How much profit did he make?",
    "James decides to run 3 sprints 3 times a week. He runs 60 meters each sprint. How many total meters "
    "does he run a week?",
]


def test_gsm8k_questions_get_real_answers_with_the_default_prompt_format(tokenizer, engine_factory):
    from specdec.types import SamplingOptions

    engine = engine_factory("none")
    records = [{"id": f"gsm8k-{i}", "prompt": q} for i, q in enumerate(GSM8K)]
    rows, invalid = validate_rows(pa.Table.from_pylist(records), "gsm8k")
    assert not invalid
    requests, rejected = tokenize_rows(rows, tokenizer, 32, engine.engine_config.max_model_len, "gsm8k",
                                       GenerationParams().prompt_format)
    assert not rejected
    results = run_batches(engine, requests, SamplingOptions())
    assert [len(r.output_token_ids) >= 8 for r in results] == [True] * 4, [r.completion for r in results]
