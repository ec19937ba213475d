"""The top-k fix (specdec.vllm_plugins.fixes.top_k_only), without engines: vLLM's own function
still crashes, the replacement against a naive reference, the plugin hook (registered in a
fresh interpreter: tests/process/test_vllm_plugin_register.py). That top-k sampling with
speculation now runs on the real engine (and has the right distribution) is checked in
tests/engine/test_fidelity.py, where the speculative engines are already started. Every test
here fails on an untested vLLM release."""

from __future__ import annotations

import pytest
import torch

from specdec.vllm_plugins.fixes import top_k_only
from specdec.vllm_plugins.fixes.top_k_only import apply_top_k_only
from support.plugin_checks import pristine_vllm_module, register_afresh

pytestmark = pytest.mark.vllm_fix(top_k_only)

INF = float("inf")


def reference_top_k(logits: list[list[float]], k: list[int]) -> list[list[float]]:
    """Naive per-row loop: keep the logits >= the row's k-th largest, k >= vocab keeps all."""
    out = []
    for row, row_k in zip(logits, k):
        if not 1 <= row_k < len(row):
            out.append(list(row))
            continue
        kth = sorted(row, reverse=True)[row_k - 1]
        out.append([x if x >= kth else -INF for x in row])
    return out


@pytest.mark.parametrize("k_dtype", [torch.int32, torch.int64])
def test_top_k_matches_naive_reference(k_dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        rows = int(torch.randint(0, 7, (1,), generator=gen))  # 0: a step without drafts
        vocab = int(torch.randint(1, 40, (1,), generator=gen))
        # Small integers: many ties at the k-th value.
        logits = torch.randint(-5, 6, (rows, vocab), generator=gen).float()
        k = torch.randint(1, vocab + 3, (rows,), generator=gen).clamp(max=vocab).to(k_dtype)
        want = reference_top_k(logits.tolist(), k.tolist())
        got = apply_top_k_only(logits, k)
        assert got is logits  # in place, like vLLM's
        assert got.shape == (rows, vocab)
        assert got.tolist() == want, (logits, k)


def test_empty_batch_passes_through() -> None:
    logits = torch.empty(0, 49152)
    assert apply_top_k_only(logits, torch.empty(0, dtype=torch.int32)) is logits


def _pristine_vllm_function():
    return getattr(pristine_vllm_module(top_k_only), top_k_only.DEFECT.function)


def test_vllms_own_function_still_crashes_on_an_empty_batch_and_the_replacement_does_not() -> None:
    original = _pristine_vllm_function()
    with pytest.raises(RuntimeError, match="numel"):  # the crash seen on the engine
        original(torch.empty(0, 8), torch.empty(0, dtype=torch.int32))
    assert top_k_only._is_defective(original)
    assert not top_k_only._is_defective(apply_top_k_only)


def test_installed_function_agrees_with_replacement_on_non_empty_batches() -> None:
    # The replacement changes only the crash: same masks as vLLM's where vLLM's works.
    original = _pristine_vllm_function()
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        rows, vocab = int(torch.randint(1, 6, (1,), generator=gen)), 30
        logits = torch.randn(rows, vocab, generator=gen)
        k = torch.randint(1, vocab + 1, (rows,), generator=gen).to(torch.int32)
        assert torch.equal(original(logits.clone(), k.clone()), apply_top_k_only(logits.clone(), k))


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    register_afresh(monkeypatch, top_k_only, switched_off=True, never_called=["_is_defective"])


def test_correct_function_is_left_alone(monkeypatch) -> None:
    module = pytest.importorskip(top_k_only.DEFECT.module)
    monkeypatch.setattr(module, top_k_only.DEFECT.function, lambda logits, k: reference_fixed(logits, k))
    register_afresh(monkeypatch, top_k_only, switched_off=False, never_called=["replace_in_vllm"])


def reference_fixed(logits: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """A correct stand-in for vLLM's function (a future vLLM that fixed the crash)."""
    want = reference_top_k(logits.tolist(), k.tolist())
    return logits.copy_(torch.tensor(want, dtype=logits.dtype).reshape(logits.shape))
