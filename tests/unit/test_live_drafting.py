"""Drafting from other requests' text (the oracle, and the controller where it says so): a sibling's output (same prompt)
and any running request's output are drafted from as soon as they are in; a re-run of a
prompt drafts from that prompt's earlier completions kept in the cache file (history) from
its first step; per-source counters; the live index's rebuild and the groups' bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import live_text
from oracles.confidence import shared_bucket
from oracles.controller import DraftController as OracleController
from oracles.hybrid import HybridProposer
from oracles.suffix_cache import SuffixTrieCache
from specdec.config import SpecConfig
from specdec.controller import CORE, DraftController
from support.greedy_replay import replay_greedy, seq

RNG = np.random.default_rng(0)
PROMPT = RNG.permutation(np.arange(100, 200))[:10].tolist()  # no token twice: no own-text match
ANSWER = RNG.permutation(np.arange(300, 400))[:40].tolist()


def proposer(**kwargs) -> HybridProposer:
    return HybridProposer(SuffixTrieCache(), n_min=1, n_max=16, **kwargs)


def controller(**kwargs) -> DraftController:
    return DraftController(SpecConfig(method="specdec", k_max=4, **kwargs))


def test_a_siblings_output_is_drafted_in_the_same_call_it_arrives():
    drafter = proposer()
    p = len(PROMPT)
    # b joins one step after a: a has written 6 tokens, b its first (the same: greedy).
    batch = drafter.propose_batch(["a", "b"], [seq(PROMPT, ANSWER[:6]), seq(PROMPT, ANSWER[:1])], [4, 4], [p, p])
    assert batch.draft(0).size == 0  # a has no one ahead of it
    assert batch.draft(1).tolist() == ANSWER[1:5]
    drafter.feedback_batch(["a", "b"], [0, 4], [0, 3])
    assert drafter.take_source_counts(["a", "b"])["b"]["sibling"] == (4, 3)
    # the next step: a has written more; b (3 accepted + 1) drafts from what a wrote last
    batch = drafter.propose_batch(["a", "b"], [seq(PROMPT, ANSWER[:12]), seq(PROMPT, ANSWER[:5])], [4, 4], [p, p])
    assert batch.draft(1).tolist() == ANSWER[5:9]


def test_propose_batch_docstring_example():
    drafter = proposer()
    batch = drafter.propose_batch(["a", "b"], [seq([5, 6, 7, 8, 9]), seq([5, 6, 7])], [2, 2], [2, 2])
    assert batch.draft(0).tolist() == [] and batch.draft(1).tolist() == [8, 9]
    assert drafter._buckets["b"].tolist() == [shared_bucket("sibling", 3)] * 2


def test_a_row_drafts_from_a_row_after_it_in_the_batch():
    """Every row's tokens are in before any row drafts: the order of rows does not matter."""
    p = len(PROMPT)
    for order in (["a", "b"], ["b", "a"]):
        drafter = proposer()
        rows = {"a": seq(PROMPT, ANSWER[:1]), "b": seq(PROMPT, ANSWER[:8])}
        batch = drafter.propose_batch(order, [rows[r] for r in order], [3, 3], [p, p])
        assert batch.draft(order.index("a")).tolist() == ANSWER[1:4]


def test_any_running_requests_output_is_drafted_from_by_other_prompts():
    drafter = proposer()
    other_prompt = [1, 2, 3]
    # a writes ANSWER; b, another prompt, happens to write its first 3 tokens
    drafter.propose_batch(["a"], [seq(PROMPT, ANSWER[:10])], [0], [len(PROMPT)])
    batch = drafter.propose_batch(["a", "b"], [seq(PROMPT, ANSWER[:10]), seq(other_prompt, ANSWER[:3])], [0, 4],
                                  [len(PROMPT), 3])
    assert batch.draft(1).tolist() == ANSWER[3:7]
    drafter.feedback_batch(["b"], [4], [4])
    counts = drafter.take_source_counts(["a", "b"])
    assert list(counts) == ["b"] and counts["b"]["live"] == (4, 4) and counts["b"]["sibling"] == (0, 0)
    assert drafter.take_source_counts(["b"]) == {}  # taken: zeroed


def test_without_prompt_lengths_the_live_index_still_drafts():
    drafter = proposer()
    batch = drafter.propose_batch(["a", "b"], [seq(PROMPT, ANSWER[:10]), seq([7], ANSWER[:3])], [0, 4])
    assert batch.draft(1).tolist() == ANSWER[3:7]


def test_a_request_never_drafts_from_its_own_member():
    drafter = proposer()
    p = len(PROMPT)
    for n in range(1, 20, 3):
        batch = drafter.propose_batch(["a"], [seq(PROMPT, ANSWER[:n])], [4], [p])
        assert batch.draft(0).size == 0  # nothing repeats in its own text, and no one else wrote


def test_a_request_does_not_find_itself_in_the_shared_indexes():
    drafter = proposer()
    drafter.table.accepted[48:] = 99.0  # sibling, history and live would win over own text
    tokens = seq(PROMPT, [1, 2, 3, 1, 2, 3, 1, 2])
    assert drafter.propose_batch(["a"], [tokens], [3], [len(PROMPT)]).draft(0).tolist() == [3, 1, 2]
    drafter.feedback_batch(["a"], [3], [3])
    assert drafter.take_source_counts(["a"]) == {"a": {"own": (3, 3), "cache": (0, 0), "sibling": (0, 0),
                                                       "history": (0, 0), "live": (0, 0)}}


def test_a_finished_siblings_output_stays_in_the_group():
    drafter = HybridProposer(SuffixTrieCache(max_tokens=1), n_min=1, n_max=16)  # the cache keeps one sequence
    p = len(PROMPT)
    drafter.propose_batch(["a"], [seq(PROMPT, ANSWER)], [0], [p])
    drafter.forget("a")
    drafter.propose_batch(["x"], [seq([5, 6], [7] * 30)], [0], [2])
    drafter.forget("x")  # now the cache holds x alone
    batch = drafter.propose_batch(["b"], [seq(PROMPT, ANSWER[:2])], [4], [p])
    assert batch.draft(0).tolist() == ANSWER[2:6]
    drafter.feedback_batch(["b"], [4], [4])
    assert drafter.take_source_counts(["b"])["b"]["sibling"] == (4, 4)


def test_a_rerun_drafts_from_the_prompts_history_from_its_first_step(tmp_path):
    path = str(tmp_path / "cache.npz")
    first = controller(cache_file=path)
    cold = replay_greedy(first, "q0", PROMPT, ANSWER)
    first.save_cache(path)
    assert cold[0] == (0, 0)  # nothing to draft from at first
    later = controller(cache_file=path)
    assert [t.tolist() for _, t in later.contents().history()] == [ANSWER]
    warm = replay_greedy(later, "q1", PROMPT, ANSWER)
    assert warm[0] == (4, 4)  # drafted and accepted from the first step
    assert len(warm) < len(cold)
    drafted, accepted = later.take_source_counts(["q1"])["q1"]["history"]  # finished: kept until taken
    assert accepted >= 4 and drafted == accepted
    # The first draft is the history's: its match through the prompt tail ties the cache's
    # (the file's cache holds the same text), and history comes first among the candidates.
    again = controller(cache_file=path)
    tokens = seq(PROMPT, ANSWER[:1])
    [draft] = again.step_tokens(["q2"], [tokens], [0], None, [len(PROMPT)])
    [_] = again.step_tokens(["q2"], [seq(PROMPT, ANSWER[:1 + 4 + 1])], [4], None, [len(PROMPT)])
    assert draft.tolist() == ANSWER[1:5] and again.take_source_counts(["q2"])["q2"]["history"] == (4, 4)


def test_history_seeds_only_a_new_group_and_only_with_completions_from_the_file(tmp_path):
    path = str(tmp_path / "cache.npz")
    first = controller(cache_file=path)
    replay_greedy(first, "q0", PROMPT, ANSWER)
    first.save_cache(path)
    config = SpecConfig(method="specdec", k_max=4, cache_file=path)
    drafter = OracleController(config, settings=dataclasses.replace(CORE, group_max_tokens=0)).proposer
    drafter.propose_batch(["r"], [seq(PROMPT, [1])], [0], [len(PROMPT)])
    [(digest, group)] = drafter.text.groups.items()
    assert group.num_history == 1 and len(group.index) == 2  # the file's completion, then r
    drafter.forget("r")  # its completion [1] joins the history; the group, over the bound, goes
    assert [t.tolist() for t in drafter.history.completions(digest)] == [ANSWER, [1]] and not drafter.text.groups
    drafter.propose_batch(["s"], [seq(PROMPT, [2])], [0], [len(PROMPT)])
    [group] = drafter.text.groups.values()
    assert group.num_history == 1  # re-created: seeded with the file's completion alone
    assert group.index.sequence(0).tolist() == PROMPT + ANSWER
    drafter.text.check_invariants()


def test_groups_without_a_live_member_are_dropped_least_recently_joined_first():
    drafter = proposer(group_max_tokens=60)
    prompts = {name: [i * 10 + j for j in range(5)] for i, name in enumerate("abcd")}
    for name in "abc":  # 5 prompt + 15 output tokens each: 60 in all, at the bound
        drafter.propose_batch([name], [seq(prompts[name], ANSWER[:15])], [0], [5])
    drafter.forget("a")
    drafter.forget("c")
    assert drafter.text.group_tokens == 60
    drafter.propose_batch(["d"], [seq(prompts["d"], ANSWER[:3])], [0], [5])  # 68: a's group goes
    assert sorted(g.num_live for g in drafter.text.groups.values()) == [0, 1, 1]
    assert drafter.text.group_tokens == 48
    drafter.forget("b")
    drafter.propose_batch(["d"], [seq(prompts["d"], ANSWER[:40])], [0], [5])  # b's, then c's, d stays
    assert [g.num_live for g in drafter.text.groups.values()] == [1] and drafter.text.group_tokens == 45
    drafter.text.check_invariants()


def test_the_live_index_is_rebuilt_from_the_live_requests(monkeypatch):
    monkeypatch.setattr(live_text, "LIVE_SLACK_TOKENS", 10)
    drafter = proposer()
    drafter.propose_batch(["a", "b"], [seq([1], ANSWER[:20]), seq([2], [50, 51, 52])], [0, 0])
    drafter.forget("a")  # 21 + 4 tokens > 2 * 4 + 10: rebuilt with b alone
    assert drafter.text.live.num_tokens == 4 and len(drafter.text.live) == 1
    batch = drafter.propose_batch(["b", "c"], [seq([2], [50, 51, 52, 53]), seq([3], [50, 51])], [0, 2])
    assert batch.draft(1).tolist() == [52, 53]  # b's new slot is found
    drafter.text.check_invariants()


def test_the_engine_call_reads_prompt_lengths_by_input_batch_row():
    ctl = controller()
    p = len(PROMPT)
    token_ids = np.zeros((4, 64), dtype=np.int32)
    token_ids[0, : p + 8] = seq(PROMPT, ANSWER[:8])
    token_ids[1, :3] = [9, 9, 9]  # still prefilling
    token_ids[2, : p + 6] = seq(PROMPT, ANSWER[:6])
    num_tokens = np.array([p + 8, 3, p + 1, 0])
    prompts = np.array([p, 3, p, 0])
    drafts, _ = ctl.engine_step(["a", "x", "b"], [[1], [], [1]], num_tokens, token_ids, None,
                                num_prompt_tokens=prompts)
    assert drafts[1] == [] and drafts[2] == ANSWER[1:5]
    ctl.engine_step(["a", "x", "b"], [[1], [], [1, 2, 3, 4, 5]], num_tokens + np.array([0, 0, 5, 0]), token_ids,
                    None, num_prompt_tokens=prompts)
    assert ctl.take_source_counts(["a", "x", "b"]) == {"b": {"own": (0, 0), "cache": (0, 0), "sibling": (4, 4),
                                                             "history": (0, 0), "live": (0, 0)}}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), group_max=st.sampled_from([0, 40, 400, 10**6]), slack=st.sampled_from([0, 5, 100]),
       history_max=st.sampled_from([0, 30, 1000]), per_prompt=st.integers(0, 3), n_max=st.integers(1, 6))
def test_structures_stay_consistent_and_bounded_on_random_streams(seed, group_max, slack, history_max, per_prompt,
                                                                  n_max):
    rng = np.random.default_rng(seed)
    drafter = HybridProposer(SuffixTrieCache(max_tokens=200), 1, n_max, group_max_tokens=group_max,
                             history_max_tokens=history_max, history_per_prompt=per_prompt)
    drafter.text.live_slack_tokens = slack
    prompts = [rng.integers(0, 4, size=int(rng.integers(0, 8))).tolist() for _ in range(3)]
    live: dict[str, tuple[list[int], int]] = {}
    for step in range(40):
        if len(live) < 4 and rng.random() < 0.4:
            prompt = prompts[int(rng.integers(0, 3))]
            live[f"r{step}"] = (prompt + rng.integers(0, 4, size=1).tolist(), len(prompt))
        for req_id, (tokens, p) in list(live.items()):
            live[req_id] = (tokens + rng.integers(0, 4, size=int(rng.integers(0, 3))).tolist(), p)
        ids = list(live)
        if ids:
            batch = drafter.propose_batch(ids, [np.array(live[r][0]) for r in ids], [3] * len(ids),
                                          [live[r][1] for r in ids])
            drafter.feedback_batch(ids, batch.lengths.tolist(), [int(rng.integers(0, n + 1)) for n in batch.lengths])
        for req_id in ids:
            if rng.random() < 0.15:
                drafter.forget(req_id)
                del live[req_id]
        drafter.text.check_invariants()
        sizes = drafter.state_sizes()
        assert all(size <= bound for size, bound in sizes.values() if bound is not None), sizes
    for req_id in list(live):
        drafter.forget(req_id)
    counts = drafter.take_source_counts([f"r{step}" for step in range(40)])
    assert all(0 <= accepted <= drafted for by_source in counts.values() for drafted, accepted in by_source.values())
    assert all(size == 0 for size, bound in drafter.state_sizes().values() if bound is None)


def test_a_prompt_length_beyond_the_tokens_is_refused():
    with pytest.raises(ValueError, match="request a"):
        proposer().propose_batch(["a"], [seq([1, 2])], [1], [3])
