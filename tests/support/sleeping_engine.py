"""`python tests/sleeping_engine.py ARGS...` runs `specdec ARGS...` (generate or run) with a
stand-in for VllmEngine, so that signal handling can be tested in seconds without vLLM.

The stand-in has one "engine process" (a sleeping child, like vLLM's EngineCore), tells on
stdout when it starts generating, and then blocks until the process is interrupted. With
SLEEPING_ENGINE_HANG_ON_CLOSE=1 its close() never returns either (an engine that will not
shut down), so only a second signal ends the command. It is installed where the real one is
looked up (specdec.engines.vllm_engine.VllmEngine), so the engine cache, the CLI and the
flow run their own code around it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the support package

from support.echo_engine import EchoTokenizer  # noqa: E402
from support.stepping import StepsAll  # noqa: E402

GENERATING = "sleeping-engine: generating, engine pid"


class SleepingEngine(StepsAll):
    tokenizer = EchoTokenizer()

    def __init__(self, engine_config, spec) -> None:
        self.engine_config = engine_config
        self.spec = spec
        self.child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        self.processes = [psutil.Process(self.child.pid)]
        self.alive = True

    def generate(self, requests, sampling, **_):
        print(f"{GENERATING} {self.child.pid}", flush=True)
        threading.Event().wait()  # until a signal raises in this (main) thread

    def close(self) -> None:
        self.alive = False
        if os.environ.get("SLEEPING_ENGINE_HANG_ON_CLOSE") == "1":
            print("sleeping-engine: close() hangs", flush=True)
            threading.Event().wait()
        self.child.terminate()
        self.child.wait()

    def kill(self) -> None:
        self.alive = False
        self.child.kill()


if __name__ == "__main__":
    import specdec.engines.vllm_engine as vllm_engine
    from specdec.cli import main

    vllm_engine.VllmEngine = SleepingEngine
    sys.exit(main(sys.argv[1:]))
