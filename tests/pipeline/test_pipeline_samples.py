"""Samples per prompt end to end: the real engine (the session's shared specdec one), a real
Prefect server and DuckDB file; a shard with a per-row `samples` column, sampled with a
seed. Outputs and request statistics are keyed by (id, sample), the views answer, and a
re-run resumes without generating or duplicating anything. The rules without an engine:
tests/unit/test_samples.py and test_pipeline_ingest.py."""

from __future__ import annotations

import pyarrow as pa
import pytest

import specdec.engine_cache as engine_cache
from flows.params import FlowParams
from support.db import query
from support.shards import write_shard

pytestmark = pytest.mark.slow


def test_flow_keys_samples_by_id_and_sample_and_resumes_without_duplicates(tmp_path, prefect_api, engine_factory,
                                                                           monkeypatch):
    from flows.generation import speculative_generation

    write_shard(tmp_path / "src/s.parquet", pa.table({
        "id": ["a", "b", "c"],
        "prompt": ["def add(a, b):", "Name three colours.", "Count to five:"],
        "samples": pa.array([None, 3, 1], pa.int64()),  # a: the run's 2
    }))
    params = dict(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"), staging=str(tmp_path / "staging"),
                  run_name="samples", max_tokens=8, batch_size=16, kv_cache_gib=1.0, samples=2, temperature=0.8,
                  seed=3)
    p = FlowParams(**params)
    monkeypatch.setitem(engine_cache._ENGINES, engine_cache.engine_configs(p.generation_params()),
                        engine_factory("specdec"))
    assert speculative_generation(**params)["num_prompts"] == 3
    db = tmp_path / "r.duckdb"
    expected = [("a", [0, 1], 2), ("b", [0, 1, 2], 3), ("c", [0], 1)]
    assert query(db, "SELECT id, list(sample ORDER BY sample), any_value(num_samples) FROM outputs "
                     "GROUP BY id ORDER BY id") == expected
    assert query(db, "SELECT id, list(sample ORDER BY sample) FROM request_stats WHERE num_steps > 0 "
                     "GROUP BY id ORDER BY id") == [(i, s) for i, s, _ in expected]
    assert query(db, "SELECT id, num_samples, distinct_completions BETWEEN 1 AND num_samples, tokens_per_forward >= 1 "
                     "FROM v_sample_agreement ORDER BY id") == [("a", 2, True, True), ("b", 3, True, True),
                                                                ("c", 1, True, True)]
    assert query(db, "SELECT input_rows, output_rows, quarantined_rows, output_samples, expected_samples, balanced "
                     "FROM v_run_accounting") == [(3, 3, 0, 6, 6, True)]
    assert query(db, "SELECT num_prompts FROM shards") == [(3,)]
    before = query(db, "SELECT id, sample, output_token_ids FROM outputs ORDER BY id, sample")
    generated = query(db, "SELECT generated_at FROM shards")

    assert speculative_generation(**params)["num_prompts"] == 3  # the same run again: resumes
    assert query(db, "SELECT id, sample, output_token_ids FROM outputs ORDER BY id, sample") == before
    assert query(db, "SELECT generated_at FROM shards") == generated  # not generated again
    assert query(db, "SELECT count(*) FROM request_stats") == [(6,)]
