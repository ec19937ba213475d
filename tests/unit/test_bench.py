"""`specdec bench` pieces that need no engine: replay methods on synthetic greedy outputs,
records, plots and the DuckDB store."""

from bench.methods import all_methods
from bench.plots import write_plots
from bench.replay_bench import render_replay_table, run_replay
from support.db import query
from support.replay_requests import synthetic_requests
from tasks.bench_store import store


def test_replay_methods_report_identical_outputs_and_specdec_beats_ngram_here():
    methods = all_methods()
    reqs = synthetic_requests()
    names = ("none", "ngram", "specdec", "oracle")
    records = {name: run_replay(methods[name], reqs, 4, "synthetic")[0] for name in names}
    assert all(r.outputs_identical_to_none for r in records.values())
    assert records["none"].tokens_per_forward == 1.0
    # text that repeats across requests: the cross-request cache drafts what lookup cannot
    assert records["specdec"].tokens_per_forward > records["ngram"].tokens_per_forward > 1.0
    assert records["oracle"].acceptance_rate == 1.0 and records["oracle"].tokens_per_forward > 4.0
    table = render_replay_table(list(records.values()))
    assert "specdec" in table and "x ngram" in table


def test_records_go_to_plots_and_duckdb(tmp_path):
    methods = all_methods()
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
