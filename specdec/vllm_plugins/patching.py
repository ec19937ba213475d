"""What the vLLM plugins share: the defect a fix names, its log, installing once, where we run,
and swapping a function everywhere."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class UpstreamDefect:
    """What a fix works around in vLLM (shown by its tests when another vLLM is installed)."""

    module: str  # the vLLM module, "vllm.v1.sample.rejection_sampler"
    function: str  # the function (or Class.method) in it
    wrong: str  # what goes wrong, in one line
    upstream: str  # the vllm-project/vllm issue or PR, or that none was found

    @property
    def where(self) -> str:
        """`vllm/v1/sample/rejection_sampler.py: sample_recovered_tokens`."""
        return f"{self.module.replace('.', '/')}.py: {self.function}"


def plugin_log(name: str) -> logging.Logger:
    """The log of one plugin module. vLLM's "vllm" logger does not propagate and is the only
    one with a handler in its engine and worker processes: a child of it shows up there."""
    return logging.getLogger(f"vllm.specdec.{name}")


def vllm_function(module_name: str, attr: str, replacement: Callable[..., Any]) -> Callable[..., Any] | None:
    """vLLM's `module_name.attr`, or None where it is absent or already our `replacement`."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    original = getattr(module, attr, None)
    return None if original is None or original is replacement else original


@dataclasses.dataclass
class InstallOnce:
    """Whether a fix's `register()` should go on: only on its first call in a process
    (vLLM may call plugins more than once) and only when its opt-out `env` is not 1 (said
    in the log when it is)."""

    env: str
    log: logging.Logger
    what: str
    decided: bool = False

    def first_call(self) -> bool:
        if self.decided:
            return False
        self.decided = True
        if os.environ.get(self.env, "") != "1":
            return True
        self.log.info("specdec %s disabled by %s=1", self.what, self.env)
        return False


def on_cpu_platform() -> bool:
    try:
        from vllm.platforms import current_platform
    except Exception:
        return False
    return bool(current_platform.is_cpu())


def replace_in_vllm(defect: UpstreamDefect, original: Callable[..., Any], fixed: Callable[..., Any],
                    log: logging.Logger) -> None:
    """Put `fixed` wherever vLLM holds `original` (the function `defect` names), and say where."""
    log.info("specdec: replaced %s.%s (%s) in: %s", defect.module, defect.function, defect.wrong,
             ", ".join(rebind(original, fixed)))


def install_where_needed(once: InstallOnce, defect: UpstreamDefect, fixed: Callable[..., Any],
                         needed: Callable[[Callable[..., Any]], bool]) -> None:
    """On `once`'s first call, `fixed` in place of vLLM's function that `defect` names, if there is
    one and `needed(it)`."""
    if not once.first_call():
        return
    original = vllm_function(defect.module, defect.function, fixed)
    if original is not None and needed(original):
        replace_in_vllm(defect, original, fixed, once.log)


def rebind(original: Callable[..., Any], fixed: Callable[..., Any]) -> list[str]:
    """Point every reference to `original` at `fixed` (module attributes, and vLLM's
    `KernelOverride` wrappers, which keep it in `_impl`/`func`); return where it was found."""
    dispatcher = sys.modules.get("vllm.triton_utils.dispatcher")
    override_cls = getattr(dispatcher, "KernelOverride", None)
    places: list[str] = []
    for mod_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is original:
                setattr(module, attr, fixed)
                places.append(f"{mod_name}.{attr}")
            # Exact type check: never touch attributes of arbitrary objects (some are lazy
            # placeholders whose attribute access imports things or warns).
            elif override_cls is not None and type(value) is override_cls and value._impl is original:
                value._impl = fixed
                if getattr(value, "func", None) is original:
                    value.func = fixed
                places.append(f"{mod_name}.{attr} (KernelOverride)")
    # Keep vLLM's record of registered overrides truthful too.
    registry = getattr(dispatcher, "_registry", None)
    if isinstance(registry, dict):
        for name, (kernel, impl) in list(registry.items()):
            if impl is original:
                registry[name] = (kernel, fixed)
    return places
