"""The GPU projection's host term: paid every step by the methods vLLM schedules
synchronously on a GPU, overlapped by `none`'s async scheduling."""

import dataclasses
import json

import pytest

from bench import compare, cost_models, projection
from bench.cost_models import CPU_CALIBRATED, H100_LLAMA3_8B, CostModel, h100_llama3_8b, price, resolve
from bench.drafters import NGRAM_DRAFT, Method, all_methods, fixed_k
from bench.projection import project, render_projection_table, simulate_and_price
from specdec.step_cost import StepCost
from support.bench_cli import specdec_main
from support.replay_requests import Lookup, synthetic_requests

LOOKUP = Method("ngram", fixed_k("ngram", lambda: Lookup(2, 5)), NGRAM_DRAFT)


def gpu(host_s: float, name: str = "gpu") -> CostModel:
    return CostModel(name, StepCost(0.01, 0.0, 1e-6, 1e-7), 0.001, 4096, "test", host_s=host_s)


def methods(*names: str) -> list[Method]:
    return [m for name, m in all_methods().items() if name in names] + [LOOKUP]


def test_synchronous_methods_pay_the_host_term_every_step_and_none_does_not():
    requests = synthetic_requests(6, 0, max_tokens=40)
    for method in methods("none"):
        [with_host] = simulate_and_price(requests, method, 4, 2, [gpu(0.003)], 4096)
        [without] = simulate_and_price(requests, method, 4, 2, [gpu(0.0)], 4096)
        extra = with_host.priced.seconds - without.priced.seconds
        assert extra == pytest.approx(0.003 * with_host.priced.num_steps if method.synchronous else 0.0)
    assert [m.synchronous for m in methods("none")] == [False, True]


def test_the_budget_learns_the_host_term_with_the_step(monkeypatch):
    seen = []
    real = projection.SimulatedStepTimer

    def spy(cost, *args):
        seen.append(cost)
        return real(cost, *args)

    monkeypatch.setattr(projection, "SimulatedStepTimer", spy)
    simulate_and_price(synthetic_requests(4, 0, max_tokens=20), all_methods()["specdec"], 4, 2, [gpu(0.003)], 4096)
    [learned] = seen
    assert learned.seconds(1, 1, 100) == pytest.approx(gpu(0.0).seconds(1, 1, 100) + 0.003)


def test_h100_default_is_the_interpolated_async_gain_times_the_batch_one_step():
    cost = h100_llama3_8b()
    assert cost_models.H100_LLAMA3_8B_ASYNC_GAIN == pytest.approx(0.064)
    assert cost.host_s == pytest.approx(0.064 * 7.154e-3, rel=1e-3)
    assert cost.run_by(False).seconds(1, 1, 1024) == pytest.approx(cost.seconds(1, 1, 1024))
    assert cost.run_by(True).seconds(1, 1, 1024) == pytest.approx(1.064 * cost.seconds(1, 1, 1024))


def test_the_override_replaces_it_zero_turns_it_off_and_a_cpu_model_never_pays_one(tmp_path):
    assert resolve(H100_LLAMA3_8B, host_s=0.002).host_s == 0.002
    off = resolve(H100_LLAMA3_8B, host_s=0.0)
    assert off.run_by(True) == dataclasses.replace(off, host_s=0.0) == off
    calibrated = gpu(0.0, CPU_CALIBRATED)
    assert resolve(CPU_CALIBRATED, calibrated, host_s=0.002).host_s == 0.0
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"per_kv_token_s": 1e-7, "per_token_s": 1e-5, "fixed_s": 0.01,
                                "per_step_overhead_s": 0.0, "host_s": 0.0005}))
    assert resolve(str(path)).host_s == 0.0005 and resolve(str(path), host_s=0.0).host_s == 0.0
    with pytest.raises(Exception, match="host term"):
        resolve(H100_LLAMA3_8B, host_s=-1.0)


def test_zero_gives_the_figures_without_the_term():
    requests = synthetic_requests(6, 0, max_tokens=40)
    picked = methods("none", "oracle")
    off = project(requests, "s", picked, [2], [1, 4], [gpu(0.0)], 4096)
    on = project(requests, "s", picked, [2], [1, 4], [gpu(0.002)], 4096)
    rate = lambda recs: {(r.method, r.batch_size): r.projected_tokens_per_s for r in recs}  # noqa: E731
    assert rate(off) != rate(on)
    assert {k: v for k, v in rate(on).items() if k[0] == "none"} == {k: v for k, v in rate(off).items() if k[0] == "none"}
    assert "(async)" not in render_projection_table(off) and "none (async)" in render_projection_table(on)


def test_the_table_marks_a_method_below_none_async():
    # a host term of 20 forwards: no drafter's tokens per forward can pay it back
    recs = project(synthetic_requests(6, 0, max_tokens=40), "s", methods("none", "specdec"), [2], [1], [gpu(0.2)], 4096)
    table = render_projection_table(recs)
    assert all(r.speedup_vs_none < 1 for r in recs if r.method != "none")
    lines = [line for line in table.splitlines() if "  ngram" in line or "  specdec" in line]
    assert lines and all("BELOW none" in line for line in lines)
    assert "specdec" in table and "x none (async) (BELOW none)" in table


def test_bench_command_takes_the_host_term(tmp_path, monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    monkeypatch.setattr(compare, "_reference", lambda *args, **kw: [synthetic_requests(4, 0, max_tokens=20)])
    out = tmp_path / "bench.json"
    argv = ["bench", "--engine", "replay", "--input", "humaneval", "--limit", "2", "--k", "2", "--batch-sizes", "1",
            "--methods", "oracle", "--cost", H100_LLAMA3_8B, "--host-s", "0.25", "--json", str(out)]
    assert main(argv) == 0
    assert "host term of 250.000 ms per step" in capfd.readouterr().out
    rows = json.loads(out.read_text())
    assert {(r["method"], r["host_s"], r["synchronous"]) for r in rows} == {("none", 0.25, False), ("oracle", 0.25, True)}


def test_the_run_mode_adds_it_to_a_synchronous_methods_step():
    from bench.run_replay import replayed_jobs

    requests = synthetic_requests(4, 0, max_tokens=20)
    for method in methods("none"):
        _, with_host = replayed_jobs(requests, method, 2, 2, gpu(0.003), 4096)
        _, without = replayed_jobs(requests, method, 2, 2, gpu(0.0), 4096)
        assert with_host - without == pytest.approx(0.003 if method.synchronous else 0.0, abs=1e-4)
