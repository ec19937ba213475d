"""The step breakdown's arithmetic on scripted step records (the recorder itself runs on the
real engine in tests/engine/test_bench_engine.py)."""

from __future__ import annotations

import pytest

from specdec.bench.step_breakdown import (
    StepWindow,
    breakdown,
    decode_steps,
    matched_ratio,
    matched_ratios,
    outside_steps_s,
    render_breakdown,
)
from specdec.engines.step_profile import StepRecord


def record(started: float, seconds: float, drafts: int = 0, seqs: int = 1, prefill: int = 0,
           propose: float = 0.0) -> StepRecord:
    """A step whose forward takes `seconds` and whose sampling takes 1 ms (the drafter in it)."""
    return StepRecord(started, seconds, 0.001, propose, seqs, seqs + drafts + prefill, drafts)


def window(steps, method="m", batch_size=1, round_=0, started=0.0, ended=None, requests=1) -> StepWindow:
    ended = max(s.ended for s in steps) if ended is None else ended
    return StepWindow(round_, method, batch_size, started, ended, requests, tuple(steps))


def test_a_decode_step_is_its_forward_sampling_and_the_gap_before_it():
    steps = [record(1.0, 0.2, prefill=30), record(1.3, 0.1, drafts=2), record(1.5, 0.1, drafts=1)]
    timed = decode_steps(window(steps, started=0.5, ended=2.0))
    # the prefill step is no decode step; the first decode step's gap is from the prefill's end
    assert [t.record.started for t in timed] == [1.3, 1.5]
    assert timed[0].core_gap_s == pytest.approx(1.3 - 1.201)
    assert timed[0].seconds == pytest.approx(1.3 - 1.201 + 0.101)
    # outside: before the prefill step, the prefill step's own gap, after the last step
    assert outside_steps_s(window(steps, started=0.5, ended=2.0)) == pytest.approx(0.5 + 0.0 + (2.0 - 1.601))


def test_gaps_before_a_prefill_step_count_outside_steps():
    steps = [record(0.0, 0.1, drafts=1), record(0.3, 0.1, prefill=9), record(0.5, 0.1, drafts=1)]
    w = window(steps, started=0.0, ended=0.601)
    assert [t.record.started for t in decode_steps(w)] == [0.5]
    assert outside_steps_s(w) == pytest.approx(0.601 - 3 * 0.101 - (0.5 - 0.401))


def test_matched_ratio_weighs_shared_draft_counts_by_the_compared_methods_steps():
    def steps(spec):  # spec: [(drafts, seconds, count)]
        out, t = [], 0.0
        for drafts, seconds, count in spec:
            for _ in range(count):
                out.append(record(t, seconds - 0.001, drafts=drafts))
                t += seconds
        return decode_steps(window(out))

    ours = steps([(5, 0.060, 21), (3, 0.050, 10), (1, 0.040, 9)])  # draft count 1: too few to compare
    theirs = steps([(5, 0.050, 11), (3, 0.050, 30), (1, 0.010, 30)])
    # every step follows the previous one directly: step time = forward + sampling
    expected = (20 * 0.060 + 10 * 0.050) / (20 * 0.050 + 10 * 0.050)  # ours' first step is not timed
    assert matched_ratio(ours, theirs) == pytest.approx(expected)
    assert matched_ratio(ours, steps([(2, 0.05, 30)])) is None  # no draft count in common


def test_with_several_rows_steps_match_by_whole_draft_tokens_per_row():
    def steps(drafts_and_seconds):
        out, t = [], 0.0
        for drafts, seconds in drafts_and_seconds:  # back to back: step time = forward + sampling
            out.append(record(t, seconds - 0.001, drafts=drafts, seqs=4))
            t += seconds
        return decode_steps(window(out))

    ours = steps([(0, 0.1)] + [(9, 0.2)] * 10 + [(13, 0.4)] * 10)  # 9 and 13 drafts: 2 and 3 per row
    theirs = steps([(0, 0.1)] + [(10, 0.1)] * 10 + [(12, 0.2)] * 10)  # 10 and 12: 2 and 3 per row
    assert matched_ratio(ours, theirs) == pytest.approx((0.2 + 0.4) / (0.1 + 0.2))


def test_matched_ratios_pair_rounds_and_breakdown_reports_every_method():
    def run(method, round_, seconds):
        return window([record(i * seconds, seconds - 0.001, drafts=4, propose=0.0005) for i in range(11)],
                      method=method, round_=round_)

    windows = [run("specdec", 0, 0.06), run("ngram[2..5]", 0, 0.05),
               run("specdec", 1, 0.05), run("ngram[2..5]", 1, 0.05)]
    spread = matched_ratios(windows, "specdec", "ngram[2..5]")[1]
    assert (spread.low, spread.high) == (pytest.approx(1.0), pytest.approx(1.2))
    rows = {b.method: b for b in breakdown(windows)}
    assert rows["specdec"].num_steps == 20 and rows["specdec"].draft_tokens == 4
    assert rows["ngram[2..5]"].propose_s == pytest.approx(0.0005)
    assert rows["ngram[2..5]"].sample_s == pytest.approx(0.0005)  # sampling without the drafter
    text = render_breakdown(windows)
    assert "| specdec | 1 | 20 | 4.00 |" in text and "batch 1: 1.100 over all rounds; per round median 1.100 (1.000-1.200)" in text
    # the matched group behind the ratio, pooled over the rounds (median of 50 and 60 ms steps: 55)
    assert "  1 row(s), 4 draft token(s) per row: 55.00 ms (20 steps) against 50.00 ms (20)" in text
