"""The draft cache file through a real engine: an unusable file found at start-up is moved
aside and the run starts cold (the driver logs the warning); after the generate call the
compiled drafter in vLLM's worker saves its cache under the current header with the model's
tokenizer hash, and the file loads into the Python reference too; the driver reads each
prompt's output length back from its history (to start long requests first). A re-run of the same
prompt drafts from the history the file kept of the first run's samples, and every sample
keeps the distribution it has without speculation. One engine start for the module (no
budget: calibration is not under test)."""

from __future__ import annotations

import logging

import pytest

from bench.engine_hooks import reset_proposer, run_batches
from specdec.drafting import cache_file
from specdec.length_history import LengthHistory
from oracles.suffix_cache import SuffixTrieCache
from specdec.models import tokenizer_digest
from specdec.stats import ShardStats
from specdec.types import SamplingOptions
from support import chi_square, sampling_probe
from support.prompt_requests import prompt_requests

pytestmark = pytest.mark.slow

ALPHA = 1e-3  # chi-square significance, as in test_fidelity.py
EPOCH_SEEDS = (60_000, 70_000)  # two runs' samples: disjoint from every other probe's seeds
# test_fidelity.py's plain temperature-0.8 probe (probe_factory shares it within a session)
PLAIN = ("none", 20_000, {"temperature": 0.8})
NUM_SAMPLES = 200


@pytest.fixture(scope="module")
def cache_path(tmp_path_factory):
    """One file for the module, so that its tests share one engine."""
    return tmp_path_factory.mktemp("draft-cache") / "cache.npz"


def test_an_engine_sets_a_damaged_file_aside_and_saves_a_good_one(engine_factory, default_model_dir, humaneval_rows,
                                                                  cache_path, caplog):
    path, tmp_path = cache_path, cache_path.parent
    path.write_text("not a draft cache")
    with caplog.at_level(logging.WARNING, logger="specdec.engines.vllm_engine"):
        engine = engine_factory("specdec", budget=False, cache_file=str(path))
    (aside,) = tmp_path.glob("cache.npz.unusable-*")
    assert not path.exists() and any(str(aside) in r.getMessage() for r in caplog.records), caplog.text
    requests = prompt_requests(humaneval_rows[:4], engine.tokenizer, 16, engine.engine_config.max_model_len,
                               prompt_chars=300)
    results = run_batches(engine, requests, SamplingOptions(temperature=0.0))
    assert len(results) == 4
    digest = tokenizer_digest(default_model_dir)
    meta, _ = cache_file.read(path, digest)
    assert (meta["version"], meta["tokenizer"]) == (cache_file.VERSION, digest)
    contents = cache_file.read_contents(path, digest)
    assert len(contents.ids) == 4 and int(contents.lengths.min()) > 16  # prompt + output of each
    assert len(SuffixTrieCache.load(path, tokenizer=digest)) == 4
    # the driver finds each prompt the drafter recorded (long requests first)
    history = LengthHistory.read(path, digest)
    assert history is not None
    assert history.expected_tokens(requests) == [float(len(r.output_token_ids)) for r in results]


def test_a_rerun_drafts_from_history_and_keeps_the_sampling_distribution(engine_factory, cache_path, probe_factory):
    """Run 1 samples one prompt NUM_SAMPLES times and saves the cache file (cache and the
    prompt's history); run 2, a new controller started from that file as a nightly re-run
    would start, samples the prompt again with new seeds. Some of run 2's verified drafts
    come from the history, and its samples' first tokens keep the distribution they have
    without speculation (chi-square, as test_fidelity.py)."""
    engine = engine_factory("specdec", budget=False, cache_file=str(cache_path))
    options = SamplingOptions(temperature=0.8, ignore_eos=True)
    reset_proposer(engine)  # whatever the file holds now: not under test
    run_batches(engine, sampling_probe.sample_requests(engine, EPOCH_SEEDS[0], NUM_SAMPLES), options)
    reset_proposer(engine)  # the re-run starts from the file the first run saved
    stats = ShardStats()
    rerun = run_batches(engine, sampling_probe.sample_requests(engine, EPOCH_SEEDS[1], NUM_SAMPLES), options, stats=stats)
    counts = sampling_probe.source_counts(stats)
    probe = sampling_probe.summarize(rerun)
    print(f"\nre-run drafts by source: {counts}; accepted {probe['num_accepted_tokens']} of "
          f"{probe['num_draft_tokens']} draft tokens")
    assert counts.get("history", (0, 0))[0] > 0, f"no draft came from the history: {counts}"
    assert probe["num_accepted_tokens"] >= NUM_SAMPLES, "too little speculation"
    method, seed, sampling = PLAIN
    plain = probe_factory(method, seed, sampling, num_samples=NUM_SAMPLES, num_repeat=0)
    result = chi_square.same_distribution(chi_square.first_tokens(plain["samples"]),
                                          chi_square.first_tokens(probe["samples"]))
    print(f"re-run vs no speculation: {result}, alpha={ALPHA}")
    assert result.p_value > ALPHA, f"drafting from history changed the sampling distribution: {result}"
