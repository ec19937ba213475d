"""The compiled drafter and controller against the Python reference on real text
(HumanEval and ShareGPT turned into word-token streams): the same decisions, one request at
a time and batched under a step-cost budget."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from bench.replay import ReplayRequest, replay
from specdec.config import SpecConfig
from specdec.controller import DraftController, make_controller
from specdec.datasets import humaneval_rows, sharegpt_multiturn_rows


# -- real token streams ------------------------------------------------------------------


def _word_tokens(texts: list[str]) -> list[np.ndarray]:
    """Real text as token streams: words, punctuation and runs of spaces, numbered."""
    vocab: dict[str, int] = {}
    return [
        np.array([vocab.setdefault(w, len(vocab)) for w in re.findall(r"\w+|[^\w\s]|\s+", text)], dtype=np.int64)
        for text in texts
    ]


def _real_requests(texts: list[str], k_max: int) -> list[ReplayRequest]:
    """Each text as a request: its first third the prompt, the rest the greedy output."""
    requests = []
    for i, seq in enumerate(_word_tokens(texts)):
        cut = seq.size // 3
        if seq.size - cut > k_max + 4:
            requests.append(ReplayRequest(f"r{i}", seq[:cut].tolist(), seq[cut:].tolist(), seq.size - cut - k_max - 2))
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
    """The reference (controller and drafter) and the compiled ones take the same decisions
    on real text (with a small cache budget too: eviction on the way)."""
    requests = _real_requests(real_texts[dataset], k_max)
    results = {}
    for drafter in ("python", "native"):
        cfg = SpecConfig(method="specdec", k_max=k_max, drafter=drafter, cache_max_tokens=budget)
        results[drafter] = replay(requests, make_controller(cfg))
    for want, got in zip(results["python"], results["native"], strict=True):
        assert (got.per_step_drafted, got.per_step_accepted) == (want.per_step_drafted, want.per_step_accepted), want.id
    assert sum(sum(r.per_step_accepted) for r in results["native"]) > 0  # it did draft


def test_batched_steps_with_a_budget_are_identical(real_texts):
    """Several requests per step through DraftController.step_batch with a step-cost model
    (the budget trims drafts, so feedback covers part of each draft)."""
    from specdec.step_cost import StepCost

    streams = _word_tokens(real_texts["humaneval"][:12])
    cost = StepCost(fixed_s=0.02, per_seq_s=0.001, per_token_s=0.002)
    controllers = {d: DraftController(SpecConfig(method="specdec", k_max=5, drafter=d)) for d in ("python", "native")}
    for c in controllers.values():  # every lookup equally long: measured times differ
        c.clock = itertools.cycle([0.0, 3e-6]).__next__
    rng = np.random.default_rng(2)
    length = {i: max(2, s.size // 3) for i, s in enumerate(streams)}
    accepted = {i: 0 for i in length}
    while length:
        rows = [(f"q{i}", streams[i][: length[i]], accepted[i]) for i in length]
        got = {d: c.step_batch(rows, cost) for d, c in controllers.items()}
        for want, mine in zip(got["python"], got["native"], strict=True):
            assert mine.tolist() == want.tolist()
        for (req_id, _, _), draft in zip(rows, got["python"]):
            i = int(req_id[1:])
            accepted[i] = int(rng.integers(0, draft.size + 1))
            length[i] += accepted[i] + 1
            if length[i] >= streams[i].size:
                del length[i]
                for c in controllers.values():
                    c.finish(req_id)
