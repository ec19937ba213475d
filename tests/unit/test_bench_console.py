"""`specdec bench` and `bench-run` run inside the console as `specdec generate` does: vLLM's
INFO lines and whatever the engine processes print go to a log file, the bench's own lines
to the terminal; `--verbose` redirects nothing. The bench's work is replaced by one that
writes as an engine does (no engine starts here)."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys

import pytest

import bench.commands
from bench import compare, throughput
from specdec import cli
from support.bench_cli import specdec_main


@pytest.fixture(autouse=True)
def _no_handler_left():
    yield
    logging.getLogger("some.engine.library").handlers.clear()


def _engine_like_work(args: argparse.Namespace) -> int:
    # a library that makes its handler as it starts (as transformers and vLLM do), on stderr
    library = logging.getLogger("some.engine.library")
    library.propagate, library.level = False, logging.INFO
    library.handlers = [logging.StreamHandler(sys.stderr)]
    library.info("Initializing a V1 LLM engine with config ...")
    subprocess.run(["sh", "-c", "echo 'engine core process' >&2"], check=True)
    print(f"{args.command}: the bench's table")
    return 0


@pytest.mark.parametrize("command, module, run", [("bench", compare, "run"), ("bench-run", throughput, "run_bench_run")])
def test_library_logs_go_to_the_log_file_and_the_bench_lines_to_the_terminal(command, module, run, tmp_path,
                                                                             monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    monkeypatch.setattr(module, run, _engine_like_work)
    json_path = tmp_path / "out" / "records.json"
    assert main([command, "--json", str(json_path)]) == 0
    shown = capfd.readouterr()
    log = tmp_path / "out" / "records.log"
    assert f"{command}: the bench's table" in shown.out and f"engine logs go to {log}" in shown.out
    assert "Initializing" not in shown.out + shown.err and "engine core process" not in shown.out + shown.err
    logged = log.read_text()
    assert "Initializing a V1 LLM engine" in logged and "engine core process" in logged

    assert main([command, "--log", str(tmp_path / "own.log")]) == 0
    assert "engine core process" in (tmp_path / "own.log").read_text()


def test_verbose_keeps_the_library_logs_on_the_terminal(tmp_path, monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    monkeypatch.setattr(compare, "run", _engine_like_work)
    assert main(["bench", "--verbose", "--json", str(tmp_path / "records.json")]) == 0
    shown = capfd.readouterr()
    assert "engine core process" in shown.err and "bench: the bench's table" in shown.out
    assert not (tmp_path / "records.log").exists()


def test_without_json_the_log_goes_to_the_specdec_home(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path / "home"))
    args = cli.build_parser([bench.commands]).parse_args(["bench-run"])
    assert bench.commands.log_path(args) == tmp_path / "home" / "logs" / "bench-run.log"
