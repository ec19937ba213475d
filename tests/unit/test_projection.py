"""Projected throughput: every method priced the same way, best K per batch size, tables,
plots and the `specdec bench --engine replay --cost` wiring (scripted references, no clock)."""

import json

import numpy as np
import pytest

from bench import compare
from bench.cost_models import CostModel, h100_llama3_8b
from bench.drafters import NGRAM_DRAFT, OUR_DRAFT, Method, all_methods, fixed_k, oracle
from bench.projection import project
from bench.projection import render_projection_table, shown
from bench.replay import ReplayRequest
from specdec.step_cost import StepCost
from support.bench_cli import specdec_main
from support.replay_requests import Lookup, synthetic_requests

REQUIRED = ("dataset", "method", "k_max", "batch_size", "cost_model", "projected_tokens_per_s", "speedup_vs_none")


def synthetic(n: int = 10, seed: int = 0) -> list[ReplayRequest]:
    return synthetic_requests(n, seed, max_tokens=40)


def scripted(name: str, per_token_s: float) -> CostModel:
    return CostModel(name, StepCost(0.01, 0.0, per_token_s, 1e-7), 0.0, 4096, "test")


# Our own numpy lookup stands in for vLLM's n-gram drafter (importing vLLM and compiling
# its numba code takes tens of seconds); the projection treats both alike.
LOOKUP = Method("ngram", fixed_k("ngram", lambda: Lookup(2, 5)), NGRAM_DRAFT)


@pytest.fixture(scope="module")
def records():
    methods = [m for name, m in all_methods().items() if name in ("none", "specdec", "oracle")] + [LOOKUP]
    costs = [scripted("weights-bound", 1e-6), scripted("compute-bound", 5e-3)]
    return project(synthetic(), "synthetic", methods, [1, 2, 4], [1, 4, 16], costs, 4096)


def test_every_method_is_priced_at_every_batch_size_and_k_with_what_the_json_needs(records):
    # batch 16 > 10 prompts: skipped (every prompt is used once, never repeated)
    assert {r.batch_size for r in records} == {1, 4}
    for cost in ("weights-bound", "compute-bound"):
        for batch in (1, 4):
            at = [r for r in records if r.cost_model == cost and r.batch_size == batch]
            assert sorted((r.method, r.k_max) for r in at) == sorted(
                [("none", 0), ("specdec", 4)] + [(m, k) for m in ("ngram", "oracle") for k in (1, 2, 4)])
            assert all(r.outputs_identical_to_none for r in at)
            [none] = [r for r in at if r.method == "none"]
            assert none.speedup_vs_none == 1.0 and none.mean_drafted_tokens_per_step == 0.0
    for r in records:
        assert all(getattr(r, f) is not None for f in REQUIRED)
        assert r.speedup_vs_none == pytest.approx(r.projected_tokens_per_s / next(
            n.projected_tokens_per_s for n in records
            if n.method == "none" and (n.batch_size, n.cost_model) == (r.batch_size, r.cost_model)))
    assert max(r.mean_running for r in records if r.batch_size == 4) <= 4.0


def test_best_k_is_the_fastest_k_of_each_method_batch_and_cost_model(records):
    best = shown(records)
    assert len(best) == len({(r.method, r.batch_size, r.cost_model) for r in records})
    for r in best:
        rivals = [o for o in records if (o.method, o.batch_size, o.cost_model) == (r.method, r.batch_size, r.cost_model)]
        assert r.projected_tokens_per_s == max(o.projected_tokens_per_s for o in rivals)


def test_prices_decide_what_drafting_is_worth(records):
    at = {(r.method, r.cost_model): r for r in shown(records) if r.batch_size == 4}
    # Drafts always accepted are worth much where verifying is free, less where each verified
    # token costs half a forward; the budget, learning the step cost, drafts less there.
    assert at[("oracle", "weights-bound")].speedup_vs_none > 2.0
    assert at[("oracle", "compute-bound")].speedup_vs_none < at[("oracle", "weights-bound")].speedup_vs_none
    assert at[("specdec", "compute-bound")].mean_drafted_tokens_per_step < at[("specdec", "weights-bound")].mean_drafted_tokens_per_step
    # The same replay feeds both cost models (the fixed-K decisions do not depend on the clock).
    same_k = {r.cost_model: r for r in records if (r.method, r.batch_size, r.k_max) == ("ngram", 4, 2)}
    assert same_k["compute-bound"].acceptance_rate == same_k["weights-bound"].acceptance_rate


def test_oracle_drafts_the_reference():
    req = ReplayRequest("r", [1, 2], [3, 4, 5, 6], 4)
    drafter = oracle(2, [req])
    assert [d.tolist() for d in drafter.step_tokens(["r"], [np.array([1, 2, 3])], [0])] == [[4, 5]]
    assert [d.tolist() for d in drafter.step_tokens(["r"], [np.array([1, 2, 3, 4, 5, 6])], [0])] == [[]]


def test_table_shows_best_k_and_how_specdec_stands(records):
    table = render_projection_table(records)
    assert "projected on weights-bound: synthetic, 10 prompts" in table
    assert "batch    4: specdec" in table and "the best baseline (ngram K=" in table and "oracle" in table


def test_h100_projection_keeps_verification_cheap_at_batch_one():
    methods = [m for name, m in all_methods().items() if name in ("none", "oracle")]
    recs = project(synthetic(4), "synthetic", methods, [4], [1], [h100_llama3_8b()], 4096)
    oracle = next(r for r in recs if r.method == "oracle")
    # 4 drafts always accepted at batch 1 on an H100: close to 5 tokens per forward, nearly 5x.
    assert oracle.tokens_per_forward > 4.0 and oracle.speedup_vs_none > 3.5


def test_parse_ks():
    assert compare.parse_ks("1-4,8") == [1, 2, 3, 4, 8]
    assert compare.parse_ks("3,1") == [1, 3]


def test_bench_command_projects_writes_json_and_the_plot(tmp_path, monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    monkeypatch.setattr(compare, "_reference", lambda requests, tokenizer, engine_cfg, params, epochs, row_samples=(): [synthetic(6)])
    cost_file = tmp_path / "slow-gpu.json"
    cost_file.write_text(json.dumps({"per_kv_token_s": 1e-7, "per_token_s": 1e-4, "fixed_s": 0.01, "per_step_overhead_s": 0.002}))
    out = tmp_path / "bench.json"
    argv = ["bench", "--engine", "replay", "--input", "humaneval", "--limit", "2", "--k", "1-2", "--batch-sizes", "1,4,8",
            "--methods", "oracle,specdec", "--cost", "h100-llama3-8b", "--cost", str(cost_file),
            "--json", str(out), "--plots", str(tmp_path / "plots")]
    assert main(argv) == 0
    printed = capfd.readouterr().out
    assert "batch 8 skipped: only 6 prompts" in printed
    assert "projected on h100-llama3-8b" in printed and "projected on slow-gpu" in printed
    rows = json.loads(out.read_text())
    assert {r["method"] for r in rows} == {"none", "oracle", "specdec"}
    assert {r["cost_model"] for r in rows} == {"h100-llama3-8b", "slow-gpu"}
    assert all(all(f in r for f in REQUIRED) for r in rows)
    assert {r["draft_cost"] for r in rows if r["method"] == "specdec"} == {OUR_DRAFT.source}
    assert (tmp_path / "plots" / "projected_speedup_vs_batch.png").stat().st_size > 1000
