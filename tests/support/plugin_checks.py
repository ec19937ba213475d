"""What the unit tests of the vLLM fixes and speedups (specdec.vllm_plugins) share: each
`register()` decides once per process (patching.InstallOnce) and honours its opt-out
variable, and each is checked against one vLLM release only."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from types import ModuleType

import pytest

from specdec.engines.vllm_version import TESTED_VLLM, release
from specdec.vllm_plugins import patching


def must_not_run(*args, **kwargs):
    raise AssertionError("must not be called")


def register_afresh(monkeypatch: pytest.MonkeyPatch, fix: ModuleType, switched_off: bool,
                    never_called: Sequence[str]) -> None:
    """`fix.register()` as on a process's first call, with its opt-out variable set or not;
    the test fails if any of `never_called` (attributes of `fix`, else of `patching`) runs."""
    monkeypatch.setattr(fix._once, "decided", False)
    if switched_off:
        monkeypatch.setenv(fix.DISABLE_ENV, "1")
    else:
        monkeypatch.delenv(fix.DISABLE_ENV, raising=False)
    for name in never_called:  # the fix's own, or the plugins' shared ones (patching)
        monkeypatch.setattr(fix if hasattr(fix, name) else patching, name, must_not_run)
    fix.register()
    assert fix._once.decided


def pristine_vllm_module(fix: ModuleType) -> ModuleType:
    """A fresh copy of the vLLM module `fix` works around, as vLLM ships it (the plugin may
    already have patched the imported one in this process)."""
    spec = importlib.util.find_spec(fix.DEFECT.module)
    assert spec is not None and spec.origin is not None, f"{fix.DEFECT.where} is gone"
    copy_spec = importlib.util.spec_from_file_location(f"_pristine_{fix.DEFECT.module.replace('.', '_')}", spec.origin)
    pristine = importlib.util.module_from_spec(copy_spec)
    copy_spec.loader.exec_module(pristine)
    return pristine


def require_tested_vllm(fix: ModuleType, installed: str | None = None) -> None:
    """Fail (naming the fix and its defect) unless `installed`, by default the installed vLLM,
    is the release the fix was checked against: on another, the defect may be gone or moved."""
    if installed is None:
        vllm = pytest.importorskip("vllm", reason="no vLLM installed: nothing to fix")
        installed = vllm.__version__
    if release(installed) == TESTED_VLLM:
        return
    defect = fix.DEFECT
    pytest.fail(
        f"vLLM {installed} is installed, but {fix.__name__} was checked against vLLM {TESTED_VLLM} only: "
        f"re-check that fix against the new vLLM. Is the defect still in {defect.where}: "
        f"{defect.wrong}? Upstream: {defect.upstream}. Then drop the fix or keep it, and set "
        "TESTED_VLLM in specdec/engines/vllm_version.py.", pytrace=False)
