"""The controller (specdec.controller, the compiled core) against its oracle
(tests/oracles/controller.py over the Python drafter): the same drafts step for step, the same
lookup-time estimate, the same cache, prompt groups, live index, history and per-source
counts, with and without the batch budget, as requests
(some sharing a prompt, some of unknown prompt) join, finish mid-batch and are preempted
then resumed; and the same through vLLM's proposer call (`engine_step`, with vLLM's
per-row prompt lengths), clean-step shapes included."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.controller import DraftController as OracleController
from specdec.config import SpecConfig
from specdec.controller import CORE, DraftController
from specdec.native import load_core
from specdec.step_cost import StepCost
from support.native_core import NativeSuffixCache, fix_lookup_time, lookup_seconds
from support.token_streams import prompt_streams

load_core()  # a missing build fails here, loudly: it is what `make setup` installs

LOOKUP_S = 3e-6  # every lookup call counts as this long in both controllers


SHARED_SIZES = ("shared_members", "live_index_tokens", "group_tokens", "history_tokens")


def _pair(k_max: int, budget_tokens: int, shared: tuple[int, int, int, int] | None = None,
          ) -> tuple[OracleController, DraftController]:
    """`shared`: (group_max_tokens, history_max_tokens, history_per_prompt, live slack tokens)."""
    group_max, history_max, per_prompt, slack = shared or (2_000_000, 1_000_000, 16, CORE.live_slack_tokens)
    settings = dataclasses.replace(CORE, group_max_tokens=group_max, history_max_tokens=history_max,
                                   history_per_prompt=per_prompt, live_slack_tokens=slack)
    # with its budget: its K ceiling past k_max in a wave's tail
    config = SpecConfig(method="specdec", k_max=k_max, cache_max_tokens=budget_tokens, budget=True)
    ref = OracleController(config, settings=settings)
    ref.clock = itertools.cycle([0.0, LOOKUP_S]).__next__  # start and end of each timed lookup
    nat = DraftController(config, settings=settings)
    fix_lookup_time(nat, LOOKUP_S)
    return ref, nat


def dump(ctl: OracleController | DraftController) -> list[tuple[tuple[int, ...], int]]:
    """The cross-request cache's substring counts."""
    return NativeSuffixCache(ctl.drafter.cache).dump() if isinstance(ctl, DraftController) else ctl.proposer.cache.dump()


def active_ids(ctl: OracleController | DraftController) -> list[str]:
    return ctl._core.active_ids() if isinstance(ctl, DraftController) else list(ctl._live)


def _same_shared_text(ref: OracleController, nat: DraftController, take: list[str]) -> None:
    """Also the source counts of the requests `take` (taken from both)."""
    ref_sizes, nat_sizes = ref.state_sizes(), nat.state_sizes()
    assert [nat_sizes[k] for k in SHARED_SIZES + ("finished_counts",)] == [
        ref_sizes[k] for k in SHARED_SIZES + ("finished_counts",)]
    assert nat.take_source_counts(take) == ref.take_source_counts(take)


shared_bounds = st.tuples(st.sampled_from([0, 80, 2_000_000]), st.sampled_from([0, 60, 1_000_000]),
                          st.sampled_from([0, 2, 16]), st.sampled_from([0, 50, 65536]))


def _costs(rng: np.random.Generator) -> list[StepCost | None]:
    """No budget, CPU-like costs (drafts cost a lot; a drafted token's attention over its
    row's context too), a GPU-like one (nearly free at small batches) and random ones."""
    return [None, StepCost(0.055, 0.002, 0.003, 1e-6), StepCost(0.02, 0.0, 2e-4, 1e-6, 2e-5),
            StepCost(5.886e-3, 0.0, 2.101e-5, 3.926e-8),
            StepCost(*rng.uniform(0.0, 0.01, size=4), per_draft_kv_token_s=float(rng.uniform(0.0, 1e-4)))]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k_max=st.integers(1, 8),
       budget_tokens=st.sampled_from([40, 400, 4_000_000]), alphabet=st.integers(2, 10), shared=shared_bounds,
       prompts_known=st.sampled_from([0.0, 0.8, 1.0]))
def test_steps_equal_the_oracle(seed, k_max, budget_tokens, alphabet, shared, prompts_known):
    """`prompts_known`: the share of steps that pass the rows' prompt lengths (a request first
    seen in another step has none: no group, no history)."""
    rng = np.random.default_rng(seed)
    ref, nat = _pair(k_max, budget_tokens, shared)
    requests = prompt_streams(rng, int(rng.integers(1, 12)), alphabet)
    streams, prompt_lens = [t for t, _ in requests], [p for _, p in requests]
    costs = _costs(rng)
    waiting = list(range(len(streams)))
    length: dict[int, int] = {}
    accepted: dict[int, int] = {}
    for step in range(300):
        while waiting and (not length or rng.random() < 0.3):
            i = waiting.pop(0)
            length[i] = max(length.get(i, 0), prompt_lens[i], int(rng.integers(1, streams[i].size + 1)))
            accepted[i] = 0
        if not length:
            break
        rows = [i for i in length if rng.random() < 0.9]  # the others skip a step
        ids = [f"q{i}" for i in rows]
        cost = costs[step // 25 % len(costs)]
        tokens = [streams[i][: length[i]] for i in rows]
        prompts = [prompt_lens[i] for i in rows] if rng.random() < prompts_known else None
        tail = rng.random() < 0.3  # a wave's tail: the budget may draft past k_max
        got = [c.step_tokens(ids, tokens, [accepted[i] for i in rows], cost, prompts, tail) for c in (ref, nat)]
        assert [d.tolist() for d in got[1]] == [d.tolist() for d in got[0]], step
        assert lookup_seconds(nat) == ref.lookup_s
        _same_shared_text(ref, nat, ids[::2])  # the other rows' counts pile up, some until finished
        for i, draft in zip(rows, got[0]):
            accepted[i] = int(rng.integers(0, draft.size + 1))
            length[i] = min(streams[i].size, length[i] + accepted[i] + 1)
        for i in list(length):
            if length[i] == streams[i].size or rng.random() < 0.03:  # finished, or preempted
                if length[i] < streams[i].size:
                    waiting.append(i)  # resumes later where it was
                nat.finish(f"q{i}")
                ref.finish(f"q{i}")
                del length[i]
    assert active_ids(nat) == active_ids(ref)
    assert dump(nat) == dump(ref)
    assert nat.state_sizes()["live_requests"] == ref.state_sizes()["live_requests"]
    _same_shared_text(ref, nat, [f"q{i}" for i in range(len(streams))])
    assert nat.take_source_counts([f"q{i}" for i in range(len(streams))]) == {}


class VllmBatch:
    """vLLM's side of the proposer call: its token buffer and counts, the batch's rows in
    order (a row leaves when its request finishes or is preempted, the rest move up), the
    tokens sampled per row (none while a row is prefilling)."""

    def __init__(self, requests: list[tuple[np.ndarray, int]], rng: np.random.Generator, max_rows: int) -> None:
        self.streams, self.prompt_lens, self.rng = [t for t, _ in requests], [p for _, p in requests], rng
        self.token_ids = np.zeros((max_rows, max(s.size for s, _ in requests)), dtype=np.int32)
        self.num_tokens = np.zeros(max_rows, dtype=np.int32)
        self.num_prompt_tokens = np.zeros(max_rows, dtype=np.int32)  # vLLM's input_batch.num_prompt_tokens
        self.req_ids: list[str] = []  # vLLM's input_batch.req_ids
        self.rows: list[dict] = []
        self.waiting = list(range(len(requests)))
        self.preempted: dict[int, int] = {}  # stream -> its length when preempted

    def admit(self) -> None:
        while self.waiting and len(self.rows) < self.token_ids.shape[0] and self.rng.random() < 0.5:
            i = self.waiting.pop(0)
            # a preempted request resumes under its own id with the tokens it had, prefilled again
            length = self.preempted.pop(i, None)
            start = length or max(self.prompt_lens[i], int(self.rng.integers(1, max(self.streams[i].size // 2, 1) + 1)))
            self.rows.append({"stream": i, "id": f"req{i}", "length": start,
                              "prefill": int(self.rng.integers(1 if length else 0, 3))})

    def sampled(self, drafts: list[list[int]] | None) -> list[list[int]]:
        """Advance every row by the last step's outcome; returns vLLM's sampled_token_ids."""
        out = []
        for row, draft in zip(self.rows, drafts or [[]] * len(self.rows)):
            if row["prefill"] > 0:
                row["prefill"] -= 1
                out.append([])
                continue
            accepted = int(self.rng.integers(0, len(draft) + 1))
            row["length"] = min(self.streams[row["stream"]].size, row["length"] + accepted + 1)
            out.append([0] * (accepted + 1))
        return out

    def load(self) -> None:
        self.req_ids[:] = [r["id"] for r in self.rows]
        for i, row in enumerate(self.rows):
            seq = self.streams[row["stream"]]
            self.token_ids[i, : seq.size] = seq
            self.num_tokens[i] = row["length"]
            self.num_prompt_tokens[i] = self.prompt_lens[row["stream"]]

    def leave(self) -> None:
        for row in list(self.rows):
            done = row["length"] == self.streams[row["stream"]].size
            if done or self.rng.random() < 0.03:
                if not done:
                    self.waiting.append(row["stream"])
                    self.preempted[row["stream"]] = row["length"]
                self.rows.remove(row)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k_max=st.integers(1, 8), alphabet=st.integers(2, 10),
       max_rows=st.integers(1, 8))
def test_engine_steps_equal_the_oracle(seed, k_max, alphabet, max_rows):
    rng = np.random.default_rng(seed)
    ref, nat = _pair(k_max, 4_000, (300, 200, 3, 40))
    costs = _costs(rng)
    batch = VllmBatch(prompt_streams(rng, int(rng.integers(1, 12)), alphabet), rng, max_rows)
    drafts = None
    for step in range(300):
        sampled = batch.sampled(drafts)
        batch.leave()
        batch.admit()
        if not batch.rows:
            break
        # rows that joined this step have sampled nothing yet
        sampled = (sampled + [[]] * len(batch.rows))[: len(batch.rows)]
        batch.load()
        cost, timed = costs[step // 30 % len(costs)], step % 3 != 0
        forced = k_max if step % 40 == 39 else None  # a calibration step now and then
        prompts = batch.num_prompt_tokens if step % 7 else None  # now and then a step without them
        tail = len(batch.rows) < max_rows  # free rows: the wave's tail
        got = [c.engine_step(batch.req_ids + [None], sampled, batch.num_tokens, batch.token_ids, cost, forced, timed,
                             prompts, tail) for c in (ref, nat)]
        assert got[1][0] == got[0][0], step
        shapes = [None if sample is None else (sample.num_seqs, sample.num_tokens, sample.num_kv_tokens)
                  for _, sample in got]
        assert shapes[1] == shapes[0], step
        _same_shared_text(ref, nat, batch.req_ids[1::2])
        drafts = got[0][0]
    assert active_ids(nat) == active_ids(ref)
    controller_sizes = ("live_requests", "step_drafts", "cache_tokens", "cache_sequences")
    assert [nat.state_sizes()[k] for k in controller_sizes] == [ref.state_sizes()[k] for k in controller_sizes]
    assert dump(nat) == dump(ref)
    for c in (nat, ref):
        c.finish_all()  # the last batch, as before a cache file is saved
        assert active_ids(c) == [] and c.state_sizes()["step_drafts"] == (0, None)
    assert dump(nat) == dump(ref)
    _same_shared_text(ref, nat, [f"req{i}" for i in range(len(batch.streams))])
    assert [(d, t.tolist()) for d, t in nat.contents().history()] == [
        (d, t.tolist()) for d, t in ref.proposer.contents().history()]
    assert nat.state_sizes()["finished_counts"] == (0, None)  # all taken


def test_engine_step_times_clean_steps_only():
    nat = DraftController(SpecConfig(method="specdec", k_max=3))
    token_ids = np.tile(np.arange(8, dtype=np.int32), (4, 8))
    num_tokens = np.array([20, 30, 0, 0], dtype=np.int32)
    ids = ["a", "b"]
    first, none = nat.engine_step(ids, [[1], [1]], num_tokens, token_ids, None, timed=True)
    assert none is None  # nothing ran before it
    _, sample = nat.engine_step(ids, [[1], [1]], num_tokens, token_ids, None, timed=True)
    assert (sample.num_seqs, sample.num_tokens, sample.num_kv_tokens) == (2, 2 + sum(map(len, first)), 19 + 29)
    assert sample.seconds > 0
    assert nat.engine_step(ids + ["c"], [[1], [1], []], num_tokens, token_ids, None, timed=True)[1] is None


def test_the_compiled_controller_prices_with_a_step_cost_only():
    class PlainCost:
        def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int) -> float:
            return 0.01

    ctl = DraftController(SpecConfig(method="specdec", k_max=2))
    with pytest.raises(TypeError, match="StepCost"):
        ctl.step_tokens(["a"], [np.arange(10)], [0], PlainCost())


def test_calibration_drafts_are_checked_against_k_max():
    nat = DraftController(SpecConfig(method="specdec", k_max=3))
    token_ids = np.zeros((1, 8), dtype=np.int32)
    with pytest.raises(ValueError, match="forced_draft_tokens"):
        nat.engine_step(["a"], [[1]], np.array([4], dtype=np.int32), token_ids, None, forced_draft_tokens=4)


def test_a_request_learned_from_another_engine_drafts_its_prompts_next_request():
    ctl = DraftController(SpecConfig(method="specdec", k_max=4, budget=False))
    prompt, output = [5, 6, 7, 8], [41, 42, 43, 44, 45, 46]
    assert ctl.step_tokens(["cold"], [np.array(prompt + [41])], [0], num_prompt_tokens=[4])[0].tolist() == []
    ctl.finish("cold")  # its one token went to the history: learning goes further
    ctl.learn("elsewhere", prompt, output)
    assert ctl.state_sizes()["live_requests"][0] == 0  # learned, not left running
    draft = ctl.step_tokens(["again"], [np.array(prompt + [41])], [0], num_prompt_tokens=[4])[0]
    assert draft.tolist() == output[1:5]  # the learned output, past what the new request has
