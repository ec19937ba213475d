"""Let vLLM's model runner rewind the generators of seeded requests on CPU. When a step samples a
token it throws away (a prefill chunk that is not the prompt's last), `_bookkeeping_sync` (DEFECT),
which the CPU runner inherits, undoes its draws with `gen.set_offset(gen.get_offset() - 4)`, a CUDA
generator's Philox offset: a CPU generator raises "CPU Generator does not use offset" and the worker
dies (specdec seeds every sample). The fix keeps vLLM's semantics: seeded requests' CPU generators
become `RewindableGenerator`s (`CachedRequestState.__post_init__`), which checkpoint before each
`CPUModelRunner._sample`."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, UpstreamDefect, on_cpu_platform, plugin_log

DEFECT = UpstreamDefect("vllm.v1.worker.gpu_model_runner", "GPUModelRunner._bookkeeping_sync",
    wrong="rewinds a discarded sample with set_offset, which a CPU generator does not have (the worker dies)",
    upstream=("none found in vllm-project/vllm; the `- 4` came with #10097 ('relies on cuda-specific "
              "torch-internal impl details'); RBLN-SW/vllm-rbln#1025 fixes the same in its runner"))
DISABLE_ENV = "SPECDEC_DISABLE_SEEDED_CHUNK_FIX"
_RUNNER_MODULE = "vllm.v1.worker.cpu_model_runner"
_RUNNER_CLASS = "CPUModelRunner"
_STATE_MODULE = "vllm.v1.worker.gpu_input_batch"
_STATE_CLASS = "CachedRequestState"
_PATCHED = "_specdec_seeded_chunk_fix"  # marks our wrappers: never wrap twice

# The offset step vLLM rewinds by: what one sampling kernel advances a CUDA generator.
OFFSET_PER_STEP = 4

_once = InstallOnce(DISABLE_ENV, plugin_log("seeded_chunk"), "seeded chunked-prefill fix")


class RewindableGenerator(torch.Generator):
    """A CPU generator whose last sampling step can be undone through vLLM's offset calls:
    `checkpoint()` keeps the state and advances the reported offset by OFFSET_PER_STEP;
    `set_offset()` accepts only one step back, and restores that state."""

    def __init__(self, device: str | torch.device = "cpu") -> None:
        # torch.Generator takes `device` in __new__; its __init__ is object's, which takes
        # no arguments: nothing to pass on.
        self._steps = 0
        self._checkpoint: torch.Tensor | None = None

    @classmethod
    def like(cls, generator: torch.Generator) -> RewindableGenerator:
        """A copy of `generator` (same device, same state: the same numbers to come)."""
        copy = cls(generator.device)
        copy.set_state(generator.get_state())
        return copy

    def checkpoint(self) -> None:
        self._checkpoint = self.get_state()
        self._steps += 1

    def get_offset(self) -> int:
        return self._steps * OFFSET_PER_STEP

    def set_offset(self, offset: int) -> None:
        if self._checkpoint is None or offset != self.get_offset() - OFFSET_PER_STEP:
            raise ValueError(f"RewindableGenerator can only go back to its last checkpoint (offset "
                             f"{self.get_offset() - OFFSET_PER_STEP}), not to offset {offset}")
        self.set_state(self._checkpoint)
        self._checkpoint = None  # one step back only, as vLLM asks
        self._steps -= 1


def cpu_offsets_unsupported() -> bool:
    """True where torch's CPU generator has no offset (the crash); a torch that gave it one
    would still need a look at what vLLM's `- 4` means for it, so then we stand aside."""
    try:
        torch.Generator().set_offset(torch.Generator().get_offset())
    except RuntimeError:
        return True
    return False


def _rewindable_post_init(original: Callable[[Any], None]) -> Callable[[Any], None]:
    @functools.wraps(original)
    def __post_init__(self: Any) -> None:
        original(self)
        generator = self.generator
        # Exact type: leave anything vLLM (or someone else) already specialised alone.
        if type(generator) is torch.Generator and generator.device.type == "cpu":
            self.generator = RewindableGenerator.like(generator)

    setattr(__post_init__, _PATCHED, True)
    return __post_init__


def _checkpointing_sample(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _sample(self: Any, *args: Any, **kwargs: Any) -> Any:
        for generator in self.input_batch.generators.values():
            if isinstance(generator, RewindableGenerator):
                generator.checkpoint()
        return original(self, *args, **kwargs)

    setattr(_sample, _PATCHED, True)
    return _sample


def _targets() -> tuple[type, type] | None:
    """vLLM's CPU model runner class and request-state class, if both are as expected."""
    try:
        runner = getattr(importlib.import_module(_RUNNER_MODULE), _RUNNER_CLASS)
        state = getattr(importlib.import_module(_STATE_MODULE), _STATE_CLASS)
    except (ImportError, AttributeError):
        return None
    if not callable(getattr(runner, "_sample", None)) or not callable(getattr(state, "__post_init__", None)):
        return None
    return runner, state


def register() -> None:
    """Install the two wrappers in vLLM's CPU model runner; a no-op off the CPU platform,
    where torch's CPU generator has offsets, or where vLLM's classes are not as expected."""
    if not _once.first_call():
        return
    if not on_cpu_platform() or not cpu_offsets_unsupported():
        return
    targets = _targets()
    if targets is None:
        _once.log.warning("specdec: vLLM's CPU model runner is not as expected; seeded requests with a "
                    "chunked prefill may stop the engine")
        return
    runner, state = targets
    if not getattr(state.__post_init__, _PATCHED, False):
        state.__post_init__ = _rewindable_post_init(state.__post_init__)
    # Set on the CPU runner itself: GPUModelRunner (and GPU engines) stay untouched.
    if not getattr(runner._sample, _PATCHED, False):
        runner._sample = _checkpointing_sample(runner._sample)
    _once.log.info("specdec: seeded requests' CPU generators can be rewound (chunked prefill) in %s.%s",
             _RUNNER_MODULE, _RUNNER_CLASS)
