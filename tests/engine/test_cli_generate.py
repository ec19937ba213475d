"""`specdec generate` through the console script with the real engine, where prefect and
duckdb cannot be imported (support.no_pipeline), as where they are not installed: good rows
complete, bad and too-long rows go to the quarantine file beside the output."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from specdec.quarantine import QUARANTINE_SCHEMA
from specdec.results_table import RESULT_SCHEMA
from support.no_pipeline import specdec
from support.shards import write_shard

pytestmark = pytest.mark.slow


def test_generate_end_to_end_through_the_console_script_without_the_pipeline(no_pipeline_env, tmp_path):
    """With prefect and duckdb hidden: good rows complete; a bad row and a too-long row go to
    the quarantine file beside the output, with the DuckDB quarantine table's columns; the
    exit code is 0; the engine's shutdown is logged to the log file, the terminal stays clean."""
    from specdec.models import specdec_home

    rows = [
        {"id": "code", "prompt": "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n", "messages": None, "max_tokens": 24},
        {"id": "chat", "prompt": None, "messages": json.dumps([{"role": "user", "content": "Say hello."}]), "max_tokens": None},
        {"id": "empty", "prompt": " ", "messages": None, "max_tokens": None},
        {"id": "long", "prompt": "word " * 300, "messages": None, "max_tokens": None},
    ]
    src = write_shard(tmp_path / "p.parquet", rows)
    out = tmp_path / "out.parquet"
    env = {**no_pipeline_env, "SPECDEC_HOME": str(specdec_home())}
    proc = specdec(env, tmp_path, "generate", "--input", str(src), "--output", str(out), "--method", "specdec",
                   "--max-tokens", "16", "--batch-size", "2", "--kv-cache-gib", "1", "--max-model-len", "256",
                   timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
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
    # the engine's shutdown lines go to the log while it is still open, not to a closed stream
    assert "Logging error" not in proc.stderr and "[shutdown]" not in proc.stderr, proc.stderr[-3000:]
    assert "[shutdown]" in (tmp_path / "out.log").read_text()
