"""The streaming worker's loop (specdec.streaming) on a continuous-batching double: shards
share the engine, each is handed on once with its results in order, read-ahead is bounded,
failures stay with their shard, the engine time attributed to requests adds up, requests start
longest expected first (arrival order without a history), and the engine hears the stream's
end once no request is left to join, and each shard's statistics hold its own drafts."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from specdec.engines.engine_stream import EngineStream
from specdec.engines.stall import EngineStalled
from specdec.stats import DRAFT_SOURCES
from specdec.handoff import Finisher, Inline
from specdec.streaming import EngineHolder, Handover, ShardRequests, _StreamRunner, run_stream
from specdec.types import GenerationRequest, SamplingOptions
from support.stepping import TokenByToken


def shard(key: str, lengths: list[int]) -> ShardRequests[None]:
    requests = [GenerationRequest(f"{key}-{i}", (i + 1, 7, 9), max_tokens=n) for i, n in enumerate(lengths)]
    return ShardRequests(key, f"shard {key}", requests, None)


def holder(engine) -> EngineHolder:
    return EngineHolder(lambda: (engine, 0.0))


def run(works, engine, **options):
    outcomes = []
    options.setdefault("read_ahead_requests", 64)
    totals = run_stream(works, holder(engine), SamplingOptions(), outcomes.append, **options)
    return outcomes, totals


def test_every_shard_once_with_its_results_in_request_order():
    engine = TokenByToken(max_num_seqs=4)
    works = [shard(k, [5, 1, 3]) for k in "abcdef"]
    outcomes, totals = run(works, engine)
    assert sorted(o.shard.key for o in outcomes) == list("abcdef")
    for o in outcomes:
        assert o.error is None
        assert [r.id for r in o.results] == [f"{o.shard.key}-{i}" for i in range(3)]
        assert [len(r.output_token_ids) for r in o.results] == [5, 1, 3]
    assert totals.num_output_tokens == 6 * 9


def test_small_shards_keep_the_engine_full_and_the_sequential_worker_drains_it():
    # shards of 2 rows, 4 rows at once: streamed, requests of several shards run together
    streamed = TokenByToken(max_num_seqs=4)
    run([shard(k, [6, 2]) for k in "abcd"], streamed)
    sequential = TokenByToken(max_num_seqs=4)
    run([shard(k, [6, 2]) for k in "abcd"], sequential, sequential=True)
    assert streamed.max_running_seen == 4
    assert sequential.max_running_seen == 2
    assert streamed.steps < sequential.steps  # 4 shards x 6 steps sequentially, fewer streamed


def test_attributed_engine_time_adds_up_to_the_busy_time():
    engine = TokenByToken(max_num_seqs=3, step_s=0.002)
    outcomes, totals = run([shard(k, [4, 9, 1, 2]) for k in "abc"], engine)
    attributed = sum(o.stats.engine_s for o in outcomes)
    assert totals.busy_s > 0
    assert attributed == pytest.approx(totals.busy_s, rel=1e-9)
    assert all(r.engine_s > 0 for o in outcomes for r in o.results)


class SilentFirstStep(TokenByToken):
    """Its first step produces nothing (as a step that only schedules would)."""

    def step(self):
        if self.steps == 0:
            self.steps += 1
            return []
        return super().step()


def test_a_step_without_output_passes_its_time_on():
    engine = SilentFirstStep(max_num_seqs=2, step_s=0.001)
    stream = EngineStream(engine, SamplingOptions())
    for i in range(3):
        stream.add("x", i, GenerationRequest(f"x{i}", (1, 2), max_tokens=3))
    finished = []
    while stream.num_in_flight:
        finished += stream.step()
    assert engine.steps == 7  # one silent, then two rounds of three tokens
    assert sum(f.result.engine_s for f in finished) == pytest.approx(stream.busy_s, rel=1e-9)
    assert sorted(f.index for f in finished) == [0, 1, 2]


def test_full_batch_steps_are_those_begun_with_a_full_batch_in_flight_that_finish_no_prompt():
    engine = TokenByToken(max_num_seqs=2, step_s=0.002)
    outcomes, totals = run([shard("a", [4, 4, 4])], engine)
    # steps 1-4: a-0 and a-1 run with a-2 waiting (full), step 1 their prefill; 5-8: a-2 alone
    assert engine.steps == 8 and totals.num_output_tokens == 12
    assert totals.full_batch_tokens == 6  # two tokens a step over full steps 2-4
    assert 0 < totals.full_batch_s < totals.busy_s
    assert totals.full_batch_s == pytest.approx(totals.busy_s * 3 / 8, rel=0.5)
    unmarked = EngineStream(TokenByToken(max_num_seqs=2), SamplingOptions())  # no full_batch: counts none
    unmarked.add("x", 0, GenerationRequest("x0", (1, 2), max_tokens=2))
    while unmarked.num_in_flight:
        unmarked.step()
    assert (unmarked.full_batch_s, unmarked.full_batch_tokens) == (0.0, 0)


class DraftsBySource(TokenByToken):
    """Each request drafts 2 tokens and has 1 accepted per output token, from the source its
    request's id names (`<source>-<n>`); `take_source_counts` follows the engine contract of
    specdec.engines.engine_stream."""

    def __init__(self) -> None:
        super().__init__(max_num_seqs=4)
        self.counts: dict[str, dict[str, tuple[int, int]]] = {}

    def step(self):
        updates = super().step()
        for update in updates:
            source = self.requests[update.request_id].id.split("-")[0]
            drafted, accepted = self.counts.setdefault(update.request_id, {}).get(source, (0, 0))
            self.counts[update.request_id] = {source: (drafted + 2, accepted + 1)}
        return updates

    def take_source_counts(self, request_ids):
        return {i: self.counts.pop(i) for i in request_ids if i in self.counts}


def test_shards_in_flight_together_each_get_their_own_drafts_by_source():
    engine = DraftsBySource()
    # both shards in the engine at once; the "own" one ends first, "cache" keeps drafting after it
    works = [ShardRequests("a", "shard a", [GenerationRequest(f"own-{i}", (1, 2), max_tokens=3) for i in range(2)], None),
             ShardRequests("b", "shard b", [GenerationRequest(f"cache-{i}", (1, 2), max_tokens=5) for i in range(2)], None)]
    outcomes, _ = run(works, engine)
    by_key = {o.shard.key: o.stats for o in outcomes}
    own, cache = DRAFT_SOURCES.index("own"), DRAFT_SOURCES.index("cache")
    assert engine.max_running_seen == 4
    assert by_key["a"].drafted_by_source[own] == 2 * 2 * 3 and by_key["a"].accepted_by_source[own] == 2 * 3
    assert by_key["b"].drafted_by_source[cache] == 2 * 2 * 5 and by_key["b"].accepted_by_source[cache] == 2 * 5
    assert sum(by_key["a"].drafted_by_source) == 12 and sum(by_key["b"].drafted_by_source) == 20
    assert engine.counts == {}  # every shard's counts were taken


def test_read_ahead_holds_at_most_its_bound_of_requests():
    engine = TokenByToken(max_num_seqs=2)
    yielded = []
    taken_before = []

    def loads():
        for k in range(40):
            # requests yielded so far minus those the engine has taken: what read-ahead holds
            taken_before.append(sum(yielded) - len(engine.added))
            yielded.append(5)
            yield shard(f"s{k}", [2] * 5)

    outcomes, _ = run(loads(), engine, read_ahead_requests=10)
    assert len(outcomes) == 40
    assert max(taken_before) <= 10


def test_a_shard_that_cannot_load_fails_alone():
    engine = TokenByToken()
    bad = ShardRequests("bad", "shard bad", [], None, error=ValueError("shard bad: not Parquet"))
    outcomes, totals = run([shard("a", [2]), bad, shard("b", [3])], engine)
    by_key = {o.shard.key: o for o in outcomes}
    assert isinstance(by_key["bad"].error, ValueError)
    assert by_key["a"].error is None and by_key["b"].error is None and len(outcomes) == 3


def test_a_hand_on_that_fails_loses_no_other_shard_and_is_raised_at_the_end():
    engine = TokenByToken()
    delivered = []

    def on_outcome(outcome):
        if outcome.shard.key == "b":
            raise OSError("staging unreachable")
        delivered.append(outcome.shard.key)

    with pytest.raises(OSError, match="staging unreachable"):
        run_stream([shard(k, [2, 3]) for k in "abc"], holder(engine), SamplingOptions(), on_outcome,
                   read_ahead_requests=64)
    assert sorted(delivered) == ["a", "c"]


class StallsOnce(TokenByToken):
    """Its first engine hangs in a step once `hang_after` steps have run; `kill` wakes it."""

    def __init__(self, hang_after: int) -> None:
        super().__init__(max_num_seqs=2)
        self.hang_after = hang_after
        self.woken = threading.Event()

    def step(self):
        if self.steps >= self.hang_after:
            self.woken.wait(30)
            raise RuntimeError("engine core died")
        return super().step()

    def stop_stalled(self, limit_s: float) -> None:
        self.alive = False
        self.woken.set()


def test_a_stalled_engine_fails_the_shards_in_it_and_a_fresh_engine_takes_the_rest():
    first, fresh = StallsOnce(hang_after=3), TokenByToken(max_num_seqs=2)
    engines = iter([first, fresh])
    outcomes = []

    def loads():
        yield shard("a", [20, 20])
        while first.alive:  # the rest arrives once the first engine is gone
            time.sleep(0.05)
        yield shard("b", [2])

    run_stream(loads(), EngineHolder(lambda: (next(engines), 0.0)), SamplingOptions(), outcomes.append,
               read_ahead_requests=64, stall_timeout_s=0.3)
    by_key = {o.shard.key: o for o in outcomes}
    assert isinstance(by_key["a"].error, EngineStalled) and "shard a" in str(by_key["a"].error)
    assert by_key["b"].error is None and len(by_key["b"].results) == 1


def with_history(key: str, lengths: list[int], expected: list[float]) -> ShardRequests[None]:
    work = shard(key, lengths)
    work.expected_tokens = expected
    return work


def run_in_order(works, engine, handover=None, outcomes=None):
    """The stream's loop over a plain iterator, no read-ahead thread: it sees every shard (and
    the end) at its first look, so which requests it has to choose from is deterministic."""
    outcomes = [] if outcomes is None else outcomes
    runner = _StreamRunner(holder(engine), SamplingOptions(), Inline(works), Finisher(outcomes.append, inline=True),
                           None, False, None, True, handover)
    runner.run()
    if runner.stopping:
        handover.left = runner.left()
    runner.close_stream()
    return outcomes


def test_the_longest_expected_requests_start_first_and_end_the_runs_tail_sooner():
    lengths = [2, 2, 2, 2, 8]  # two rows at once: in arrival order the 8-token request runs alone at the end
    arrival, longest_first = TokenByToken(max_num_seqs=2), TokenByToken(max_num_seqs=2)
    run_in_order([shard("a", lengths)], arrival)
    outcomes = run_in_order([with_history("a", lengths, [2.0, 2.0, 2.0, 2.0, 8.0])], longest_first)
    assert longest_first.added[0] == "a\x1f4"
    assert (longest_first.steps, arrival.steps) == (8, 12)
    assert [len(r.output_token_ids) for r in outcomes[0].results] == lengths  # results still in request order


def test_the_last_windows_requests_of_every_shard_compete_longest_expected_first():
    works = [with_history("a", [3, 3], [3.0, 1.0]), with_history("b", [2, 9], [2.0, 9.0]), shard("c", [1, 1]),
             with_history("d", [7], [7.0])]
    engine = TokenByToken(max_num_seqs=1)
    outcomes = run_in_order(works, engine)
    assert sorted(o.shard.key for o in outcomes) == list("abcd") and all(o.error is None for o in outcomes)
    # c has no history (expected 0): after every known one, in arrival order
    assert engine.added == ["b\x1f1", "d\x1f0", "a\x1f0", "b\x1f0", "a\x1f1", "c\x1f0", "c\x1f1"]


def test_requests_start_in_arrival_order_while_shards_are_still_to_come():
    engine = TokenByToken(max_num_seqs=1)
    # read-ahead of two requests: while "a" is in the engine the other shards cannot all be loaded
    works = [with_history(k, [3, 3], [1.0, 9.0]) for k in "abcdef"]
    outcomes, _ = run(works, engine, read_ahead_requests=2)
    assert len(outcomes) == 6 and all(o.error is None for o in outcomes)
    assert engine.added[:2] == ["a\x1f0", "a\x1f1"]  # the shorter first: its shard commits sooner


def test_a_failed_engine_fails_only_the_shards_in_it_not_those_still_waiting():
    first, fresh = StallsOnce(hang_after=3), TokenByToken(max_num_seqs=2)
    engines = iter([first, fresh])
    outcomes = []
    # "a" fills the engine (two running, two waiting); "b" is loaded but has nothing in it yet
    works = [with_history("a", [20] * 4, [20.0] * 4), with_history("b", [2], [1.0])]
    run_stream(works, EngineHolder(lambda: (next(engines), 0.0)), SamplingOptions(), outcomes.append,
               read_ahead_requests=64, stall_timeout_s=0.3)
    by_key = {o.shard.key: o for o in outcomes}
    assert isinstance(by_key["a"].error, EngineStalled)
    assert by_key["b"].error is None and len(by_key["b"].results) == 1
    assert fresh.added == ["b\x1f0"]


class HearsTheEnd(TokenByToken):
    """Records each set_stream_ending call with how many requests it had been given by then."""

    def __init__(self) -> None:
        super().__init__(max_num_seqs=2)
        self.endings: list[tuple[bool, int]] = []

    def set_stream_ending(self, ending: bool) -> None:
        self.endings.append((ending, len(self.added)))


def test_the_engine_hears_the_streams_end_once_no_request_is_left_to_join():
    engine = HearsTheEnd()
    works = [with_history("a", [3, 3, 3], [1.0, 9.0, 1.0]), with_history("b", [5, 2, 2], [5.0, 2.0, 2.0])]
    run(works, engine)
    assert engine.endings == [(False, 0), (True, 6)]  # every request given before the tail begins


def test_a_stream_that_is_not_the_runs_end_never_tells_the_engine_its_tail_began():
    engine = HearsTheEnd()  # e.g. a pilot's chunk: the run goes on after it
    run([with_history("a", [3, 3, 3], [1.0, 9.0, 1.0])], engine, run_tail=False)
    assert engine.endings == [(False, 0)]


def test_a_failed_shards_waiting_requests_no_longer_count_against_the_read_ahead():
    first, fresh = StallsOnce(hang_after=3), TokenByToken(max_num_seqs=2)
    first.engine_config = dataclasses.replace(first.engine_config, max_num_seqs=1)  # holds two requests
    engines = iter([first, fresh])
    outcomes = []
    # a bound of two requests: "a" (four, two of them never in the engine) must free its place for "b"
    works = [shard("a", [20] * 4), shard("b", [2, 2])]
    runner = threading.Thread(target=run_stream, daemon=True, args=(
        works, EngineHolder(lambda: (next(engines), 0.0)), SamplingOptions(), outcomes.append),
        kwargs={"read_ahead_requests": 2, "stall_timeout_s": 0.3})
    runner.start()
    runner.join(20)
    assert not runner.is_alive(), "the stream waits for a read-ahead that never frees"
    by_key = {o.shard.key: o for o in outcomes}
    assert isinstance(by_key["a"].error, EngineStalled) and by_key["b"].error is None


def test_a_handover_hears_its_leads_first_and_holds_the_shards_finished_before_it_answers():
    # a's one short request finishes beside b's lead, two steps before the lead does
    engine = TokenByToken(max_num_seqs=2)
    outcomes, asked = [], []

    def go_on(lead_results, so_far):
        asked.append(([r.id for r in lead_results], len(outcomes), so_far.busy_s > 0))
        return True

    handover = Handover({"b": {0}}, go_on)
    run_in_order([shard("a", [1]), shard("b", [3, 2])], engine, handover, outcomes)
    assert engine.added[0] == "b\x1f0"  # the lead starts first, in a later shard
    assert asked == [(["b-0"], 0, True)]  # a was held until the answer
    assert [o.shard.key for o in outcomes] == ["a", "b"] and handover.left == []


def test_a_handover_that_says_no_finishes_what_is_in_the_engine_and_hands_the_rest_back():
    engine = TokenByToken(max_num_seqs=2)  # 4 requests in the stream at once
    outcomes = []
    handover = Handover({"b": {0, 2}}, lambda results, so_far: False)
    works = [shard("a", [3, 3, 3]), shard("b", [3, 3, 3]), shard("c", [2, 2])]
    outcomes = run_in_order(works, engine, handover)
    # b's leads, then a's first two joined the engine; once the leads finished, nothing more did
    assert engine.added == ["b\x1f0", "b\x1f2", "a\x1f0", "a\x1f1"]
    assert outcomes == []  # no shard finished here: each is handed back, its finished requests in it
    assert [(s.key, sorted(s.done)) for s in handover.left] == [("a", [0, 1]), ("b", [0, 2]), ("c", [])]
    assert [r.id for s in handover.left for r in s.done.values()] == ["a-0", "a-1", "b-0", "b-2"]
    assert all(s.done_source_counts == [{}] for s in handover.left[:2])  # their drafts (none here) went with them


def test_leads_that_run_alone_let_no_other_request_join_until_the_handover_answers():
    engine = TokenByToken(max_num_seqs=4)
    handover = Handover({"a": {1, 2}}, lambda results, so_far: True, alone=True)
    outcomes = run_in_order([shard("a", [3, 2, 2]), shard("b", [1])], engine, handover)
    assert engine.added == ["a\x1f1", "a\x1f2", "a\x1f0", "b\x1f0"]
    assert engine.max_running_seen == 2  # a batch of 4, the leads alone in it
    assert sorted(o.shard.key for o in outcomes) == ["a", "b"]


def test_leads_lost_with_a_failed_engine_still_get_the_handover_its_answer():
    first, fresh = StallsOnce(hang_after=3), TokenByToken(max_num_seqs=2)
    engines = iter([first, fresh])
    outcomes, asked = [], []
    handover = Handover({"a": {0}, "b": {0}}, lambda results, so_far: asked.append([r.id for r in results]) or True)
    works = [with_history("a", [20, 20], [20.0, 20.0]), with_history("b", [2], [1.0])]
    run_stream(works, EngineHolder(lambda: (next(engines), 0.0)), SamplingOptions(), outcomes.append,
               read_ahead_requests=64, stall_timeout_s=0.3, handover=handover)
    assert asked == [["b-0"]]  # a's lead died with the engine: the answer came on b's
    by_key = {o.shard.key: o for o in outcomes}
    assert isinstance(by_key["a"].error, EngineStalled) and by_key["b"].error is None


class Learns(TokenByToken):
    """Records what it learned, with how many requests it had been given by then."""

    def __init__(self) -> None:
        super().__init__(max_num_seqs=2)
        self.learned: list[tuple[list[tuple], int]] = []

    def learn(self, finished) -> None:
        self.learned.append(([(i, tuple(p), tuple(o)) for i, p, o in finished], len(self.added)))


def test_results_generated_elsewhere_are_learned_before_the_next_requests_join():
    engine = Learns()
    pre = shard("a", [2, 3, 2])
    piloted = Learns()  # another engine generated request 1 (a pilot's share, a resumed run)
    other, _ = run([dataclasses.replace(pre, requests=[pre.requests[1]])], piloted)
    pre.done = {1: other[0].results[0]}
    outcomes, _ = run([pre, shard("b", [1])], engine)
    learned = (EngineStream.request_id("a", 1), pre.requests[1].prompt_token_ids,
               tuple(other[0].results[0].output_token_ids))
    assert engine.learned == [([learned], 0)]  # named as the stream would name it, which runs it no more
    assert [r.id for r in outcomes[0].results] == ["a-0", "a-1", "a-2"] and piloted.learned == []
