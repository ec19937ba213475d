"""Replace vLLM's `apply_top_k_only` (DEFECT), which crashes on a batch of no draft tokens: with
speculation every step goes through the rejection sampler, whose sampling constraints see the draft
tokens' logits only ([0, vocab] on a step without drafts); without Triton (the CPU build), top-k
without top-p goes to `apply_top_k_only`, whose `k.max()` raises: the worker dies on the first step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, UpstreamDefect, install_where_needed, plugin_log

DEFECT = UpstreamDefect("vllm.v1.sample.ops.topk_topp_sampler", "apply_top_k_only",
    wrong="`k.max()` raises on the empty batch of a step without draft tokens (top-k set, top-p not)",
    upstream="none found (searched vllm-project/vllm issues and PRs)")
DISABLE_ENV = "SPECDEC_DISABLE_TOPK_FIX"
_once = InstallOnce(DISABLE_ENV, plugin_log("top_k_only"), "top-k fix")


def apply_top_k_only(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Set every logit below its row's k-th largest to -inf, in place, and return `logits`.
    Rows with k outside [1, vocab) keep every logit (vLLM stores "no top-k" as k = vocab);
    ties with the k-th largest are kept; an empty batch is returned as is."""
    num_rows, vocab = logits.shape
    if num_rows == 0:
        return logits
    k = k.to(device=logits.device, dtype=torch.long)
    keep_all = (k < 1) | (k >= vocab)
    k = k.masked_fill(keep_all, 1)  # any valid rank: those rows' threshold is -inf below
    # One topk call for the whole batch, as deep as the largest k asked for.
    top = logits.topk(int(k.max()), dim=1).values
    threshold = top.gather(1, (k - 1).unsqueeze(1))
    threshold.masked_fill_(keep_all.unsqueeze(1), -float("inf"))
    return logits.masked_fill_(logits < threshold, -float("inf"))


def _is_defective(fn: Callable[..., Any]) -> bool:
    """Run `fn` on an empty batch (the crash) and on a small one; anything but the right
    answer counts as defective, since the replacement is correct whatever the cause."""
    try:
        empty = fn(torch.empty(0, 4), torch.empty(0, dtype=torch.int32))
        logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [4.0, 1.0, 2.0, 3.0]])
        masked = fn(logits.clone(), torch.tensor([2, 4], dtype=torch.int32))
    except Exception:  # the known crash, or a changed signature: not usable as is
        return True
    inf = float("inf")
    want = torch.tensor([[-inf, 3.0, 2.0, -inf], [4.0, 1.0, 2.0, 3.0]])
    return tuple(empty.shape) != (0, 4) or not torch.equal(masked, want)


def register() -> None:
    """Install `apply_top_k_only` where vLLM's crashing one lives (if it crashes)."""
    install_where_needed(_once, DEFECT, apply_top_k_only, _is_defective)
