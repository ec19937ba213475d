"""What a person sees on the terminal while a command runs an engine: inside
`console(log_path)` whatever the libraries and the engine's processes write goes to the log
file; the terminal gets the `Console`'s lines, this process's warnings and vLLM's errors."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

# Loggers that do not propagate to the root logger, and the least level the terminal shows of
# each. vLLM configures its logger when imported, which would drop a handler added before.
OWN_HANDLER_LOGGERS = {"vllm": logging.ERROR}


@dataclasses.dataclass
class Console:
    """The terminal, whatever stdout and stderr point to meanwhile."""

    out: TextIO
    err: TextIO
    log_path: Path | None = None  # None: nothing redirected (verbose)

    def line(self, text: str = "") -> None:
        """A finished line (it replaces a status line)."""
        self.out.write(("\r\x1b[K" if self._status_shown else "") + text + "\n")
        self.out.flush()
        self._status_shown = False

    def status(self, text: str) -> None:
        """A line that the next status or line overwrites (shown on a terminal only)."""
        if self.out.isatty():
            self.out.write("\r\x1b[K" + text)
            self.out.flush()
            self._status_shown = True

    _status_shown: bool = False


@contextlib.contextmanager
def console(log_path: Path | None) -> Iterator[Console]:
    """Redirect file descriptors 1 and 2 to `log_path` (appending) until the block ends; None:
    nothing redirected. A library that configures the root logger when imported (Prefect
    does) must be imported before."""
    if log_path is None:
        yield Console(sys.stdout, sys.stderr)
        return
    if importlib.util.find_spec("vllm") is not None:
        import vllm.logger  # noqa: F401  (configures vLLM's logger now, not over our handler later)
    # Each engine start configures vLLM's handler again, on the sys.stdout of that moment, which a
    # command may point at the terminal for its own lines (the bench's print): stderr is the log's.
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    term = Console(os.fdopen(os.dup(saved[0]), "w", buffering=1), os.fdopen(os.dup(saved[1]), "w", buffering=1),
                   log_path)
    levels = {"": logging.WARNING, **OWN_HANDLER_LOGGERS}
    handlers = {name: _terminal_handler(term.err, level) for name, level in levels.items()}
    # vLLM's records reach the terminal through their own handler only, propagated or not
    handlers[""].addFilter(lambda record: not record.name.startswith(tuple(OWN_HANDLER_LOGGERS)))
    streams = sys.stdout, sys.stderr
    for stream in streams:  # loggers made before hold them: their lines reach the log as they come
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        # whoever replaced sys.stdout (a test runner, a notebook) writes to the log as well
        sys.stdout = sys.stderr = os.fdopen(os.dup(log_fd), "w", buffering=1)
        for name, handler in handlers.items():
            logging.getLogger(name or None).addHandler(handler)
        yield term
    finally:
        for name, handler in handlers.items():
            logging.getLogger(name or None).removeHandler(handler)
        # Not closed: handlers that libraries made meanwhile (vLLM's, transformers') hold it, and
        # what they log later (an engine's shutdown at exit) still belongs in the log.
        sys.stdout, sys.stderr = streams
        sys.stdout.flush()  # what was written through them meanwhile belongs in the log
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        term.out.close()
        term.err.close()


def _terminal_handler(stream: TextIO, level: int) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    return handler
