"""`specdec bench --engine vllm`'s rounds on the real engine, kept small: two methods, two
batch sizes, two rounds. The prefix-cache reset, the prefill pass and the per-round ratios
run for real; the scheduling itself is checked without an engine in
tests/unit/test_bench_rounds.py. The rounds run on the suite's shared `none` and ngram[2..5]
engines (test_engine_greedy.py, which runs just before, starts both): two engine starts
(~1 min on 2 cores) spared. The rounds still ask for an engine per method and close it; here
those calls are served by the shared engines, which stay up (a real start with the bench's
own small config is not exercised)."""

from __future__ import annotations

import pytest

import specdec.engines.vllm_engine as vllm_engine
from bench.throughput import engine_methods, run_rounds
from specdec.config import EngineConfig, SpecConfig
from specdec.types import GenerationRequest

pytestmark = pytest.mark.slow


def test_interleaved_rounds_on_the_real_engine_keep_greedy_outputs(engine_factory, monkeypatch):
    specs = engine_methods(4)
    started: list[SpecConfig] = []

    def shared_engine(engine_cfg: EngineConfig, spec: SpecConfig):
        """The shared engine for `spec` in place of a new one; the bench's close leaves it up."""
        engine = engine_factory(spec.method, k_max=spec.k_max, ngram_min=spec.ngram_min, ngram_max=spec.ngram_max)
        assert engine.spec == spec
        monkeypatch.setattr(engine, "close", lambda: None)
        started.append(spec)
        return engine

    monkeypatch.setattr(vllm_engine, "VllmEngine", shared_engine)
    # repeating text, so that n-gram lookup has something to draft
    requests = [GenerationRequest(f"p{i}", tuple(range(200 + i, 240 + i)) * 2, 8) for i in range(2)]
    warmup = [GenerationRequest("w", tuple(range(300, 320)), 4)]
    engine_cfg = EngineConfig(max_model_len=512, kv_cache_gib=1.0)
    records = run_rounds({n: specs[n] for n in ("none", "ngram[2..5]")}, engine_cfg, [requests], warmup,
                         [1, 2], 2, "synthetic", min_prompts=2)
    assert started == [specs["none"], specs["ngram[2..5]"]]  # one engine per method, kept over the rounds
    assert [(r.method, r.batch_size, r.rounds) for r in records] == [
        ("none", 1, 2), ("ngram[2..5]", 1, 2), ("none", 2, 2), ("ngram[2..5]", 2, 2)]
    assert all(r.outputs_identical_to_none for r in records)
    assert all(r.decode_tokens_per_s > 0 and r.prefill_seconds > 0 and r.tokens_per_s > 0 for r in records)
    assert all(r.decode_speedup_vs_none.low <= r.decode_speedup_vs_none.median <= r.decode_speedup_vs_none.high
               for r in records)
    assert all(r.num_requests == 2 and r.num_output_tokens == 2 * 2 * 8 for r in records)
