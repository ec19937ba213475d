"""Interrupts without a process: an interrupted write leaves no temporary file, the signal handler
is restored and does nothing off the main thread. SIGTERM and SIGINT to `specdec generate` in a
subprocess: tests/process/test_interrupt_signals.py; with the real engine:
tests/engine/test_signals_engine.py."""

from __future__ import annotations

import signal
import threading

import pytest

from specdec import interrupts


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "res.parquet"
    with pytest.raises(interrupts.Interrupted):
        with interrupts.temporary_path(target) as tmp:
            tmp.write_bytes(b"half a file")
            raise interrupts.Interrupted(signal.SIGTERM)
    assert list(tmp_path.iterdir()) == []
    with interrupts.temporary_path(target) as tmp:
        tmp.write_bytes(b"whole")
    assert [p.name for p in tmp_path.iterdir()] == ["res.parquet"] and target.read_bytes() == b"whole"


def test_the_handler_is_restored_and_off_the_main_thread_does_nothing():
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.handled(kill=lambda: None):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
    seen = []
    worker = threading.Thread(target=lambda: seen.append(interrupts.handled(kill=lambda: None).__enter__()))
    worker.start()
    worker.join()
    assert seen == [None] and signal.getsignal(signal.SIGTERM) is before
