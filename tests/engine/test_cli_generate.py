"""`specdec generate` through the console script with the real engine: good rows complete, bad
and too-long rows go to the quarantine file beside the output; without prefect and duckdb
installed (support.no_pipeline) it works the same."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from specdec.quarantine import QUARANTINE_SCHEMA
from specdec.results_table import RESULT_SCHEMA
from support.no_pipeline import specdec
from support.shards import write_shard

pytestmark = pytest.mark.slow


def test_generate_end_to_end_through_the_console_script(tmp_path):
    """Good rows complete; a bad row and a too-long row go to the quarantine file beside the
    output, with the DuckDB quarantine table's columns; the exit code is 0."""
    rows = [
        {"id": "code", "prompt": "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", "messages": None, "max_tokens": 24},
        {"id": "chat", "prompt": None, "messages": json.dumps([{"role": "user", "content": "Say hello."}]), "max_tokens": None},
        {"id": "empty", "prompt": " ", "messages": None, "max_tokens": None},
        {"id": "long", "prompt": "word " * 300, "messages": None, "max_tokens": None},
    ]
    src = write_shard(tmp_path / "p.parquet", rows)
    out = tmp_path / "out.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "specdec.cli", "generate", "--input", str(src), "--output", str(out),
         "--method", "specdec", "--max-tokens", "16", "--batch-size", "2", "--kv-cache-gib", "1",
         "--max-model-len", "256"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "tokens / forward" in proc.stdout and "acceptance rate" in proc.stdout
    table = pq.read_table(out)
    assert table.schema.names == RESULT_SCHEMA.names
    got = {r["id"]: r for r in table.to_pylist()}
    assert set(got) == {"code", "chat"}
    assert 1 <= got["code"]["num_output_tokens"] <= 24
    assert 1 <= got["chat"]["num_output_tokens"] <= 16
    assert all(r["method"] == "specdec" and len(r["config_hash"]) == 16 for r in got.values())
    assert b"specdec.config" in table.schema.metadata
    quarantined = pq.read_table(tmp_path / "out.quarantine.parquet")
    assert quarantined.schema.names == QUARANTINE_SCHEMA.names
    assert [(r["row_index"], r["id"], r["stage"]) for r in quarantined.to_pylist()] == [
        (2, "empty", "validate"), (3, "long", "tokenize")]
    assert "exceeds the model length 256" in quarantined.column("reason")[1].as_py()
    assert "2 completed" in proc.stdout and "2 quarantined" in proc.stderr


def test_generate_without_pipeline(no_pipeline_env, tmp_path, default_model_dir):
    from specdec.models import specdec_home

    shard = write_shard(tmp_path / "prompts.parquet", [{"id": "a", "prompt": "Say hello."},
                                                       {"id": "b", "prompt": "Count to three."}])
    out = tmp_path / "out.parquet"
    env = {**no_pipeline_env, "SPECDEC_HOME": str(specdec_home()), "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = specdec(env, tmp_path, "generate", "--input", str(shard), "--output", str(out),
                   "--max-tokens", "8", "--method", "none", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    table = pq.read_table(out)
    assert table.num_rows == 2
    assert sorted(table.column("id").to_pylist()) == ["a", "b"]
