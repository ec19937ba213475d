"""Sampling probe shared by the sampling-distribution tests and their subprocess runs.

Many samples of one prompt (one row asking for `num_samples`, each sample with its own seed,
as the pipeline's `samples` gives them), a few tokens each: the raw material for a
distribution test (speculation on vs off) and a seed-reproducibility check. The samples are
siblings: specdec drafts them from each other's text as it is written (prompt groups, the
live index), and the probe records which sources its drafts came from. Tests get
probes through tests/conftest.py's `probe_factory`, which shares them within a test session.
Run as a script it starts its own engine (so env vars such as SPECDEC_DISABLE_SAMPLING_FIX
reach every vLLM process from the start) and writes the probe as JSON:

    python tests/support/sampling_probe.py --method specdec --seed 5000 --out probe.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any

# A repetitive snippet: the n-gram proposer drafts "\n    return x * 2" and the model
# follows it only part of the time ("return f(x)", "return (x", ...), so the rejection
# sampler picks most tokens and their distribution has some spread to test. The comment
# header takes the prompt past one KV block (128 tokens on CPU), so all requests after the
# first reuse its prefill from vLLM's prefix cache.
PROMPT = (
    "# Small arithmetic helpers used by the report generator.\n"
    "# Each helper takes one number and returns a scaled copy of it; keep them short,\n"
    "# pure and free of side effects so that they are easy to test and to reuse.\n\n"
    + "def f(x):\n    return x * 2\n\ndef g(x):\n    return x * 3\n\n" * 3
    + "def f(x):"
)
NUM_SAMPLES = 240
NUM_REPEAT = 8  # requests generated twice more, same seeds, to check they repeat
MAX_TOKENS = 4
# Default: temperature only, for test_sampling_fix_engine.py's run without the expand fix,
# where top-k would crash on its garbage top_k before there is a distribution to compare.
# test_fidelity.py passes its own (top-p, top-k) settings.
SAMPLING = {"temperature": 1.0}


def cold_generate(engine: Any, requests: list, sampling: Any, sequential: bool = False, stats: Any = None) -> list:
    """Generate from a cold drafting state (requests carry their own seeds).

    The drafts decide how many random numbers the rejection sampler draws, so a seeded run
    repeats only if the drafts do: specdec's cross-request cache must start equal and learn
    from the requests in the same order. In one batched call that order depends on when
    requests reach vLLM's engine process (timing); `sequential` runs them one at a time.
    `stats` (a ShardStats) gains the batched call's statistics, drafts by source included.
    """
    from bench.engine_hooks import reset_proposer, run_batches

    reset_proposer(engine)
    if not sequential:
        return run_batches(engine, requests, sampling, stats=stats)
    # One call per request, seeds set here: run_batches(batch_size=1) gives every group seed + 0.
    return [
        run_batches(engine, [r], dataclasses.replace(sampling, seed=sampling.seed + i))[0]
        for i, r in enumerate(requests)
    ]


def run_probe(
    engine: Any,
    seed: int,
    num_samples: int = NUM_SAMPLES,
    sampling: dict[str, Any] | None = None,
    num_repeat: int = NUM_REPEAT,
) -> dict:
    """Generate the probe on a started VllmEngine (sample i gets sample_seed(seed, row, i)); JSON-able.

    `sampling`: SamplingOptions fields (default SAMPLING). The draft figures are summed from
    vLLM's per-request spec-decode metrics, proof that speculation really ran (engine-wide
    counters from `get_metrics()` only follow the newest LLM of a process).
    """
    from specdec.stats import ShardStats
    from specdec.types import SamplingOptions

    requests = sample_requests(engine, seed, num_samples)
    options = SamplingOptions(seed=seed, ignore_eos=True, **(SAMPLING if sampling is None else sampling))
    stats = ShardStats()
    results = cold_generate(engine, requests, options, stats=stats)
    probe = summarize(results)
    probe["source_counts"] = source_counts(stats)  # this call's drafts (cold_generate reset them)
    first = cold_generate(engine, requests[:num_repeat], options, sequential=True)
    again = cold_generate(engine, requests[:num_repeat], options, sequential=True)
    return {**probe, "first": [r.output_token_ids for r in first], "again": [r.output_token_ids for r in again]}


def source_counts(stats: Any) -> dict[str, tuple[int, int]]:
    """A ShardStats' drafts by source as {source: (drafted, accepted)} ({} without drafts)."""
    from specdec.stats import DRAFT_SOURCES

    return dict(zip(DRAFT_SOURCES, zip(stats.drafted_by_source, stats.accepted_by_source)))


def sample_requests(engine: Any, seed: int, num_samples: int, row_id: str = "probe") -> list:
    """One row of PROMPT asking for `num_samples` samples, each seeded as the pipeline seeds it."""
    from specdec.sampling_seeds import sample_seed
    from specdec.types import GenerationRequest

    prompt_ids = tuple(engine.tokenizer.encode(PROMPT))
    return [GenerationRequest(row_id, prompt_ids, MAX_TOKENS, sample=i, seed=sample_seed(seed, row_id, i))
            for i in range(num_samples)]


def summarize(results: list) -> dict:
    """The samples' token ids and the draft figures summed over them (JSON-able)."""
    from specdec.stats import ShardStats

    total = ShardStats.aggregate(r.stats for r in results)
    return {
        "samples": [r.output_token_ids for r in results],
        "num_drafts": total.num_drafts,
        "num_draft_tokens": total.num_draft_tokens,
        "num_accepted_tokens": total.num_accepted_tokens,
        "accepted_per_pos": total.accepted_per_pos,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="specdec")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    from specdec.config import EngineConfig, SpecConfig
    from specdec.engines.vllm_engine import VllmEngine

    # Same engine settings as tests/conftest.py's engine_factory, and as its probe engines
    # specdec without the batch budget: the sampler is under test, and at the probe's batch
    # size the budget (rightly, on CPU) may draft nothing at all; no calibration at start-up.
    config = EngineConfig(max_model_len=2048, max_num_seqs=16, kv_cache_gib=1.0)
    spec = SpecConfig(method=args.method, budget=False) if args.method == "specdec" else SpecConfig(method=args.method)
    engine = VllmEngine(config, spec)
    with open(args.out, "w") as f:
        json.dump(run_probe(engine, args.seed), f)


if __name__ == "__main__":
    main()
