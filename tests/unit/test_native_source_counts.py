"""Draft-source counts by request: each request's verified draft tokens, and accepted ones, per
source, taken by request id while it runs or after it finished, the compiled controller and
its oracle alike."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specdec.engines import vllm_proposer
from oracles.confidence import SOURCES
from oracles.controller import DraftController as OracleController
from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.native import load_core
from specdec.stats import DRAFT_SOURCES

CACHED = list(range(100, 120))  # a finished request's text, in the cache file
OWN = [1, 2, 3, 4, 1, 2, 3]  # "3" was followed by "4 1 2 3": its own text drafts that
NO_COUNTS = dict.fromkeys(DRAFT_SOURCES, (0, 0))


@pytest.fixture
def cache_path(tmp_path) -> str:
    path = str(tmp_path / "cache.npz")
    first = DraftController(SpecConfig(method="specdec", k_max=4))
    first.step_tokens(["seed"], [np.array(CACHED)], [0])
    first.finish("seed")
    first.save_cache(path)
    return path


def _two_steps(ctl: DraftController | OracleController) -> None:
    """"own" drafts from its own text, "cached" from the cache; then "own" has 2 of its 4
    tokens accepted, "cached" 3 of its 4."""
    own, cached = np.array(OWN), np.array(CACHED[:5])
    drafts = ctl.step_tokens(["own", "cached"], [own, cached], [0, 0])
    assert [d.tolist() for d in drafts] == [[4, 1, 2, 3], CACHED[5:9]]
    ctl.step_tokens(["own", "cached"], [np.append(own, [4, 1, 7]), np.array(CACHED[:9])], [2, 3])


@pytest.mark.parametrize("make", [DraftController, OracleController])
def test_each_request_has_its_own_counts_taken_once_live_or_finished(make, cache_path):
    ctl = make(SpecConfig(method="specdec", k_max=4, cache_file=cache_path))
    _two_steps(ctl)
    assert ctl.take_source_counts(["own", "nobody"]) == {"own": {**NO_COUNTS, "own": (4, 2)}}
    assert ctl.take_source_counts(["own"]) == {}  # taken: nothing the second time
    ctl.finish("own")  # taken while live: it leaves no entry behind
    ctl.finish("cached")  # not taken: kept until it is
    assert ctl.state_sizes()["finished_counts"] == (1, None)
    assert ctl.take_source_counts(["cached", "own"]) == {"cached": {**NO_COUNTS, "cache": (4, 3)}}
    assert ctl.take_source_counts(["cached"]) == {}
    assert ctl.state_sizes()["finished_counts"] == (0, None)


def test_a_request_finished_and_back_under_its_id_has_both_runs_counts(cache_path):
    """A preempted request resumes under its own id: its counts from before add up with its
    new ones, in the core as in the oracle."""
    counts = []
    for make in (DraftController, OracleController):
        ctl = make(SpecConfig(method="specdec", k_max=4, cache_file=cache_path))
        _two_steps(ctl)
        ctl.finish("own")
        # back: the cache now holds its first run, "4 1 7" after "3", drafted from there
        [draft] = ctl.step_tokens(["own"], [np.array(OWN)], [0])
        assert draft.tolist() == [4, 1, 7]
        ctl.step_tokens(["own"], [np.append(OWN, [4, 1, 7, 9])], [3])
        counts.append(ctl.take_source_counts(["own"]))
    assert counts[0] == counts[1] == {"own": {**NO_COUNTS, "own": (4, 2), "cache": (3, 3)}}


def test_the_worker_rpc_takes_counts_by_request_as_the_proposer_counted_them():
    """vLLM's proposer call with its own buffers: a row's counts are final in the step that
    verified its last draft, so the driver takes them by id before the core retires it."""
    engine = SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=4),
                             scheduler_config=SimpleNamespace(max_num_seqs=4))
    worker = SimpleNamespace(model_runner=SimpleNamespace(drafter=None))
    assert vllm_proposer.take_source_counts(worker, ["r"]) is None  # no specdec drafter here
    proposer = worker.model_runner.drafter = vllm_proposer.SpecdecVllmProposer(engine)
    assert vllm_proposer.take_source_counts(worker, ["r"]) == {}  # not bound yet
    batch = SimpleNamespace(req_ids=["r"], num_prompt_tokens=np.array([2, 0, 0, 0]))
    proposer.bind(batch, SpecConfig(method="specdec", k_max=4, budget=False))
    tokens = np.zeros((4, 16), dtype=np.int64)
    tokens[0, :12] = OWN + [4, 1, 7, 9, 9]
    assert proposer.propose([[3]], np.array([7]), tokens) == [[4, 1, 2, 3]]
    proposer.propose([[4, 1, 7]], np.array([10]), tokens)  # 2 of 4 accepted, then 7
    assert vllm_proposer.take_source_counts(worker, ["r"]) == {"r": {**NO_COUNTS, "own": (4, 2)}}
    assert vllm_proposer.take_source_counts(worker, ["r"]) == {}
    batch.req_ids = []
    proposer.propose([], np.zeros(4, dtype=np.int64), tokens)  # it left the batch: retired
    assert proposer.controller.state_sizes()["finished_counts"] == (0, None)


def test_the_sources_are_named_once_by_the_core():
    assert DRAFT_SOURCES == tuple(load_core().DRAFT_SOURCES) == SOURCES
