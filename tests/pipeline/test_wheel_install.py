"""specdec as a built wheel, away from the checkout: the wheel carries the SQL files
(package `tasks.sql`, mapped from the top-level sql/ folder), its build and the editable
build warn of none of our packages, and `specdec run` works from a fresh virtual environment
in a folder outside the repo. (The package list itself: tests/unit/test_packaging.py.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from support import REPO
from support.db import query
from support.shards import write_shard

# Left out of the source copy the wheel is built from (the checkout is never built in place:
# other runs may share it, and a stale build/ folder would leak old modules into the wheel).
TOP_LEVEL_SKIP = {".venv", ".git", "build", "dist", "out", "tests", ".pytest_cache", ".hypothesis"}
SKIP_ANYWHERE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.duckdb", "*.duckdb.wal")


def _ignore(folder: str, names: list[str]) -> set[str]:
    skipped = set(SKIP_ANYWHERE(folder, names))
    if Path(folder) == REPO:
        skipped |= TOP_LEVEL_SKIP & set(names)
    return skipped


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
# What setuptools prints when the package configuration leaves out a folder it would import.
PACKAGE_WARNING = "absent from the `packages` configuration"


def _build_wheel(tmp_path: Path) -> tuple[Path, str]:
    """The wheel built from a copy of the sources, and the build's output."""
    src, dist = tmp_path / "src", tmp_path / "dist"
    shutil.copytree(REPO, src, ignore=_ignore)
    done = _run([*PIP, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("specdec-*.whl")
    return wheel, done.stdout + done.stderr


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> tuple[Path, str]:
    """One build for the module's tests: the wheel is checked, then installed and run."""
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def _sql_files() -> list[str]:
    return sorted(p.relative_to(REPO / "sql").as_posix() for p in (REPO / "sql").rglob("*.sql"))


def test_wheel_carries_every_sql_file_and_builds_without_package_warnings(built_wheel):
    wheel, output = built_wheel
    assert PACKAGE_WARNING not in output and "Warning" not in output, output[-3000:]
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n.removeprefix("tasks/sql/") for n in names if n.startswith("tasks/sql/") and n.endswith(".sql")) \
        == _sql_files()
    assert "tasks/sql/__init__.py" in names


def test_editable_build_maps_the_sql_package_without_package_warnings(tmp_path):
    """The editable build (`make setup`'s `pip install -e .`) through setuptools' own hook:
    no warning about our packages, and `tasks.sql` resolves to the checkout's sql/."""
    src, dist = tmp_path / "src", tmp_path / "dist"
    shutil.copytree(REPO, src, ignore=_ignore)
    done = _run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_editable({str(dist)!r})"],
                cwd=src)
    assert PACKAGE_WARNING not in done.stdout + done.stderr, done.stderr[-3000:]
    (wheel,) = dist.glob("specdec-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (finder,) = [n for n in zf.namelist() if n.endswith("_finder.py")]
        mapping = zf.read(finder).decode()
    assert f"'tasks.sql': '{src / 'sql'}'" in mapping, mapping[:2000]


def _fresh_venv_with_wheel(tmp_path: Path, wheel: Path) -> Path:
    """Install the wheel alone into a new virtual environment, then let that environment see
    .venv's other packages through a .pth file."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    # Installed before the .pth exists, so pip sees no other specdec (.venv's editable one).
    _run([*PIP, "--python", str(python), "install", "--no-deps", "--no-index", "--ignore-installed", str(wheel)])
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    # Plain path lines: .venv's own .pth files (its editable specdec finder) are not run.
    ours = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    (Path(purelib) / "specdec_test_deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    return venv


def _subprocess_env(tmp_path: Path) -> dict[str, str]:
    from specdec.models import specdec_home

    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "SPECDEC_HOME": str(specdec_home()), "VLLM_CPU_KVCACHE_SPACE": "1", "TOKENIZERS_PARALLELISM": "false",
           # The embedded server's first start migrates a fresh database: slow on a busy 2-core host.
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    for name in ("PREFECT_API_URL", "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


@pytest.mark.slow
def test_wheel_runs_the_pipeline_outside_the_checkout(tmp_path, default_model_dir, built_wheel):
    venv = _fresh_venv_with_wheel(tmp_path, built_wheel[0])
    work = tmp_path / "work"
    work.mkdir()
    env = _subprocess_env(tmp_path)

    where = _run([str(venv / "bin" / "python"), "-c", (
        "import json, importlib.metadata as md, specdec, flows, tasks.db\n"
        "print(json.dumps([specdec.__file__, flows.__file__, tasks.db.__file__, str(tasks.db.SQL_DIR),"
        " str(md.distribution('specdec').locate_file(''))]))")], env=env, cwd=work)
    root = venv.resolve()
    for path in json.loads(where.stdout):
        assert Path(path).resolve().is_relative_to(root), f"{path} is not from the wheel in {root}"
    sql_dir = Path(json.loads(where.stdout)[3])
    assert sorted(p.relative_to(sql_dir).as_posix() for p in sql_dir.rglob("*.sql")) == _sql_files()

    source, db, staging = work / "shards", work / "results.duckdb", work / "staging"
    source.mkdir()
    write_shard(source / "shard-000.parquet", [{"id": "a", "prompt": "Say hello."},
                                               {"id": "b", "prompt": "Count to three."}])
    cmd = [str(venv / "bin" / "specdec"), "run", "--source", str(source), "--db", str(db),
           "--staging", str(staging), "--max-tokens", "8", "--method", "none"]
    log = tmp_path / "run.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=900)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            try:  # the run's own process group: Prefect's embedded server, engine processes
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    assert returncode == 0, f"exit {returncode}:\n" + log.read_text()[-6000:]

    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(2, 2)]
