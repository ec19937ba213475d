"""`specdec bench` pieces that need no engine: replay methods on synthetic greedy outputs,
records, plots and the DuckDB store."""

import numpy as np

from specdec.bench.plots import write_plots
from specdec.bench.replay_bench import builtin_methods, render_replay_table, run_replay
from specdec.engines.replay import ReplayRequest
from support.db import query
from support.replay_requests import synthetic_requests
from tasks.bench_store import store


def test_replay_methods_report_identical_outputs_and_specdec_beats_ngram_here(tmp_path):
    methods = builtin_methods()
    reqs = synthetic_requests()
    names = ("none", "ngram", "specdec", "specdec[window-K]")
    records = {name: run_replay(methods[name], reqs, 4, "synthetic")[0] for name in names}
    assert all(r.outputs_identical_to_none for r in records.values())
    assert records["none"].tokens_per_forward == 1.0
    # text that repeats across requests: the cross-request cache drafts what lookup cannot
    assert records["specdec"].tokens_per_forward > records["ngram"].tokens_per_forward > 1.0
    assert records["specdec[window-K]"].tokens_per_forward > 1.5
    table = render_replay_table(list(records.values()))
    assert "specdec" in table and "x ngram" in table


def test_warm_mode_scores_each_prompt_once_with_the_other_halfs_cache():
    rng = np.random.default_rng(5)
    answer = rng.integers(100, 200, size=30).tolist()  # every request answers this, never in a prompt
    reqs = [ReplayRequest(f"r{i}", rng.integers(0, 50, size=10).tolist(), answer + [1] * 9, 30) for i in range(6)]
    methods = builtin_methods()
    cold, cold_results = run_replay(methods["specdec"], reqs, 4, "synthetic")
    warm, warm_results = run_replay(methods["specdec[warm]"], reqs, 4, "synthetic")
    assert [r.id for r in warm_results] == [r.id for r in reqs] and warm.outputs_identical_to_none
    # Cold, the first request has nothing to draft from; warm, no request starts empty-handed.
    assert cold_results[0].stats.num_steps > max(r.stats.num_steps for r in warm_results)
    assert warm.tokens_per_forward > cold.tokens_per_forward


def test_records_go_to_plots_and_duckdb(tmp_path):
    methods = builtin_methods()
    reqs = synthetic_requests(4)
    rows = []
    for k in (1, 3):
        for name in ("none", "specdec"):
            rec = run_replay(methods[name], reqs, k, "synthetic")[0]
            rows.append(rec.__dict__)
    rows.append({**rows[0], "engine": "vllm", "method": "none", "batch_size": 1, "tokens_per_s": 10.0})
    rows.append({**rows[1], "engine": "vllm", "method": "specdec", "batch_size": 1, "tokens_per_s": 15.0})
    paths = write_plots(rows, tmp_path / "plots")
    assert {p.name for p in paths} == {"tokens_per_s_vs_batch.png", "tokens_per_forward_vs_k.png", "acceptance_by_position.png"}
    assert all(p.stat().st_size > 1000 for p in paths)
    db = tmp_path / "bench.duckdb"
    bench_id = store(str(db), rows)
    assert query(db, "SELECT count(*) FROM bench_results WHERE bench_id = ?", [bench_id]) == [(len(rows),)]
    assert query(db, "SELECT speedup_vs_none FROM v_bench_speedup WHERE engine = 'vllm' AND method = 'specdec'") == [
        (1.5,)]
