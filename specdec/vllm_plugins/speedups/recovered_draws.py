"""Draw the rejection sampler's recovery noise only for the rows that read it (CPU): vLLM's
`sample_recovered_tokens` (DEFECT) fills [rows, vocab] with global exponential noise every sampled
step, then draws seeded rows again, though only rows with drafts are read (on CPU a visible share of
the step). Here a seeded row draws from its own generator in vLLM's order (exactly vLLM's tokens)."""

from __future__ import annotations

import importlib
from typing import Any

import torch

from specdec.vllm_plugins.patching import InstallOnce, UpstreamDefect, install_where_needed, on_cpu_platform, plugin_log

DEFECT = UpstreamDefect("vllm.v1.sample.rejection_sampler", "sample_recovered_tokens",
    wrong="draws [rows, vocab] global noise every sampled step, also for rows that never read it",
    upstream="vllm-project/vllm#40877 (closed unmerged: skip the global fill when every drafting row is seeded)")
DISABLE_ENV = "SPECDEC_DISABLE_RECOVERED_DRAWS_FIX"
_KERNEL_ATTR = "_sample_recovered_tokens"  # the recovery kernel's dispatcher, called as vLLM does

_once = InstallOnce(DISABLE_ENV, plugin_log("recovered_draws"), "recovered-draws speedup")


def recovery_noise(num_draft_tokens: list[int], generators: dict[int, torch.Generator], vocab_size: int,
                   dtype: torch.dtype, device: torch.device) -> torch.Tensor:
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


def sample_recovered_tokens(max_spec_len: int, num_draft_tokens: list[int], cu_num_draft_tokens: torch.Tensor,
                            draft_token_ids: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                            sampling_metadata: Any, device: torch.device,
                            use_fp64_gumbel: bool = False) -> torch.Tensor:
    """vLLM's `sample_recovered_tokens` (same arguments and result) on `recovery_noise`."""
    noise = recovery_noise(num_draft_tokens, sampling_metadata.generators, target_probs.shape[-1],
                           torch.float64 if use_fp64_gumbel else torch.float32, device)
    recovered_token_ids = torch.empty_like(draft_token_ids)
    kernel = getattr(importlib.import_module(DEFECT.module), _KERNEL_ATTR)
    kernel(recovered_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs, target_probs,
           noise.reciprocal(), max_spec_len=max_spec_len)
    return recovered_token_ids


def register() -> None:
    """Install `sample_recovered_tokens` in vLLM's rejection sampler (CPU only)."""
    install_where_needed(_once, DEFECT, sample_recovered_tokens, lambda _: on_cpu_platform() and callable(
        getattr(importlib.import_module(DEFECT.module), _KERNEL_ATTR, None)))
