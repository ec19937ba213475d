"""Method auto (specdec.pilot and the auto path of specdec.generate): the decision on synthetic
measurements, the sample drawn across shards and split between the engines, and whole runs on
engine doubles where one method is clearly faster: each kind gets its pilot, every request
runs exactly once (the pilot's results are kept, on whichever engine they ran), every row
comes back exactly once, and a resume's decisions skip the pilot."""

from __future__ import annotations

import collections
import dataclasses
import time

import pytest

import specdec.generate as generate_mod
from specdec.generate import ShardRows, generate_shards
from specdec.params import GenerationParams
from specdec.pilot import FULL_BATCH_STEPS, WHOLE_SHARES, PilotDecision, PilotPass, decide, sample, split
from specdec.prompts import PromptRow
from specdec.streaming import ShardRequests
from specdec.types import GenerationRequest
from support.echo_engine import EchoTokenizer
from support.stepping import TokenByToken


def measured(method: str, tokens: int, engine_s: float, requests: int = 32) -> PilotPass:
    return PilotPass(method, requests, tokens, engine_s)


@pytest.mark.parametrize(("specdec_tokens", "chosen"), [
    (1000, "none"),  # a tie: speculation has to pay to be chosen
    (1020, "none"),  # 2 % faster: within the 3 % margin, noise
    (1030, "none"),  # exactly the margin is not more than it
    (1031, "specdec"),
    (950, "none"),
])
def test_specdec_is_chosen_only_beyond_the_margin(specdec_tokens, chosen):
    decision = decide("chat", measured("none", 1000, 10.0), measured("specdec", specdec_tokens, 10.0), 0.03)
    assert decision.method == chosen
    assert decision.speedup == pytest.approx(specdec_tokens / 1000)
    assert decision.reason == (f"chat: specdec {specdec_tokens / 1000:.2f}x none in the pilot (32 requests on none "
                               f"in 10.0 s, 32 on specdec in 10.0 s, margin 3%): ran {chosen}")


def test_the_engines_are_compared_on_their_full_batch_steps_where_both_shares_had_some():
    # Over the whole shares specdec is 1.2x none, flattered by part-full steps (its drafts fill
    # rows none leaves idle); on the full-batch steps, as most of a run's steps are, 0.9x.
    none = dataclasses.replace(measured("none", 1000, 10.0), full_batch_s=5.0, full_batch_tokens=800)
    specdec = dataclasses.replace(measured("specdec", 1200, 10.0), full_batch_s=5.0, full_batch_tokens=720)
    decision = decide("chat", none, specdec, 0.03)
    assert (decision.method, decision.basis, decision.speedup) == ("none", FULL_BATCH_STEPS, pytest.approx(0.9))
    assert decision.reason == ("chat: specdec 0.90x none in the pilot's full-batch steps (32 requests on none in "
                               "10.0 s, 32 on specdec in 10.0 s, margin 3%): ran none")
    # A share that never filled the batch: both are compared on the whole shares instead.
    part_full = dataclasses.replace(specdec, full_batch_s=0.0, full_batch_tokens=0)
    decision = decide("chat", none, part_full, 0.03)
    assert (decision.method, decision.basis, decision.speedup) == ("specdec", WHOLE_SHARES, pytest.approx(1.2))
    assert PilotDecision.from_dict(decision.to_dict()) == decision


def test_a_pass_that_measured_nothing_cannot_win():
    # A pilot cut short: every sampled request of one pass failed (no tokens, no engine time).
    nothing = measured("specdec", 0, 0.0, requests=0)
    decision = decide("", measured("none", 500, 5.0), nothing, 0.03)
    assert (decision.method, decision.speedup) == ("none", None)
    assert "measured nothing on specdec" in decision.reason
    assert decide("", measured("none", 0, 0.0, 0), measured("specdec", 10, 1.0), 0.03).method == "specdec"


def test_decisions_survive_their_json():
    decision = decide("code/py", measured("none", 100, 2.0), measured("specdec", 300, 2.0), 0.03)
    assert PilotDecision.from_dict(decision.to_dict()) == decision
    assert decision.none is not None and decision.none.tokens_per_s == 50.0


def test_the_sample_spreads_over_every_shard_and_neighbours_alternate_between_the_engines():
    shards = [ShardRequests(key, key, [GenerationRequest(f"{key}{i}", (i,), 4) for i in range(n)], None)
              for key, n in (("a", 10), ("b", 30), ("c", 24))]
    picks = sample(shards, 16)  # one in four of the 64 requests
    assert [(s.key, i) for s, i in picks] == [("a", 0), ("a", 4), ("a", 8), *(("b", i) for i in range(2, 30, 4)),
                                              *(("c", i) for i in range(0, 24, 4))]
    assert len(sample(shards[:1], 99)) == 10  # never more than there are
    chunk, leads = split(picks)
    # none takes the 1st, 3rd, ... pick as one chunk; the 2nd, 4th, ... lead specdec's stream
    assert [(s.key, s.context[1]) for s in chunk] == [("a", [0, 8]), ("b", [6, 14, 22]), ("c", [0, 8, 16])]
    assert leads == {"a": {4}, "b": {2, 10, 18, 26}, "c": {4, 12, 20}}
    ran = [(sub.context[0].key, i, r.id) for sub in chunk for i, r in zip(sub.context[1], sub.requests)]
    assert sorted([*((key, i) for key, i, _ in ran), *((key, i) for key, s in leads.items() for i in s)]) == \
        sorted((s.key, i) for s, i in picks)  # each pick once
    assert all(request_id == f"{key}{i}" for key, i, request_id in ran)


class MultiToken(TokenByToken):
    """TokenByToken making `tokens_per_step` of the same tokens per step (lossless: the same
    completion as one per step), each step taking `step_s`: a method that is that much faster."""

    tokenizer = EchoTokenizer()

    def __init__(self, method: str, tokens_per_step: int, step_s: float) -> None:
        super().__init__(max_num_seqs=2)  # run_auto's batch_size: a pilot share of 4 fills it
        self.method = method
        self.tokens_per_step = tokens_per_step
        self.one_step_s = step_s
        self.ran: list[tuple[str, int]] = []  # (row id, max tokens) of each request added

    def add_request(self, request_id, request, sampling, seed_index):
        self.ran.append((request.id, request.max_tokens))
        super().add_request(request_id, request, sampling, seed_index)

    def step(self):
        time.sleep(self.one_step_s)
        updates = {}
        for _ in range(self.tokens_per_step):
            for update in super().step():
                was = updates.get(update.request_id)
                updates[update.request_id] = dataclasses.replace(
                    update, num_new_tokens=update.num_new_tokens + (was.num_new_tokens if was else 0))
        return list(updates.values())


def fake_engines(monkeypatch, speeds: dict[str, int], together: bool = True) -> dict[str, list[MultiToken]]:
    """get_engine by method, as the engine cache: one double per method, started once (0.5 s);
    `speeds` in tokens per step; `together`: both fit at once (vLLM's CPU build)."""
    started: dict[str, list] = {"none": [], "specdec": [], "asked": []}  # asked: (method, options) per call

    def get_engine(params, **options):
        started["asked"].append((params.method, options))
        if started[params.method]:
            return started[params.method][0], 0.0
        started[params.method].append(MultiToken(params.method, speeds[params.method], 0.002))
        return started[params.method][0], 0.5

    monkeypatch.setattr(generate_mod, "get_engine", get_engine)
    monkeypatch.setattr(generate_mod, "close_other_engines", lambda params: None)
    monkeypatch.setattr(generate_mod, "engines_fit_together", lambda: together)
    return started


def generated(started, max_tokens: int = 12) -> collections.Counter:
    """How often each row id was generated to max_tokens across the engines."""
    return collections.Counter(row_id for method in ("none", "specdec") for engine in started[method]
                               for row_id, tokens in engine.ran if tokens == max_tokens)


def rows(prefix: str, n: int) -> list[PromptRow]:
    return [PromptRow(i, f"{prefix}-{i}", f"prompt {prefix} {i:03d} " + "x" * (i % 7), None, None)
            for i in range(n)]


def run_auto(shards, decided: dict[str, PilotDecision] | None = None, progress: list | None = None):
    params = GenerationParams(method="auto", prompt_format="raw", max_tokens=12, pilot_requests=8,
                              pilot_min_requests=24, batch_size=2)  # a pilot share of 4: two batches
    done, decisions = {}, []
    totals = generate_shards(shards, params, params.config_hash(), {},
                             lambda key, out, error: done.setdefault(key, (out, error)),
                             decided=decided, on_decision=decisions.append,
                             on_progress=progress.append if progress is not None else None)
    return done, decisions, totals


def shard(key: str, kind: str, n: int) -> ShardRows[str]:
    return ShardRows(key, f"shard {key}", rows(key, n), [], key, kind=kind)


def test_each_kind_runs_on_the_engine_its_pilot_measured_faster_and_keeps_the_pilots_results(monkeypatch):
    started = fake_engines(monkeypatch, {"none": 1, "specdec": 4})
    tokenized = []
    tokenize = generate_mod._tokenized
    monkeypatch.setattr(generate_mod, "_tokenized", lambda shard, *a: tokenized.append(shard.key) or tokenize(shard, *a))
    shards = [shard("code-0", "code", 16), shard("code-1", "code", 16), shard("tiny-0", "tiny", 5)]
    done, decisions, totals = run_auto(shards)
    assert sorted(tokenized) == ["code-0", "code-1", "tiny-0"]  # the pilot's shards are not tokenized again
    assert [(d.kind, d.method) for d in decisions] == [("code", "specdec"), ("tiny", "specdec")]
    assert decisions[0].speedup > 2 and decisions[0].none.num_requests == decisions[0].specdec.num_requests == 4
    assert decisions[0].basis == FULL_BATCH_STEPS  # each share of 4 filled the batch of 2
    assert 0 < decisions[0].specdec.full_batch_tokens <= decisions[0].specdec.num_output_tokens
    assert "5 requests, under the pilot's minimum of 24" in decisions[1].reason
    methods = collections.Counter()
    for key, n in (("code-0", 16), ("code-1", 16), ("tiny-0", 5)):
        out, error = done[key]
        assert error is None and out.method == "specdec"
        assert sorted(out.results.column("id").to_pylist()) == sorted(f"{key}-{i}" for i in range(n))
        methods.update(out.results.column("method").to_pylist())
    assert methods == {"specdec": 33, "none": 4}  # each row names the engine it ran on: the pilot's 4 on none
    # Every request ran exactly once: the pilot's 8 on the two engines, kept;
    # the run's specdec engine took the other 24 of kind code, and kind tiny.
    assert generated(started) == {f"{key}-{i}": 1 for key, n in (("code-0", 16), ("code-1", 16), ("tiny-0", 5))
                                  for i in range(n)}
    none_engine, specdec_engine = started["none"][0], started["specdec"][0]
    assert (len(none_engine.added), len(specdec_engine.added)) == (4, 4 + 24 + 5)  # nothing runs twice
    assert totals.num_output_tokens == 37 * 12  # the run's output, the kept pilot results among them
    pilot_s = decisions[0].none.engine_s + decisions[0].specdec.engine_s
    assert totals.busy_s > pilot_s > 0  # the user pays for the pilot: the run's engine time has it
    assert totals.wall_s > pilot_s and totals.engine_start_s == 1.0  # the pilot's wall time is the run's
    assert sum(out.engine_start_s for out, _ in done.values()) == 1.0  # both pilot starts, once
    # The pilot asks for a true none engine (the tokenizer's too) and keeps the other one up: a
    # specdec engine an earlier kind kept is never closed only to be started again, nor none while
    # specdec's share leads the stream; the small kind, no pilot, asks plainly.
    assert sorted({(method, tuple(options.items())) for method, options in started["asked"]}) == [
        ("none", (("exact", True), ("keep_others", True))), ("specdec", ()), ("specdec", (("keep_others", True),))]


@pytest.mark.parametrize("together", [True, False])
def test_a_kind_where_speculation_does_not_pay_runs_without_it(monkeypatch, together):
    started = fake_engines(monkeypatch, {"none": 2, "specdec": 1}, together)
    ran = []
    run_chunk = generate_mod.pilot.run_chunk
    monkeypatch.setattr(generate_mod.pilot, "run_chunk", lambda method, *a, **kw: ran.append(method) or run_chunk(method, *a, **kw))
    progress = []
    done, decisions, totals = run_auto([shard(f"chat-{i}", "chat", 10) for i in range(3)], progress=progress)
    assert ran == ["none"]  # none's share a chunk; specdec's leads its stream, whether the engines fit together or not
    assert [(d.kind, d.method) for d in decisions] == [("chat", "none")]
    assert decisions[0].speedup < 0.97
    assert all(out.method == "none" and out.results.num_rows == 10 for out, _ in done.values())
    assert generated(started) == {f"chat-{s}-{i}": 1 for s in range(3) for i in range(10)}
    # Nothing runs twice: specdec's stream took its 4 leads and, as they finished, 2 more, which it
    # finished once it lost; none took its 4 of the pilot and the other 20.
    assert (len(started["none"][0].added), len(started["specdec"][0].added)) == (4 + 20, 4 + 2)
    methods = collections.Counter(m for out, _ in done.values() for m in out.results.column("method").to_pylist())
    assert methods == {"none": 24, "specdec": 6}  # each row names the engine it ran on
    # The shards specdec handed back are counted once: by the stream that finished them.
    assert (totals.num_output_tokens, len(progress)) == (30 * 12, 30)


def test_a_resumed_run_keeps_its_decisions_without_a_pilot(monkeypatch):
    started = fake_engines(monkeypatch, {"none": 1, "specdec": 4})
    earlier = PilotDecision("code", "none", "code: chosen earlier", 0.9, 0.03)
    done, decisions, _ = run_auto([shard("code-0", "code", 30)], decided={"code": earlier})
    assert decisions == []  # nothing new decided
    assert started["specdec"] == [] and len(started["none"][0].added) == 30
    assert done["code-0"][0].decision == earlier


def test_rows_that_cannot_run_shrink_the_pilot_to_a_skip(monkeypatch):
    started = fake_engines(monkeypatch, {"none": 1, "specdec": 4})
    broken = ShardRows("bad", "shard bad", [], [], "bad", ValueError("bad shard: unreadable"), kind="k")
    done, decisions, _ = run_auto([broken, shard("k-0", "k", 12)])
    assert [d.method for d in decisions] == ["specdec"] and decisions[0].speedup is None
    assert isinstance(done["bad"][1], ValueError) and done["k-0"][0].results.num_rows == 12
    assert started["none"] == []  # a skip starts no speculation-free engine
