"""The rewind of seeded requests' CPU generators (specdec.vllm_plugins.fixes.seeded_chunk),
without engines: vLLM's own rewind still crashes on a CPU generator, the generator, vLLM's
rewind call on it, the plugin hook (registered in a fresh interpreter:
tests/process/test_vllm_plugin_register.py) and its switch. That seeded requests with a chunked
prefill complete on the real engine, with the samples of unchunked runs, is checked in
tests/engine/test_seeded_chunk_engine.py. Every test here fails on an untested vLLM release."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from specdec.vllm_plugins.fixes import seeded_chunk
from specdec.vllm_plugins.fixes.seeded_chunk import RewindableGenerator
from support.plugin_checks import register_afresh

pytestmark = pytest.mark.vllm_fix(seeded_chunk)

VOCAB = 1000


def draw(generator: torch.Generator) -> torch.Tensor:
    """What vLLM's random sampler draws for one seeded request: exponential noise over the
    vocabulary."""
    return torch.empty(VOCAB).exponential_(generator=generator)


def rewind(generator: torch.Generator) -> None:
    """vLLM's rewind of a discarded sample (GPUModelRunner._bookkeeping_sync)."""
    generator.set_offset(generator.get_offset() - 4)


def discarding_runner(generator: torch.Generator) -> types.SimpleNamespace:
    """What GPUModelRunner._bookkeeping_sync reads before its rewind: one request, whose
    sampled token is discarded (a non-final prefill chunk), with its own generator."""
    batch = types.SimpleNamespace(num_reqs=1, generators={0: generator})
    return types.SimpleNamespace(input_batch=batch, discard_request_mask=types.SimpleNamespace(np=np.ones(1, bool)))


def test_vllms_own_rewind_still_crashes_on_a_cpu_generator() -> None:
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    with pytest.raises(RuntimeError, match="does not use offset"):  # the crash, before anything else runs
        GPUModelRunner._bookkeeping_sync(discarding_runner(torch.Generator().manual_seed(1)), None, None, None, None, 0)
    assert seeded_chunk.cpu_offsets_unsupported()
    # With the fix's generator, vLLM's rewind goes through and the function goes on (to what
    # the stand-in runner does not have).
    generator = RewindableGenerator().manual_seed(1)
    generator.checkpoint()
    with pytest.raises(AttributeError):
        GPUModelRunner._bookkeeping_sync(discarding_runner(generator), None, None, None, None, 0)
    assert generator.get_offset() == 0  # rewound


def test_plain_cpu_generator_has_no_offset() -> None:
    # What vLLM's rewind does to a plain CPU generator.
    with pytest.raises(RuntimeError, match="does not use offset"):
        rewind(torch.Generator().manual_seed(1))


def test_rewind_repeats_the_undone_draws() -> None:
    gen = RewindableGenerator().manual_seed(7)
    gen.checkpoint()
    discarded = draw(gen)
    rewind(gen)
    assert torch.equal(draw(gen), discarded)


def test_rewound_stream_is_the_unchunked_stream() -> None:
    # Chunked: two discarded samples, then the real ones. Unchunked: the real ones at once.
    unchunked = torch.Generator().manual_seed(123)
    want = [draw(unchunked) for _ in range(3)]
    gen = RewindableGenerator.like(torch.Generator().manual_seed(123))
    for _ in range(2):  # non-final prefill chunks
        gen.checkpoint()
        draw(gen)
        rewind(gen)
    got = []
    for _ in range(3):
        gen.checkpoint()
        got.append(draw(gen))
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert gen.get_offset() == 3 * seeded_chunk.OFFSET_PER_STEP


def test_rewind_goes_back_one_step_only() -> None:
    gen = RewindableGenerator().manual_seed(3)
    gen.checkpoint()
    first = draw(gen)
    gen.checkpoint()
    second = draw(gen)
    rewind(gen)
    assert torch.equal(draw(gen), second)  # back to the last checkpoint, not the first
    assert not torch.equal(first, second)
    with pytest.raises(ValueError, match="last checkpoint"):
        rewind(gen)  # the checkpoint was used up
    with pytest.raises(ValueError, match="last checkpoint"):
        RewindableGenerator().set_offset(0)  # never checkpointed
    gen.checkpoint()
    with pytest.raises(ValueError, match="last checkpoint"):
        gen.set_offset(gen.get_offset() - 8)  # further than one step


def test_like_copies_the_stream_and_works_with_torch_ops() -> None:
    plain = torch.Generator().manual_seed(99)
    draw(plain)
    copy = RewindableGenerator.like(plain)
    assert copy.device == plain.device
    assert torch.equal(draw(copy), draw(plain))
    probs = torch.tensor([0.1, 0.2, 0.7])
    assert torch.equal(torch.multinomial(probs, 2, generator=copy), torch.multinomial(probs, 2, generator=plain))


def test_opt_out_env_skips_patching(monkeypatch) -> None:
    register_afresh(monkeypatch, seeded_chunk, switched_off=True, never_called=["on_cpu_platform", "_targets"])


def test_other_platforms_are_left_alone(monkeypatch) -> None:
    monkeypatch.setattr(seeded_chunk, "on_cpu_platform", lambda: False)
    register_afresh(monkeypatch, seeded_chunk, switched_off=False, never_called=["_targets"])
