"""Method auto on the projection: the engine specdec.pilot picks for the kind, its pilot's share
on the other engine included, specdec chosen only past the margin (synthetic rates; then the
table and the bench option)."""

import dataclasses

import pytest

from bench import compare
from bench.cost_models import CostModel
from bench.drafters import all_methods
from bench.projection import AutoPilot, project, render_projection_table
from specdec.step_cost import StepCost
from support.bench_cli import specdec_main
from support.replay_requests import synthetic_requests

PILOT = AutoPilot(requests=32, margin=0.03, min_requests=256, run_requests=2000)
TOKENS = 100.0  # output tokens per request


def test_specdec_winning_clearly_runs_the_kind_and_pays_nones_share_of_the_pilot():
    method, rate = PILOT.figure(100.0, 150.0, TOKENS)
    # 16 of the 32-request sample on none, the other 1984 requests on specdec: nothing runs twice
    seconds = 1984 * TOKENS / 150.0 + 16 * TOKENS / 100.0
    assert method == "specdec"
    assert rate == pytest.approx(2000 * TOKENS / seconds)
    assert 145.0 < rate < 150.0


@pytest.mark.parametrize("specdec_tokens_per_s", [90.0, 102.0, 103.0])  # 103: exactly the margin, not past it
def test_within_the_margin_auto_runs_none_with_specdecs_share_of_the_pilot(specdec_tokens_per_s):
    method, rate = PILOT.figure(100.0, specdec_tokens_per_s, TOKENS)
    seconds = 1984 * TOKENS / 100.0 + 16 * TOKENS / specdec_tokens_per_s
    assert method == "none"
    assert rate == pytest.approx(2000 * TOKENS / seconds)
    # no request runs twice: auto is below none only by the pilot's share on a slower specdec
    assert (rate < 100.0) == (specdec_tokens_per_s < 100.0)


def test_the_pilot_share_fades_with_the_run():
    for specdec_rate, chosen, limit in ((90.0, "none", 100.0), (101.0, "none", 100.0), (150.0, "specdec", 150.0)):
        figures = [dataclasses.replace(PILOT, run_requests=n).figure(100.0, specdec_rate, TOKENS)
                   for n in (500, 2000, 8000, 32000)]
        assert {method for method, _ in figures} == {chosen}
        rates = [rate for _, rate in figures]
        other_faster = specdec_rate > 100.0 and chosen == "none"
        assert rates == sorted(rates, reverse=other_faster) and len(set(rates)) == 4
        assert rates[-1] == pytest.approx(limit, rel=1e-3)


def test_a_kind_under_the_minimum_runs_specdec_without_a_pilot_even_when_it_loses():
    assert dataclasses.replace(PILOT, run_requests=255).figure(100.0, 90.0, TOKENS) == ("specdec", 90.0)


def gpu(host_s: float) -> CostModel:
    return CostModel("gpu", StepCost(0.01, 0.0, 1e-6, 1e-7), 0.001, 4096, "test", host_s=host_s)


def test_the_table_shows_auto_per_run_size_and_the_engine_it_chooses():
    requests = synthetic_requests(6, 0, max_tokens=40)
    methods = [m for name, m in all_methods().items() if name in ("none", "specdec")]
    # a host term of 20 forwards: specdec cannot pay it back, auto runs none and is below it by its pilot
    recs = project(requests, "s", methods, [2], [1, 4], [gpu(0.2)], 4096)
    pilots = [dataclasses.replace(PILOT, run_requests=n) for n in (300, 5000)]
    table = render_projection_table(recs, pilots)
    rows = [r for r in (line.split() for line in table.splitlines()) if r[2:3] and r[2].startswith("auto[")]
    assert [r[:4] for r in rows] == [[b, "-", f"auto[{n}]", "none"] for b in ("1", "4") for n in (300, 5000)]
    assert all(r[-2:] == ["BELOW", "none"] for r in rows)
    ratios = [float(r[7]) for r in rows]  # the x none column
    assert ratios[0] < ratios[1] <= 1.0 and ratios[2] < ratios[3] <= 1.0
    assert "pilot running 32 of them, half on none and half on specdec (margin 3%)" in table
    assert "auto" not in render_projection_table(recs)


def test_bench_command_prices_auto_for_the_run_sizes_asked(monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    monkeypatch.setattr(compare, "_reference", lambda *args, **kw: [synthetic_requests(4, 0, max_tokens=20)])
    argv = ["bench", "--engine", "replay", "--input", "humaneval", "--limit", "2", "--k", "2", "--batch-sizes", "1",
            "--methods", "specdec", "--cost", "h100-llama3-8b", "--auto-requests", "100,3000"]
    assert main(argv) == 0
    printed = capfd.readouterr().out
    # 100 requests: under the pilot's minimum, specdec without a pilot
    assert "auto[100] specdec" in printed and "auto[3000] " in printed
    assert "its pilot running 64 of them, half on none and half on specdec (margin 3%)" in printed  # the defaults
