"""The replay and the controller it drives, on scripted and random token streams."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.drafters import FixedK
from bench.replay import ReplayRequest, num_matching
from specdec.config import SpecConfig
from specdec.controller import DraftController
from support.replay_requests import replay


class RandomProposer:
    """Drafts random tokens (sometimes right) of random length, possibly longer than asked."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def propose(self, req_id, tokens, k):
        return self.rng.integers(0, 3, size=self.rng.integers(0, k + 1)).astype(np.int64)

    def forget(self, req_id):
        pass


@settings(max_examples=200, deadline=None)
@given(
    prompt=st.lists(st.integers(0, 3), min_size=1, max_size=20),
    greedy=st.lists(st.integers(0, 3), min_size=19, max_size=60),  # max_tokens + K + 1 look-ahead
    max_tokens=st.integers(1, 12),
    k_max=st.integers(1, 6),
    seed=st.integers(0, 1000),
    use_random=st.booleans(),
)
def test_replay_output_is_the_greedy_output_and_counts_add_up(prompt, greedy, max_tokens, k_max, seed, use_random):
    cfg = SpecConfig(method="specdec", k_max=k_max, budget=False)
    drafter = FixedK(cfg, RandomProposer(seed)) if use_random else DraftController(cfg)
    [res] = replay([ReplayRequest("r", prompt, greedy, max_tokens)], drafter)
    assert res.output_token_ids == greedy[:max_tokens]
    assert all(0 <= a <= d <= k_max for d, a in zip(res.per_step_drafted, res.per_step_accepted))
    # The K histogram counts every decode step (a forward after the prefill's) by its draft.
    hist = res.stats.k_histogram
    assert hist[1:] == [res.per_step_drafted.count(j) for j in range(1, cfg.k_ceiling + 1)]
    assert hist[0] == res.stats.num_fallback_steps
    forwards = sum(hist) + 1
    # Every forward emits one token of its own plus the draft tokens it accepted.
    assert min(forwards + sum(res.per_step_accepted), max_tokens) == len(res.output_token_ids)
    assert res.stats.num_drafts == len(res.per_step_drafted)
    assert res.stats.num_accepted_tokens == sum(res.per_step_accepted)


@settings(max_examples=200, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), min_size=1, max_size=80),
    k_max=st.integers(1, 8),
    accepted=st.lists(st.integers(0, 8), min_size=1, max_size=40),
)
def test_controller_never_returns_more_than_k(tokens, k_max, accepted):
    ctl = DraftController(SpecConfig(method="specdec", k_max=k_max))
    seq = np.asarray(tokens, dtype=np.int64)
    last = 0
    for a in accepted:
        [draft] = ctl.step_tokens(["r"], [seq], [min(a, last)])
        assert draft.shape[0] <= k_max
        last = draft.shape[0]


def test_repetitive_text_is_drafted_and_accepted():
    pattern = [5, 6, 7, 8, 9]
    greedy = pattern * 12
    cfg = SpecConfig(method="specdec", k_max=4)
    [res] = replay([ReplayRequest("r", pattern * 2, greedy, 40)], DraftController(cfg))
    assert res.output_token_ids == greedy[:40]
    assert res.stats.acceptance_rate == 1.0
    assert res.stats.tokens_per_forward > 3.0  # close to K + 1 tokens per forward


def test_stop_token_truncates_output_like_vllm():
    cfg = SpecConfig(method="specdec", k_max=4)
    greedy = [1, 2, 3, 1, 2, 3, 0, 1, 2, 3]
    [res] = replay([ReplayRequest("r", [1, 2, 3], greedy, 10, frozenset({0}))], DraftController(cfg))
    assert res.output_token_ids == [1, 2, 3, 1, 2, 3, 0]


def test_persisted_cache_starts_a_later_run_warm(tmp_path):
    rng = np.random.default_rng(3)
    answer = rng.integers(100, 200, size=40).tolist()  # every request answers the same text

    def request(i: int) -> ReplayRequest:
        return ReplayRequest(f"q{i}", rng.integers(0, 50, size=10).tolist(), answer + [0] * 9, 40)

    path = tmp_path / "cache.npz"
    cfg = SpecConfig(method="specdec", k_max=4, cache_file=str(path))
    first = DraftController(cfg)
    replay([request(0), request(1)], first)
    assert first.save_cache(str(path)) == 2 and path.exists()
    later = request(2)
    [cold] = replay([later], DraftController(SpecConfig(method="specdec", k_max=4)))
    [warm] = replay([later], DraftController(cfg))  # loads the file: the answer is drafted from the first step
    assert warm.output_token_ids == cold.output_token_ids == answer
    assert warm.stats.num_steps < cold.stats.num_steps
    small = SpecConfig(method="specdec", k_max=4, cache_file=str(path), cache_max_tokens=60)
    cache = DraftController(small).drafter.cache
    cache.check_invariants()
    assert len(cache) == 1  # over the token budget: the oldest sequence was evicted on load


def test_per_request_state_is_emptied_and_the_cache_stays_at_its_token_bound():
    """What tests/engine/test_long_run.py checks through an engine."""
    ctl = DraftController(SpecConfig(method="specdec", k_max=4, cache_max_tokens=200))
    rng = np.random.default_rng(1)
    for shard in range(6):
        ids = [f"s{shard}-{i}" for i in range(4)]
        seqs = [rng.integers(0, 20, size=60) for _ in ids]
        for n in range(5, 61, 5):
            ctl.step_tokens(ids, [seq[:n] for seq in seqs], [0] * len(ids))
        for req_id in ids:
            ctl.finish(req_id)
        ctl.take_source_counts(ids)  # as the driver does once a shard is done
        sizes = ctl.state_sizes()
        assert {"live_requests", "own_sequences", "cache_tokens", "cache_sequences", "cache_nodes"} <= set(sizes)
        assert all(size == 0 for size, bound in sizes.values() if bound is None), (shard, sizes)
        assert all(size <= bound for size, bound in sizes.values() if bound is not None), (shard, sizes)
    assert sizes["cache_tokens"][0] == 180 and sizes["cache_sequences"][0] == 3  # three 60-token requests fit


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), k_max=st.integers(1, 6), budget=st.booleans())
def test_per_source_counts_add_up_to_the_verified_drafts_of_a_batched_replay(seed, k_max, budget):
    """Requests of a few shared prompts decode side by side (greedy continuations from a small
    vocabulary, so siblings, live text and own text all draft); what the drafter counts per
    source for each request adds up to what the target verified and accepted of its drafts."""
    from specdec.step_cost import StepCost

    rng = np.random.default_rng(seed)
    ctl = DraftController(SpecConfig(method="specdec", k_max=k_max))
    cost = StepCost(fixed_s=0.01, per_seq_s=0.0, per_token_s=0.001) if budget else None
    prompts = [rng.integers(0, 5, size=int(rng.integers(1, 20))).tolist() for _ in range(3)]
    answers = [rng.integers(0, 5, size=30).tolist() for _ in range(2)]
    requests = {f"q{i}": (prompts[i % 3], answers[i % 2] + rng.integers(0, 5, size=10).tolist()) for i in range(6)}
    num_out = {req_id: 1 for req_id in requests}
    pending = {req_id: np.zeros(0, dtype=np.int64) for req_id in requests}
    accepted = {req_id: 0 for req_id in requests}
    verified = {req_id: (0, 0) for req_id in requests}
    while num_out:
        ids = list(num_out)
        for req_id in ids:  # the drafts verified in the step that just ran
            drafted, accepted_so_far = verified[req_id]
            verified[req_id] = (drafted + pending[req_id].size, accepted_so_far + accepted[req_id])
        tokens = [np.array(requests[r][0] + requests[r][1][: num_out[r]], dtype=np.int64) for r in ids]
        drafts = ctl.step_tokens(ids, tokens, [accepted[r] for r in ids], cost, [len(requests[r][0]) for r in ids])
        for req_id, draft in zip(ids, drafts):
            assert draft.size <= k_max
            greedy = np.array(requests[req_id][1])
            pending[req_id], accepted[req_id] = draft, num_matching(draft, greedy[num_out[req_id]:])
            num_out[req_id] += accepted[req_id] + 1
            if num_out[req_id] >= greedy.size:
                del num_out[req_id]
                ctl.finish(req_id)  # its last draft is never verified
    counts = ctl.take_source_counts(list(requests))
    assert set(counts) == {req_id for req_id, (drafted, _) in verified.items() if drafted}
    for req_id, by_source in counts.items():
        assert (sum(d for d, _ in by_source.values()), sum(a for _, a in by_source.values())) == verified[req_id]
    assert ctl.take_source_counts(list(requests)) == {}
    assert ctl.state_sizes()["finished_counts"] == (0, None)


def test_a_row_drafts_what_followed_its_last_match_and_nothing_after_a_miss():
    """k_max = 4 and no cost model, so a row drafts its full K."""
    controller = DraftController(SpecConfig(method="specdec", k_max=4))
    tokens = np.array([5, 6, 7, 8, 5, 6, 7])  # prompt + output so far
    [draft] = controller.step_tokens(["a"], [tokens], [0])
    assert draft.tolist() == [8, 5, 6, 7]  # "5 6 7" was followed by "8 5 6 7"
    # the target accepted "8 5" and then emitted 9: no earlier text continues "5 9"
    [draft] = controller.step_tokens(["a"], [np.append(tokens, [8, 5, 9])], [2])
    assert draft.tolist() == []
