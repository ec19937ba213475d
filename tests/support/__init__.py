"""Helpers shared by the test groups (unit/, engine/, pipeline/, process/); fixtures stay in conftest.py.

    db.py              the one DuckDB read helper (`query`) and the schema as text
    shards.py          the one prompt-shard writer (`write_shard`) and broken shards
    processes.py       ports, waiting with a deadline, stopping by PID, loopback check
    killed_flow.py     a `specdec run` process SIGKILLed once its first shard is committed
    prefect_records.py flow-run logs and task runs, read once they have arrived
    echo_engine.py     a test double for VllmEngine (flow-orchestration tests)
    flaky_proxy.py     a TCP proxy that cuts S3 on demand (fault tests)
    no_pipeline.py     subprocess environment without prefect and duckdb
    sampling_probe.py  sampling probe on a real engine (also run as a script)
    chi_square.py      two-sample chi-square test for the distribution tests
    greedy_checks.py   greedy-identity assertion for the real-engine tests
    prompt_requests.py engine requests from prompt rows through specdec.prompts
    replay_requests.py synthetic greedy references for replay and projection tests
    synthetic_staging.py staged shard results without an engine (ingest tests, lab/ingest_bench.py)
    import_graph.py    the product's import graph and its cycles (python -m tests.support.import_graph)
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: tests/support/ -> repo root
BIN = Path(sys.executable).parent  # the virtual environment's scripts (prefect, specdec)
