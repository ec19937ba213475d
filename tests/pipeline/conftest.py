"""Fixtures for the pipeline tests: temporary DuckDB/staging, and (session-scoped) local
servers started by the suite on 127.0.0.1 and stopped by PID: Prefect and moto's S3."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import BIN
from support.processes import free_port, stop, wait_for


@pytest.fixture
def tmp_db(tmp_path) -> Path:
    return tmp_path / "results.duckdb"


@pytest.fixture
def staging_dir(tmp_path) -> Path:
    return tmp_path / "staging"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[str]:
    """moto's standalone S3 server on 127.0.0.1; yields its endpoint URL."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen(
        [str(BIN / "python"), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log, stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    import urllib.request

    wait_for(lambda: urllib.request.urlopen(endpoint + "/", timeout=1), 60, "moto server", proc)
    yield endpoint
    stop(proc, (signal.SIGTERM,))
    log.close()


@pytest.fixture
def s3_env(s3_server, monkeypatch) -> str:
    """AWS environment pointing at the local S3 endpoint (dummy credentials)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing-secret")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return s3_server


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory) -> Iterator[dict[str, str]]:
    """A real `prefect server start` on 127.0.0.1 for the whole session.

    Yields the environment for clients, workers and flow-run subprocesses."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_LOGGING_LEVEL": "INFO",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=home,
    )
    import urllib.request

    wait_for(lambda: urllib.request.urlopen(api + "/health", timeout=2).status == 200, 120, "prefect server", proc)
    yield {**env, "PREFECT_API_URL": api}
    stop(proc, (signal.SIGINT, signal.SIGTERM))
    log.close()


@pytest.fixture
def prefect_api(prefect_server) -> Iterator[str]:
    """Point in-process Prefect clients at the session server."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from prefect._internal.concurrency.services import QueueService

    with temporary_settings(updates={PREFECT_API_URL: prefect_server["PREFECT_API_URL"]}):
        yield prefect_server["PREFECT_API_URL"]
        # Send queued run logs and events while the server is up; otherwise the exiting
        # interpreter retries against a stopped server for a minute.
        QueueService.drain_all(timeout=15)


@pytest.fixture
def echo_engine(monkeypatch) -> list[int]:
    """Generation by EchoEngine (support/echo_engine.py); returns the list of engine requests."""
    import specdec.generate as generate_mod
    from support.echo_engine import EchoEngine

    starts: list[int] = []

    def get_engine(params, **_):
        starts.append(1)
        return EchoEngine(), 0.0

    monkeypatch.setattr(generate_mod, "get_engine", get_engine)
    return starts


@pytest.fixture(scope="session")
def make_bucket():
    """`make_bucket(endpoint, name)`: create a bucket on the local S3 endpoint."""
    return _make_bucket


def _make_bucket(endpoint: str, name: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket=name)
