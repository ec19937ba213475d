"""The controller (the compiled core) against its oracle on real text
(HumanEval and ShareGPT turned into word-token streams): the same decisions, one request at
a time and batched under a step-cost budget."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from oracles.controller import DraftController as OracleController
from prompt_sets.humaneval import humaneval_rows
from prompt_sets.sharegpt import sharegpt_multiturn_rows
from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.step_cost import StepCost
from support.greedy_replay import replay_greedy
from support.native_core import fix_lookup_time


# -- real token streams ------------------------------------------------------------------


def _word_tokens(texts: list[str]) -> list[np.ndarray]:
    """Real text as token streams: words, punctuation and runs of spaces, numbered."""
    vocab: dict[str, int] = {}
    return [
        np.array([vocab.setdefault(w, len(vocab)) for w in re.findall(r"\w+|[^\w\s]|\s+", text)], dtype=np.int64)
        for text in texts
    ]


def _real_requests(texts: list[str], k_max: int) -> list[tuple[str, list[int], list[int]]]:
    """Each text as a request (id, prompt, greedy output): its first third the prompt."""
    requests = []
    for i, seq in enumerate(_word_tokens(texts)):
        cut = seq.size // 3
        if seq.size - cut > k_max + 4:
            requests.append((f"r{i}", seq[:cut].tolist(), seq[cut:].tolist()))
    return requests


@pytest.fixture(scope="module")
def real_texts() -> dict[str, list[str]]:
    return {
        "humaneval": [r["prompt"] for r in humaneval_rows(40)],
        "sharegpt-mt": [r["prompt"] for r in sharegpt_multiturn_rows(25)],
    }


@pytest.mark.parametrize("dataset", ["humaneval", "sharegpt-mt"])
@pytest.mark.parametrize("k_max,budget", [(3, 4_000_000), (7, 2_000)])
def test_replay_on_real_streams_is_identical(real_texts, dataset, k_max, budget):
    """The oracle and the controller take the same decisions on real text, one request after
    another (with a small cache budget too: eviction on the way)."""
    cfg = SpecConfig(method="specdec", k_max=k_max, cache_max_tokens=budget)
    oracle, controller = OracleController(cfg), DraftController(cfg)
    accepted = 0
    for req_id, prompt, greedy in _real_requests(real_texts[dataset], k_max):
        want = replay_greedy(oracle, req_id, prompt, greedy)
        assert replay_greedy(controller, req_id, prompt, greedy) == want, req_id
        accepted += sum(a for _, a in want)
    assert accepted > 0  # it did draft


def test_batched_steps_with_a_budget_are_identical(real_texts):
    """Several requests per step with a step-cost model (the budget trims drafts, so feedback
    covers part of each draft)."""
    streams = _word_tokens(real_texts["humaneval"][:12])
    cost = StepCost(fixed_s=0.02, per_seq_s=0.001, per_token_s=0.002)
    config = SpecConfig(method="specdec", k_max=5)
    controllers = {"oracle": OracleController(config), "core": DraftController(config)}
    # every lookup equally long: measured times differ
    controllers["oracle"].clock = itertools.cycle([0.0, 3e-6]).__next__
    fix_lookup_time(controllers["core"], 3e-6)
    rng = np.random.default_rng(2)
    length = {i: max(2, s.size // 3) for i, s in enumerate(streams)}
    accepted = {i: 0 for i in length}
    while length:
        rows = [(f"q{i}", streams[i][: length[i]], accepted[i]) for i in length]
        got = {name: c.step_tokens([r for r, _, _ in rows], [t for _, t, _ in rows], [a for _, _, a in rows], cost)
               for name, c in controllers.items()}
        for want, mine in zip(got["oracle"], got["core"], strict=True):
            assert mine.tolist() == want.tolist()
        for (req_id, _, _), draft in zip(rows, got["oracle"]):
            i = int(req_id[1:])
            accepted[i] = int(rng.integers(0, draft.size + 1))
            length[i] += accepted[i] + 1
            if length[i] >= streams[i].size:
                del length[i]
                for c in controllers.values():
                    c.finish(req_id)
