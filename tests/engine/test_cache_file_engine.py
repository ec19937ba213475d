"""The draft cache file through a real engine: an unusable file found at start-up is moved
aside and the run starts cold (the driver logs the warning); after the generate call the
compiled drafter in vLLM's worker saves its cache under the current header with the model's
tokenizer hash, and the file loads into the Python reference too. One engine start (no
budget: calibration is not under test)."""

from __future__ import annotations

import logging

import pytest

from specdec.drafting import cache_file
from specdec.drafting.suffix_cache import SuffixTrieCache
from specdec.models import tokenizer_digest
from specdec.types import GenerationRequest, SamplingOptions

pytestmark = pytest.mark.slow


def test_an_engine_sets_a_damaged_file_aside_and_saves_a_good_one(engine_factory, default_model_dir, humaneval_rows,
                                                                  tmp_path, caplog):
    path = tmp_path / "cache.npz"
    path.write_text("not a draft cache")
    with caplog.at_level(logging.WARNING, logger="specdec.engines.vllm_engine"):
        engine = engine_factory("specdec", budget=False, cache_file=str(path))
    (aside,) = tmp_path.glob("cache.npz.unusable-*")
    assert not path.exists() and any(str(aside) in r.getMessage() for r in caplog.records), caplog.text
    tok = engine.tokenizer
    requests = [GenerationRequest(r["id"], tuple(tok.encode(r["prompt"][:300])), 16) for r in humaneval_rows[:4]]
    assert len(engine.generate(requests, SamplingOptions(temperature=0.0))) == 4
    digest = tokenizer_digest(default_model_dir)
    meta, _ = cache_file.read(path, digest)
    assert (meta["version"], meta["tokenizer"]) == (cache_file.VERSION, digest)
    contents = cache_file.read_contents(path, digest)
    assert len(contents.ids) == 4 and int(contents.lengths.min()) > 16  # prompt + output of each
    assert len(SuffixTrieCache.load(path, tokenizer=digest)) == 4
