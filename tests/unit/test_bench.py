"""`specdec bench` pieces that need no engine: the methods replayed on synthetic greedy
outputs, records, plots and the DuckDB store."""

from bench.cost_models import h100_llama3_8b
from bench.drafters import all_methods
from bench.plots import write_plots
from bench.projection import project
from bench.replay import expected_output
from specdec.stats import ShardStats
from support.db import query
from support.replay_requests import replay, synthetic_requests
from tasks.bench_store import store


def test_every_method_replays_the_reference_and_specdec_beats_ngram_here():
    methods = all_methods()
    reqs = synthetic_requests()
    names = ("none", "ngram", "ngram[2..5]", "specdec", "specdec[no-budget]", "oracle")
    totals = {}
    for name in names:
        results = replay(reqs, methods[name].make_drafter(4, reqs))
        assert [r.output_token_ids for r in results] == [expected_output(r) for r in reqs], name
        totals[name] = ShardStats.aggregate(r.stats for r in results)
    assert totals["none"].tokens_per_forward == 1.0
    # text that repeats across requests: the cross-request cache drafts what lookup cannot
    assert totals["specdec"].tokens_per_forward > totals["ngram[2..5]"].tokens_per_forward > 1.0
    assert totals["oracle"].acceptance_rate == 1.0 and totals["oracle"].tokens_per_forward > 4.0


def test_records_go_to_plots_and_duckdb(tmp_path):
    methods = [m for name, m in all_methods().items() if name in ("none", "specdec")]
    projected = project(synthetic_requests(4), "synthetic", methods, [1, 3], [1, 2], [h100_llama3_8b()], 4096)
    rows = [r.__dict__ for r in projected]
    real = {"engine": "vllm", "dataset": "synthetic", "batch_size": 1, "k_max": 3, "num_requests": 4,
            "tokens_per_forward": 1.0, "acceptance_rate": 0.0, "outputs_identical_to_none": True, "started_from": "x"}
    rows += [{**real, "method": "none", "tokens_per_s": 10.0}, {**real, "method": "specdec", "tokens_per_s": 15.0}]
    paths = write_plots(rows, tmp_path / "plots")
    assert {p.name for p in paths} == {"tokens_per_s_vs_batch.png", "projected_speedup_vs_batch.png"}
    assert all(p.stat().st_size > 1000 for p in paths)
    db = tmp_path / "bench.duckdb"
    bench_id = store(str(db), rows)
    assert query(db, "SELECT count(*) FROM bench_results WHERE bench_id = ?", [bench_id]) == [(len(rows),)]
    assert query(db, "SELECT speedup_vs_none FROM v_bench_speedup WHERE engine = 'vllm' AND method = 'specdec'") == [
        (1.5,)]
