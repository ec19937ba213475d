"""The console: what libraries and child processes write goes to the log file; the terminal
gets the command's own lines, warnings and errors."""

from __future__ import annotations

import logging
import subprocess
import sys

from specdec.console import console


def test_output_goes_to_the_log_and_the_command_lines_and_warnings_to_the_terminal(tmp_path, capfd):
    log = tmp_path / "out" / "run.log"
    with console(log) as term:
        print("an INFO line of some library")
        # a child process (a shell, not an interpreter: unit/conftest.py) writing to the inherited fds
        subprocess.run(["sh", "-c", "echo 'engine process says hi'; echo 'engine progress bar' >&2"], check=True)
        logging.getLogger("some.library").info("detail")
        logging.getLogger("some.library").warning("disk almost full")
        logging.getLogger("vllm").warning("a configuration note")
        logging.getLogger("vllm").error("engine core died")
        term.status("run 1: running")  # not a terminal here: nothing
        term.line("run 1: 3 shards, 48 rows")
    print("after the block")
    shown = capfd.readouterr()
    assert shown.out == "run 1: 3 shards, 48 rows\nafter the block\n"
    assert "WARNING some.library: disk almost full" in shown.err and "ERROR vllm: engine core died" in shown.err
    assert "configuration note" not in shown.err and "engine process" not in shown.err + shown.out
    logged = log.read_text()
    for text in ("an INFO line of some library", "engine process says hi", "engine progress bar"):
        assert text in logged


def test_verbose_redirects_nothing(capfd):
    with console(None) as term:
        print("library line")
        term.line("run line")
    assert capfd.readouterr().out == "library line\nrun line\n"


def test_a_handler_made_inside_the_block_still_logs_to_the_file_after_it(tmp_path, capfd):
    """Libraries make handlers on sys.stderr as they go (vLLM's, transformers'); an engine shut
    down after the block (at exit) logs through them: into the log, not to a closed stream."""
    log = tmp_path / "run.log"
    late = logging.getLogger("some.engine")
    late.propagate, late.level = False, logging.INFO
    with console(log):
        late.addHandler(logging.StreamHandler(sys.stderr))
    try:
        late.info("[shutdown] engine core stopped")
    finally:
        late.handlers.clear()
    shown = capfd.readouterr()
    assert "Logging error" not in shown.err and "[shutdown]" not in shown.err + shown.out
    assert "[shutdown] engine core stopped" in log.read_text()
