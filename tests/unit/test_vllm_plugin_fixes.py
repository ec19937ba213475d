"""The vLLM plugin as a whole (specdec.vllm_plugins): its entry point installs every fix, the
speedup and the engine guard, each fix and speedup names the vLLM defect it works around and
switches off on its own, and its tests are tied to the tested vLLM release."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from specdec.engines.vllm_version import TESTED_VLLM
from specdec.vllm_plugins import engine_guard, fixes, register, speedups
from specdec.vllm_plugins.patching import UpstreamDefect
from support import REPO
from support.plugin_checks import require_tested_vllm


def rewrites() -> list:
    """Every fix and speedup module."""
    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for package in (fixes, speedups) for info in pkgutil.iter_modules(package.__path__)]


def test_the_entry_point_installs_every_fix_the_speedup_and_the_guard(monkeypatch):
    calls: list[str] = []
    for module in [*rewrites(), engine_guard]:
        monkeypatch.setattr(module, "register", lambda name=module.__name__: calls.append(name))
    register()
    assert sorted(calls) == sorted(m.__name__ for m in [*rewrites(), engine_guard])
    assert len(rewrites()) == 4


def test_each_fix_and_speedup_names_its_defect_has_its_own_switch_and_a_version_tied_test():
    tests = "\n".join(path.read_text() for path in (REPO / "tests" / "unit").glob("test_*.py"))
    switches = []
    for module in rewrites():
        name = module.__name__.rpartition(".")[2]
        defect = module.DEFECT
        assert isinstance(defect, UpstreamDefect), module.__name__
        assert defect.module.startswith("vllm."), defect
        require_tested_vllm(module)  # where the defect is: true of the tested release only
        owner = importlib.import_module(defect.module)  # the named function is where it says
        for part in defect.function.split("."):
            owner = getattr(owner, part)
        assert callable(owner), defect.where
        assert defect.wrong and defect.upstream, defect
        # tests/conftest.py fails the marked tests on another release
        assert f"pytestmark = pytest.mark.vllm_fix({name})" in tests, f"no unit test of {module.__name__} is tied to the vLLM release"
        switches.append(module.DISABLE_ENV)
    assert len(set(switches)) == len(switches), switches


def test_on_another_vllm_release_the_fix_tests_fail_saying_which_fix_to_check_again():
    from specdec.vllm_plugins.fixes import expand_kernel

    require_tested_vllm(expand_kernel, installed=f"{TESTED_VLLM}+cpu")  # the tested release: passes
    with pytest.raises(pytest.fail.Exception) as failed:
        require_tested_vllm(expand_kernel, installed="0.33.0")
    message = str(failed.value)
    assert "vLLM 0.33.0 is installed" in message and f"checked against vLLM {TESTED_VLLM} only" in message
    assert "re-check that fix against the new vLLM" in message
    assert expand_kernel.__name__ in message and expand_kernel.DEFECT.where in message
