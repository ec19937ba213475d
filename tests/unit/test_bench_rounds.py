"""The real-engine bench without an engine: round scheduling, the prefill pass before the
clock, cold caches per measurement, ratios to `none` with their spread (a recording double
stands in for VllmEngine)."""

import pytest

from bench import throughput
from bench.throughput import Spread, Timing, schedule, summarize
from bench.throughput import render_table
from specdec.config import EngineConfig
from specdec.engines import vllm_engine
from specdec.types import GenerationRequest
from support.recording_engine import RecordingEngine

REQUESTS = [GenerationRequest(f"p{i}", (1, 2, 3), 4) for i in range(20)]
WARMUP = [GenerationRequest("w", (4, 5), 4)]


def test_every_round_alternates_all_methods_and_rotates_their_order():
    steps = schedule(["none", "ngram", "specdec"], [1, 16], 3)
    assert len(steps) == 3 * 2 * 3
    # the methods alternate at every batch size, each round in a rotated order
    assert steps[:3] == [(0, "none", 1), (0, "ngram", 1), (0, "specdec", 1)]
    assert [m for r, m, _ in steps if r == 1][:3] == ["ngram", "specdec", "none"]
    for r in range(3):
        for b in (1, 16):
            assert sorted(m for r_, m, b_ in steps if (r_, b_) == (r, b)) == ["ngram", "none", "specdec"]
    with pytest.raises(ValueError):
        schedule(["none"], [1], 0)


def test_ratios_pair_each_round_with_none_of_the_same_round():
    # Round 1 is slow for everyone: the per-round ratio stays 2.0 there.
    timings = [Timing(0, "none", 1, 100, 1.0, 10.0), Timing(0, "ngram", 1, 100, 1.0, 5.0),
               Timing(1, "none", 1, 100, 1.0, 40.0), Timing(1, "ngram", 1, 100, 1.0, 20.0),
               Timing(2, "none", 1, 100, 1.0, 10.0), Timing(2, "ngram", 1, 100, 1.0, 4.0)]
    none, ngram = summarize(timings, ("none", 1)), summarize(timings, ("ngram", 1))
    assert none["decode_speedup_vs_none"].median == 1.0 and none["rounds"] == 3
    assert ngram["decode_speedup_vs_none"] == Spread(2.0, 2.0, 2.5)
    assert ngram["decode_speedup_vs_none"].span() == "2.00-2.50"
    assert ngram["decode_tokens_per_s"] == 20.0  # 100 tokens in 5 s
    assert ngram["tokens_per_s"] == pytest.approx(100 / 6)  # prefill counted end to end
    assert ngram["speedup_vs_none"].median == pytest.approx(41 / 21)  # end to end: 11/6, 41/21, 11/5
    assert summarize([Timing(0, "ngram", 1, 10, 1.0, 1.0)], ("ngram", 1))["speedup_vs_none"] is None  # no none


def _run(monkeypatch, names, rounds=2):
    monkeypatch.setattr(vllm_engine, "VllmEngine", RecordingEngine)
    RecordingEngine.clear()
    specs = throughput.engine_methods(4)
    return throughput.run_rounds({n: specs[n] for n in names}, EngineConfig(max_model_len=2048), [REQUESTS], WARMUP,
                                 [1, 16], rounds, "d", min_prompts=8)


def test_prompts_are_prefilled_and_the_cache_reset_before_the_clock(monkeypatch):
    records = _run(monkeypatch, ["none", "specdec", "suffix"])
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
        # cross-request cache, then the timed pass
        assert measured == [("reset_prefix_cache",), ("generate", 8, 1), ("reset",), ("generate", 8, 4),
                            ("reset_prefix_cache",), ("generate", 16, 1), ("reset",), ("generate", 16, 4)] * 2
        # the timed pass never drafts from earlier measured prompts (nor the prefill's outputs)
        timed = [cache for n, cache in zip(engine.calls, engine.cache_at_generate) if n > 1][1::2]
        assert len(timed) == 4 and all(cache == [] for cache in timed)
    assert [(r.method, r.batch_size, r.num_requests, r.rounds) for r in records] == [
        ("none", 1, 8, 2), ("specdec", 1, 8, 2), ("suffix", 1, 8, 2),
        ("none", 16, 16, 2), ("specdec", 16, 16, 2), ("suffix", 16, 16, 2)]
    assert all(r.outputs_identical_to_none for r in records)
    assert all(r.decode_tokens_per_s > 0 and _within(r.decode_speedup_vs_none)
               for r in records)
    assert "fresh engine per measurement" in records[2].started_from
    table = render_table(records)
    assert "decode/s" in table and "e2e/s" in table and "2 interleaved round(s)" in table


def _within(spread: Spread) -> bool:
    return spread.low <= spread.median <= spread.high
