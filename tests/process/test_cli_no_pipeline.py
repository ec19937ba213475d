"""The core CLI without the pipeline: with prefect and duckdb missing (support.no_pipeline),
`specdec run` says what to install. That `specdec generate` still works there is an engine
test (tests/engine/test_cli_generate.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.no_pipeline import specdec

pytestmark = pytest.mark.slow


def test_pipeline_packages_are_hidden(no_pipeline_env, tmp_path):
    probe = ("import importlib.util, pyarrow, specdec\n"
             "assert importlib.util.find_spec('prefect') is None and importlib.util.find_spec('duckdb') is None\n"
             "for name in ('duckdb', 'prefect', 'prefect.flows'):\n"
             "    try:\n"
             "        __import__(name)\n"
             "    except ModuleNotFoundError:\n"
             "        continue\n"
             "    raise SystemExit(f'{name} imported')\n")
    done = subprocess.run([sys.executable, "-c", probe], env=no_pipeline_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_run_without_pipeline_says_what_to_install(no_pipeline_env, tmp_path):
    done = specdec(no_pipeline_env, tmp_path, "run", "--source", str(tmp_path / "src"),
                   "--db", str(tmp_path / "r.duckdb"), timeout=300)
    assert done.returncode != 0, done.stdout[-2000:]
    assert "pip install" in done.stderr and "specdec[pipeline]" in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert not (tmp_path / "r.duckdb").exists()
