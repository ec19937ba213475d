"""Rebinding a running engine's drafter to another specdec configuration: vLLM fixes K at
start-up, so a configuration may take any ceiling up to the engine's K, and drafts within
its own. Without vLLM: the worker's proposer on a stand-in input batch, and the engine
bench's rebind checks (the real engine rebinds in tests/engine/, whose specdec settings share
one engine through conftest's engine_factory)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specdec.config import ConfigError, SpecConfig
from specdec.engines.vllm_engine import VllmEngine
from specdec.engines.vllm_proposer import SpecdecVllmProposer
from support.engine_calls import rebind

ENGINE_K = 8
REPEATING = [5, 6, 7, 8, 9, 10, 11, 12] * 32  # own text that drafts as far as allowed


def _proposer() -> SpecdecVllmProposer:
    config = SimpleNamespace(speculative_config=SimpleNamespace(num_speculative_tokens=ENGINE_K),
                             scheduler_config=SimpleNamespace(max_num_seqs=4))
    return SpecdecVllmProposer(config)


def _longest_draft(proposer: SpecdecVllmProposer, steps: int = 12) -> int:
    """One row over `steps` steps, every drafted token accepted; the longest draft."""
    batch = SimpleNamespace(req_ids=["r"], num_prompt_tokens=np.array([16, 0, 0, 0]))
    tokens = np.zeros((4, len(REPEATING)), dtype=np.int64)
    tokens[0, : len(REPEATING)] = REPEATING
    longest, num_tokens = 0, 24
    for _ in range(steps):
        proposer.input_batch = batch
        drafts = proposer.propose([[int(tokens[0, num_tokens - 1])]], np.array([num_tokens]), tokens)
        longest = max(longest, len(drafts[0]))
        num_tokens += 1 + len(drafts[0])
    return longest


@pytest.mark.parametrize("k_max", [2, 4])
def test_a_smaller_ceiling_binds_and_drafts_within_it(k_max):
    proposer = _proposer()
    config = SpecConfig(method="specdec", k_max=k_max, budget=False)
    proposer.bind(SimpleNamespace(req_ids=[], num_prompt_tokens=np.zeros(4, dtype=np.int64)), config)
    assert _longest_draft(proposer) == k_max < ENGINE_K


def test_a_ceiling_above_the_engines_k_is_refused():
    proposer = _proposer()
    with pytest.raises(ValueError, match=f"> vLLM K={ENGINE_K}"):
        proposer.bind(SimpleNamespace(), SpecConfig(method="specdec", k_max=ENGINE_K + 1, budget=False))


def test_the_engine_rebinds_only_specdec_within_its_k():
    engine = object.__new__(VllmEngine)  # the checks come before any call to vLLM
    engine.spec, engine.k_ceiling = SpecConfig(method="specdec", k_max=4, budget=False), 4
    with pytest.raises(ConfigError, match="above this engine's K=4"):
        rebind(engine, SpecConfig(method="specdec", k_max=4))  # the budget's tail ceiling is 8
    with pytest.raises(ConfigError, match="only a specdec engine rebinds"):
        rebind(engine, SpecConfig(method="ngram", k_max=4))
    engine.spec = SpecConfig(method="ngram", k_max=4)
    with pytest.raises(ConfigError, match="only a specdec engine rebinds"):
        rebind(engine, SpecConfig(method="specdec", k_max=4, budget=False))
