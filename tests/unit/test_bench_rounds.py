"""The real-engine bench without an engine: round scheduling, the prefill pass before the
clock, cold caches per measurement, ratios to `none` with their spread, and how many engines
memory lets it keep alive (a recording double stands in for VllmEngine)."""

import os
from pathlib import Path

import pytest

from specdec.bench import engine_memory, throughput
from specdec.bench.rounds import Step, Timing, schedule, summarize
from specdec.bench.throughput_report import render_table
from specdec.config import EngineConfig
from specdec.engines import vllm_engine
from specdec.types import GenerationRequest
from support.recording_engine import RecordingEngine

REQUESTS = [GenerationRequest(f"p{i}", (1, 2, 3), 4) for i in range(20)]
WARMUP = [GenerationRequest("w", (4, 5), 4)]


def test_every_round_alternates_all_methods_and_rotates_their_order():
    steps = schedule(["none", "ngram", "specdec"], [1, 16], 3, all_alive=True)
    assert len(steps) == 3 * 2 * 3
    # alive: the methods alternate at every batch size, each round in a rotated order
    assert steps[:3] == [Step(0, "none", 1), Step(0, "ngram", 1), Step(0, "specdec", 1)]
    assert [s.method for s in steps if s.round == 1][:3] == ["ngram", "specdec", "none"]
    for r in range(3):
        for b in (1, 16):
            assert sorted(s.method for s in steps if (s.round, s.batch_size) == (r, b)) == ["ngram", "none", "specdec"]
    # one engine at a time: a method's batch sizes run together, once per round
    fallback = schedule(["none", "ngram"], [1, 16], 2, all_alive=False)
    assert fallback == [Step(0, "none", 1), Step(0, "none", 16), Step(0, "ngram", 1), Step(0, "ngram", 16),
                        Step(1, "ngram", 1), Step(1, "ngram", 16), Step(1, "none", 1), Step(1, "none", 16)]
    with pytest.raises(ValueError):
        schedule(["none"], [1], 0, all_alive=True)


def test_ratios_pair_each_round_with_none_of_the_same_round():
    # Round 1 is slow for everyone: the per-round ratio stays 2.0 there.
    timings = [Timing(0, "none", 1, 100, 1.0, 10.0), Timing(0, "ngram", 1, 100, 1.0, 5.0),
               Timing(1, "none", 1, 100, 1.0, 40.0), Timing(1, "ngram", 1, 100, 1.0, 20.0),
               Timing(2, "none", 1, 100, 1.0, 10.0), Timing(2, "ngram", 1, 100, 1.0, 4.0)]
    none, ngram = summarize(timings)
    assert none.decode_ratio.median == 1.0 and none.rounds == 3
    assert (ngram.decode_ratio.median, ngram.decode_ratio.low, ngram.decode_ratio.high) == (2.0, 2.0, 2.5)
    assert ngram.decode_tokens_per_s.median == 20.0  # 100 tokens in 5 s
    assert ngram.tokens_per_s.median == pytest.approx(100 / 6)  # prefill counted end to end
    assert ngram.ratio.median == pytest.approx(41 / 21)  # end to end: 11/6, 41/21, 11/5
    assert summarize([Timing(0, "ngram", 1, 10, 1.0, 1.0)])[0].ratio is None  # no none to compare with


def test_memory_keeps_all_engines_alive_only_where_they_fit():
    per_token = 23_040  # SmolLM2-135M's KV bytes per token in bfloat16
    small = engine_memory.plan(5, 4, 500, per_token, kv_cache_gib=2.0, weights_gib=0.3, available_gib=64.0)
    assert small.all_alive and small.engines_alive == 5 and "all 5 engines" in small.describe()
    big = engine_memory.plan(5, 64, 2048, 2 * per_token, kv_cache_gib=6.0, weights_gib=0.3, available_gib=20.0)
    assert big.kv_need_gib == pytest.approx(64 * 2048 * 2 * per_token / 2**30)  # about 5.6 GiB
    assert not big.all_alive and big.engines_alive == 2
    assert "one engine at a time" in big.describe()
    short = engine_memory.plan(2, 64, 2048, 2 * per_token, kv_cache_gib=2.0, weights_gib=0.3, available_gib=64.0)
    assert "raise --kv-cache-gib" in short.describe()
    assert engine_memory.plan(3, 1, 10, 1, 2.0, 0.3, available_gib=0.0).engines_alive == 1


def _run(monkeypatch, names, all_alive, rounds=2, warm_from=(), variants=None, engine_env=None):
    monkeypatch.setattr(vllm_engine, "VllmEngine", RecordingEngine)
    RecordingEngine.clear()
    specs = throughput.engine_methods(4)
    methods = {n: specs[n] for n in names} | {v: specs[base] for v, base in (variants or {}).items()}
    return throughput.run_rounds(methods, EngineConfig(max_model_len=2048), REQUESTS, WARMUP,
                                 [1, 16], rounds, "d", all_alive, min_prompts=8, warm_from=warm_from,
                                 engine_env=engine_env)


def test_a_variant_engine_starts_with_its_own_variables_and_only_it(monkeypatch):
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    variant = "none[gomp-spin=300000]"
    records = _run(monkeypatch, ["none"], all_alive=False, variants={variant: "none"},
                   engine_env={variant: {"GOMP_SPINCOUNT": "300000"}})
    spins = [e.environ.get("GOMP_SPINCOUNT") for e in RecordingEngine.started]
    assert spins.count("300000") == 2 and spins.count(None) == 2  # one start per round each, alternating
    assert "GOMP_SPINCOUNT" not in os.environ  # put back after the variant's start
    assert {(r.method, r.batch_size) for r in records} == {(m, b) for m in ("none", variant) for b in (1, 16)}
    assert all(r.speedup_vs_none is not None for r in records)  # the variant is set against none


def test_prompts_are_prefilled_and_the_cache_reset_before_the_clock(monkeypatch):
    records = _run(monkeypatch, ["none", "specdec", "suffix"], all_alive=True)
    by_method = {}
    for engine in RecordingEngine.started:
        by_method.setdefault(engine.spec.method, []).append(engine)
    # kept alive through both rounds; suffix's cache cannot be cleared: a fresh engine per measurement
    assert len(by_method["none"]) == len(by_method["specdec"]) == 1
    assert len(by_method["suffix"]) == 2 * 2
    assert all(e.closed for e in RecordingEngine.started)
    for engine in by_method["specdec"]:
        events = [e[1:] for e in RecordingEngine.log if e[0] == engine.serial]
        assert events[:2] == [("start",), ("generate", 1, 4)]  # warmed up on other prompts
        measured = events[2:-1]
        # each measurement: an empty prefix cache, the prefill pass (max_tokens=1), a cold
        # cross-request cache, then the timed pass (drafting never switched: no baseline here)
        assert measured == [("reset_prefix_cache",), ("generate", 8, 1), ("reset",), ("generate", 8, 4),
                            ("reset_prefix_cache",), ("generate", 16, 1), ("reset",), ("generate", 16, 4)] * 2
        # the timed pass never drafts from earlier measured prompts (nor the prefill's outputs)
        assert all(cache == [] for cache in engine.cache_at_reset)
    assert [(r.method, r.batch_size, r.num_requests, r.rounds) for r in records] == [
        ("none", 1, 8, 2), ("specdec", 1, 8, 2), ("suffix", 1, 8, 2),
        ("none", 16, 16, 2), ("specdec", 16, 16, 2), ("suffix", 16, 16, 2)]
    assert all(r.outputs_identical_to_none for r in records)
    assert all(r.decode_tokens_per_s > 0 and r.decode_speedup_min <= r.decode_speedup_vs_none <= r.decode_speedup_max
               for r in records)
    assert "fresh engine per measurement" in records[2].started_from
    table = render_table(records)
    assert "decode/s" in table and "e2e/s" in table and "2 interleaved round(s)" in table


def test_without_memory_for_all_one_engine_runs_at_a_time(monkeypatch):
    _run(monkeypatch, ["none", "ngram"], all_alive=False, rounds=2)
    assert [e.spec.method for e in RecordingEngine.started] == ["none", "ngram", "ngram", "none"]
    alive = set()
    for serial, event, *_ in RecordingEngine.log:
        alive = alive | {serial} if event == "start" else alive - {serial} if event == "close" else alive
        assert len(alive) <= 1


def test_warm_method_starts_every_measurement_from_one_snapshot(monkeypatch):
    warm_from = [GenerationRequest(f"old{i}", (6, 7), 4) for i in range(5)]
    records = _run(monkeypatch, ["specdec[warm]"], all_alive=True, warm_from=warm_from)
    [engine] = RecordingEngine.started
    assert engine.calls[:2] == [(1, None), (5, None)]  # warm-up, then the warm set in one go
    old = [r.id for r in warm_from]
    # the warm set's run starts cold; every measurement starts from exactly its cache
    assert engine.cache_at_reset == [[]] + [old] * 4
    assert all("5 other prompts" in r.started_from for r in records)
    assert not Path(engine.spec.cache_file).parent.exists()  # the bench's own folder is cleaned up
    with pytest.raises(ValueError, match="needs prompts"):
        _run(monkeypatch, ["specdec[warm]"], all_alive=True)


def test_the_no_drafts_baseline_runs_on_specdecs_own_engine_with_drafting_off(monkeypatch):
    names = ["none", "specdec", "specdec[no-drafts]"]
    records = _run(monkeypatch, names, all_alive=True)
    assert [e.spec.method for e in RecordingEngine.started] == ["none", "specdec"]  # no engine of its own
    specdec = RecordingEngine.started[1].serial
    # Drafting is off for exactly the baseline's timed passes (2 rounds x 2 batch sizes each),
    # switched only where it changes (every engine starts drafting).
    timed_drafting = [drafting for serial, method, drafting in _timed_passes() if serial == specdec]
    assert sorted(timed_drafting) == [False] * 4 + [True] * 4
    switches = [e[2] for e in RecordingEngine.log if e[:2] == (specdec, "drafting")]
    assert switches == [False, True] * (len(switches) // 2) + [False] * (len(switches) % 2)
    by_method = {(r.method, r.batch_size): r for r in records}
    for b in (1, 16):
        ours = by_method[("specdec", b)]
        assert ours.decode_speedup_vs_no_drafts_min <= ours.decode_speedup_vs_no_drafts <= ours.decode_speedup_vs_no_drafts_max
        assert by_method[("specdec[no-drafts]", b)].decode_speedup_vs_no_drafts is None
        assert by_method[("none", b)].decode_speedup_vs_no_drafts is None
    assert "specdec batch 16: decode" in render_table(records) and "drafting off" in render_table(records)
    # one engine at a time: specdec's engine serves both within a round, started once per round
    _run(monkeypatch, names, all_alive=False)
    assert [e.spec.method for e in RecordingEngine.started] == ["none", "specdec", "specdec", "none"]


def test_the_no_drafts_baseline_without_specdec_gets_an_engine_of_its_own(monkeypatch):
    _run(monkeypatch, ["none", "specdec[no-drafts]"], all_alive=True)
    [_, own] = RecordingEngine.started
    assert own.spec.method == "specdec"
    assert {e[2] for e in RecordingEngine.log if e[:2] == (own.serial, "drafting")} == {False}
    assert [d for serial, _, d in _timed_passes() if serial == own.serial] == [False] * 4


def _timed_passes() -> list[tuple[int, str, bool]]:
    """(engine serial, "generate", drafting on) for every timed pass (max_tokens 4), from
    the recording engines' log: the drafting state each one ran with."""
    drafting: dict[int, bool] = {}
    passes = []
    for serial, event, *args in RecordingEngine.log:
        if event == "start":
            drafting[serial] = True
        elif event == "drafting":
            drafting[serial] = args[0]
        elif event == "generate" and args[1] == 4 and args[0] != 1:  # not the 1-prompt warm-up
            passes.append((serial, event, drafting[serial]))
    return passes


def test_drafting_is_set_against_its_own_engine_with_drafting_off_in_the_same_round():
    timings = [Timing(0, "specdec", 1, 100, 1.0, 5.0), Timing(0, "specdec[no-drafts]", 1, 100, 1.0, 10.0),
               Timing(1, "specdec", 1, 100, 1.0, 30.0), Timing(1, "specdec[no-drafts]", 1, 100, 1.0, 20.0),
               Timing(2, "specdec", 1, 100, 1.0, 8.0)]  # round 2 has no baseline: not paired
    ours, off = summarize(timings)
    ratio = ours.decode_ratio_to_no_drafts
    assert (ratio.median, ratio.low, ratio.high) == (pytest.approx(1.3333333), pytest.approx(2 / 3), 2.0)
    assert off.decode_ratio_to_no_drafts is None and ours.decode_ratio is None  # no none measured
