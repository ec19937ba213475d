"""The core CLI without the pipeline: with prefect and duckdb missing, `specdec generate`
works and `specdec run` says what to install.

"Missing" is simulated in the subprocesses (and the engine processes they spawn) by a
sitecustomize module that hides prefect and duckdb from the path finder, so that imports of
them fail and importlib.util.find_spec returns None, as where they are not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

BIN = Path(sys.executable).parent
HIDDEN = ("prefect", "duckdb")

SITECUSTOMIZE = f'''\
import sys
from importlib.machinery import PathFinder

HIDDEN = {HIDDEN!r}


class HidingPathFinder(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [HidingPathFinder if f is PathFinder else f for f in sys.meta_path]
'''


@pytest.fixture
def no_pipeline_env(tmp_path) -> dict[str, str]:
    """Environment for subprocesses in which prefect and duckdb cannot be imported."""
    hook = tmp_path / "hide-pipeline"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": str(hook), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PREFECT_API_URL", None)
    return env


def specdec(env: dict[str, str], cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "specdec"), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


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


@pytest.mark.slow
def test_generate_without_pipeline(no_pipeline_env, tmp_path, default_model_dir):
    from specdec.models import specdec_home

    shard, out = tmp_path / "prompts.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "prompt": ["Say hello.", "Count to three."]}), shard)
    env = {**no_pipeline_env, "SPECDEC_HOME": str(specdec_home()), "VLLM_CPU_KVCACHE_SPACE": "1"}
    done = specdec(env, tmp_path, "generate", "--input", str(shard), "--output", str(out),
                   "--max-tokens", "8", "--method", "none", timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    table = pq.read_table(out)
    assert table.num_rows == 2
    assert sorted(table.column("id").to_pylist()) == ["a", "b"]
