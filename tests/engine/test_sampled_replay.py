"""The replay's acceptance with sampled references against the real engine's, on the same
prompts and seeds (docs/internals.md, "Benchmarks": accepting a draft token iff it equals
the sampled reference token is exactly as likely as rejection sampling accepting it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bench.engine_hooks import run_batches
from bench.drafters import FixedK, VllmNgramProposer
from bench.reference import Workload, epoch_requests, reference
from specdec.config import EngineConfig, SpecConfig
from support.prompt_requests import prompt_requests
from support.replay_requests import replay

pytestmark = pytest.mark.slow

# Prefill and decode of 128 requests dominate the test. The bound is set by the number of
# requests more than by their length (drafts within a request are correlated): 48 tokens gave
# bound 0.105, 64 gave 0.098, 32 gave 0.126 (over POWER).
MAX_TOKENS = 48
K = 4
WORKLOAD = Workload(temperature=0.8, samples=8, seed=11)
Z = 4.0  # two-sided p of about 6e-5 under "the rates agree"
POWER = 0.12  # the bound must be tighter than this, or the test could not tell a real gap


def _rate_and_se(drafted: list[int], accepted: list[int]) -> tuple[float, float]:
    """Acceptance over all drafted tokens, and its standard error: the larger of the binomial
    one (every drafted token an independent trial) and the per-request (cluster) one, since
    a request's drafts share its text and are not independent of each other."""
    d, a = np.asarray(drafted, dtype=float), np.asarray(accepted, dtype=float)
    n = d.sum()
    rate = a.sum() / n
    binomial = math.sqrt(rate * (1 - rate) / n)
    cluster = math.sqrt(((a - rate * d) ** 2).sum()) / n
    return rate, max(binomial, cluster)


def test_replayed_acceptance_with_sampled_references_matches_the_engines(engine_factory, engine_config, humaneval_rows,
                                                                          tokenizer, default_model_dir, tmp_path,
                                                                          monkeypatch):
    rows = prompt_requests(humaneval_rows, tokenizer, MAX_TOKENS, engine_config.max_model_len)
    # ngram[2..5] at K = 4, the engine test_engine_greedy.py and test_fidelity.py share:
    # deterministic drafts of up to four tokens, the argument's case position by position
    ngram = SpecConfig(method="ngram", k_max=K, ngram_min=2, ngram_max=5)
    engine = engine_factory("ngram", k_max=K, ngram_min=ngram.ngram_min, ngram_max=ngram.ngram_max)
    results = run_batches(engine, epoch_requests(rows, WORKLOAD, 1), WORKLOAD.sampling)
    engine_rate, engine_se = _rate_and_se([sum(r.per_step_drafted) for r in results],
                                          [sum(r.per_step_accepted) for r in results])

    plain = engine_factory("none")
    # The reference is generated here, not read from a cache. Set only once both engines are up:
    # an engine started under it would first convert the model into tmp_path (~7 s) and run that copy.
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path))
    [references] = reference(rows, WORKLOAD, EngineConfig(max_model_len=2048), default_model_dir,
                             tokenizer.eos_token_id, engine=plain)
    replayed = replay(references, FixedK(ngram, VllmNgramProposer(ngram.ngram_min, ngram.ngram_max)))
    replay_rate, replay_se = _rate_and_se([sum(r.per_step_drafted) for r in replayed],
                                          [sum(r.per_step_accepted) for r in replayed])

    # Both are estimates of the same expectation from independent samples (the engine's
    # random stream differs from the reference's, so the texts differ): their difference has
    # standard error sqrt(se1^2 + se2^2).
    bound = Z * math.hypot(engine_se, replay_se)
    seen = (f"engine acceptance {engine_rate:.3f} (se {engine_se:.3f}, {sum(map(sum, (r.per_step_drafted for r in results)))}"
            f" drafted) vs replayed {replay_rate:.3f} (se {replay_se:.3f}, "
            f"{sum(map(sum, (r.per_step_drafted for r in replayed)))} drafted); bound {bound:.3f}")
    assert bound < POWER, f"too few drafted tokens to test anything: {seen}"
    assert abs(engine_rate - replay_rate) < bound, seen
    print(seen)
    # sampled text differs from greedy text: at T = 0.8 some drafts must be rejected
    assert 0.05 < replay_rate < 0.95 and 0.05 < engine_rate < 0.95
