"""The recovery-noise speedup (specdec.vllm_plugins.speedups.recovered_draws): vLLM's own function
still draws noise nobody reads, the noise against what each row needs, vLLM's own function
against the replacement on the same generators, the plugin hook (registered in a fresh
interpreter: tests/process/test_vllm_plugin_register.py). That sampling with speculation keeps
its distribution on the real engine, with the speedup installed, is checked in
tests/engine/test_fidelity.py and tests/engine/test_sampling_fix_engine.py. Every test here
fails on an untested vLLM release."""

from __future__ import annotations

import pytest
import torch

from specdec.vllm_plugins.speedups import recovered_draws
from specdec.vllm_plugins.speedups.recovered_draws import recovery_noise
from support.plugin_checks import pristine_vllm_module, register_afresh

pytestmark = pytest.mark.vllm_fix(recovered_draws)

VOCAB = 49152  # the default model's: enough draws per row to pin their mean and spread


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


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    register_afresh(monkeypatch, recovered_draws, switched_off=True, never_called=["on_cpu_platform", "replace_in_vllm"])


def test_no_op_off_cpu(monkeypatch) -> None:
    monkeypatch.setattr(recovered_draws, "on_cpu_platform", lambda: False)
    register_afresh(monkeypatch, recovered_draws, switched_off=False, never_called=["replace_in_vllm"])
