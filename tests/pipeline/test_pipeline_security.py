"""Security: credentials never in flow parameters, logs or DuckDB; SQL always parameterised;
every server the tests start listens on 127.0.0.1 only."""

from __future__ import annotations

import ast
import inspect
import os
import re

import pytest

from support import REPO
from support.db import query
from support.prefect_records import flow_finished, flow_run_logs
from support.processes import assert_loopback_only
from support.shards import write_shard

SECRET = "blocksecret-Xk29-ff"


def test_no_flow_parameter_can_carry_a_credential():
    from flows.fanout import generate_shard_group, speculative_generation_fanout
    from flows.generation import speculative_generation

    risky = re.compile(r"secret|password|token$|access_key|credential(?!s_block)", re.I)
    for flow in (speculative_generation, speculative_generation_fanout, generate_shard_group):
        names = [n for n in inspect.signature(flow.fn).parameters if risky.search(n)]
        assert names == [], (flow.name, names)


def _execute_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("execute", "sql", "query"):
            if node.args:
                yield node


def test_sql_is_never_built_from_strings_at_run_time():
    """Every statement the code runs is a constant or a file from sql/ (load_sql); values go
    in as `?` parameters. f-strings, % and .format() in a statement are refused."""
    offenders = []
    for folder in ("flows", "tasks", "specdec"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for call in _execute_calls(tree):
                arg = call.args[0]
                ok = (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) or (
                    isinstance(arg, ast.Call) and getattr(arg.func, "id", "") == "load_sql") or isinstance(arg, ast.Name)
                if not ok:
                    offenders.append(f"{path.relative_to(REPO)}:{call.lineno}")
    assert offenders == []


def test_sql_files_hold_no_python_formatting():
    for path in (REPO / "sql").rglob("*.sql"):
        text = path.read_text()
        assert not re.search(r"\{[a-z_]+\}|%s|%\(", text), path.name


@pytest.mark.slow
def test_servers_started_by_the_tests_listen_on_loopback_only(prefect_server, s3_server):
    found = assert_loopback_only(os.getpid())
    ports = {key[1].rsplit(":", 1)[1] for key in found}
    assert prefect_server["PREFECT_API_URL"].split(":")[2].split("/")[0] in ports  # the check sees them
    assert s3_server.rsplit(":", 1)[1] in ports


@pytest.mark.slow
def test_credentials_from_a_block_stay_out_of_parameters_logs_and_duckdb(
        tmp_path, prefect_api, echo_engine, s3_server, make_bucket, monkeypatch, caplog):
    from prefect import get_client

    from tasks.credentials import S3Credentials
    from flows.generation import speculative_generation
    from tasks import storage

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    make_bucket(s3_server, "secure")
    S3Credentials(access_key_id="AKIDSECURE", secret_access_key=SECRET).save("secure-creds", overwrite=True)
    fs, _ = storage.filesystem("s3://secure", storage.S3Options(s3_server, None, "k", "s"))
    write_shard("secure/prompts/a.parquet", [{"id": "a", "prompt": "hello"}], filesystem=fs)
    db = tmp_path / "r.duckdb"
    state = speculative_generation(source="s3://secure/prompts", staging="s3://secure/staging", db=str(db),
                                   s3_endpoint_url=s3_server, s3_credentials_block="secure-creds",
                                   max_tokens=4, run_name="secure", return_state=True)
    assert state.is_completed(), state.message
    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(flow_run_id)
    assert flow_run.parameters["s3_credentials_block"] == "secure-creds"
    assert SECRET not in repr(flow_run.parameters)
    # Run logs reach the server from a background worker, after the run has returned: wait
    # for the flow's last line ("Finished in state ...") rather than reading once.
    logs = flow_run_logs([flow_run_id], flow_finished)
    assert flow_finished(logs) and len(logs) > 3, [entry.message for entry in logs]
    assert not [entry.message for entry in logs if SECRET in entry.message]
    assert SECRET not in caplog.text
    for table in ("runs", "shards", "outputs", "quarantine"):
        dump = query(db, f"SELECT coalesce(string_agg(CAST(t AS VARCHAR), ''), '') FROM {table} AS t")[0][0]
        assert SECRET not in dump, table
    assert query(db, "SELECT count(*) FROM outputs") == [(1,)]
