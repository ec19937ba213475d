"""`specdec bench` pieces that need no engine: replay methods on synthetic greedy outputs,
records, plots and the DuckDB store."""

from pathlib import Path

import numpy as np
import pytest

from specdec.bench.plots import write_plots
from specdec.bench.replay_bench import builtin_methods, render_replay_table, run_replay
from specdec.engines.replay import ReplayRequest
from support.db import query
from support.replay_requests import synthetic_requests
from tasks.bench_store import store


def test_replay_methods_report_identical_outputs_and_specdec_beats_ngram_here(tmp_path):
    methods = builtin_methods()
    reqs = synthetic_requests()
    names = ("none", "ngram", "specdec", "specdec[window-K]")
    records = {name: run_replay(methods[name], reqs, 4, "synthetic")[0] for name in names}
    assert all(r.outputs_identical_to_none for r in records.values())
    assert records["none"].tokens_per_forward == 1.0
    # text that repeats across requests: the cross-request cache drafts what lookup cannot
    assert records["specdec"].tokens_per_forward > records["ngram"].tokens_per_forward > 1.0
    assert records["specdec[window-K]"].tokens_per_forward > 1.5
    table = render_replay_table(list(records.values()))
    assert "specdec" in table and "x ngram" in table


def test_warm_mode_scores_each_prompt_once_with_the_other_halfs_cache():
    rng = np.random.default_rng(5)
    answer = rng.integers(100, 200, size=30).tolist()  # every request answers this, never in a prompt
    reqs = [ReplayRequest(f"r{i}", rng.integers(0, 50, size=10).tolist(), answer + [1] * 9, 30) for i in range(6)]
    methods = builtin_methods()
    cold, cold_results = run_replay(methods["specdec"], reqs, 4, "synthetic")
    warm, warm_results = run_replay(methods["specdec[warm]"], reqs, 4, "synthetic")
    assert [r.id for r in warm_results] == [r.id for r in reqs] and warm.outputs_identical_to_none
    # Cold, the first request has nothing to draft from; warm, no request starts empty-handed.
    assert cold_results[0].stats.num_steps > max(r.stats.num_steps for r in warm_results)
    assert warm.tokens_per_forward > cold.tokens_per_forward


def test_records_go_to_plots_and_duckdb(tmp_path):
    methods = builtin_methods()
    reqs = synthetic_requests(4)
    rows = []
    for k in (1, 3):
        for name in ("none", "specdec"):
            rec = run_replay(methods[name], reqs, k, "synthetic")[0]
            rows.append(rec.__dict__)
    rows.append({**rows[0], "engine": "vllm", "method": "none", "batch_size": 1, "tokens_per_s": 10.0})
    rows.append({**rows[1], "engine": "vllm", "method": "specdec", "batch_size": 1, "tokens_per_s": 15.0})
    paths = write_plots(rows, tmp_path / "plots")
    assert {p.name for p in paths} == {"tokens_per_s_vs_batch.png", "tokens_per_forward_vs_k.png", "acceptance_by_position.png"}
    assert all(p.stat().st_size > 1000 for p in paths)
    db = tmp_path / "bench.duckdb"
    bench_id = store(str(db), rows)
    assert query(db, "SELECT count(*) FROM bench_results WHERE bench_id = ?", [bench_id]) == [(len(rows),)]
    assert query(db, "SELECT speedup_vs_none FROM v_bench_speedup WHERE engine = 'vllm' AND method = 'specdec'") == [
        (1.5,)]


class RecordingEngine:
    """Stands in for VllmEngine to check how the bench drives engines (no model runs)."""

    started: list["RecordingEngine"] = []

    def __init__(self, engine_cfg, spec) -> None:
        self.spec, self.resets, self.calls = spec, 0, []
        self.cached: list[str] = self._load_cache()  # request ids in the cross-request cache
        self.cache_at_reset: list[list[str]] = []
        RecordingEngine.started.append(self)

    def generate(self, requests, sampling, batch_size=None):
        from specdec.stats import RequestStats
        from specdec.types import GenerationResult

        self.calls.append((len(requests), batch_size))
        self.cached += [r.id for r in requests]
        if self.spec.cache_file:  # like VllmEngine: the cache is written after every call
            Path(self.spec.cache_file).write_text("\n".join(self.cached))
        stats = RequestStats(4, 4, 0, 0, 0, [0] * self.spec.k_max, [4] + [0] * self.spec.k_max, 4)
        return [GenerationResult(r.id, "", [1, 2, 3, 4], "length", stats, [], []) for r in requests]

    def reset_proposer(self) -> None:
        self.resets += 1
        self.cached = self._load_cache()
        self.cache_at_reset.append(list(self.cached))

    def _load_cache(self) -> list[str]:
        path = Path(self.spec.cache_file) if self.spec.cache_file else None
        return path.read_text().split("\n") if path is not None and path.exists() else []

    def step_cost(self):
        return None

    def close(self) -> None:
        pass


def test_real_engine_bench_starts_every_batch_size_cold(monkeypatch):
    from specdec.bench import throughput
    from specdec.config import EngineConfig
    from specdec.engines import vllm_engine
    from specdec.types import GenerationRequest

    monkeypatch.setattr(vllm_engine, "VllmEngine", RecordingEngine)
    requests = [GenerationRequest(f"p{i}", [1, 2, 3], 4) for i in range(20)]
    warmup = [GenerationRequest("w", [4, 5], 4)]
    for name in ("specdec", "suffix"):
        RecordingEngine.started = []
        spec = throughput.engine_methods(4)[name]
        records, outputs = throughput.run_method(name, spec, EngineConfig(max_model_len=2048), requests, warmup, [1, 16], "d", None, 8)
        # suffix's cache lives inside vLLM: a fresh engine per batch size; ours is reset in place
        engines = RecordingEngine.started
        assert len(engines) == (2 if name == "suffix" else 1)
        assert sum(e.resets for e in engines) == 2  # once before each batch size
        assert all(e.calls[0] == (1, None) for e in engines)  # each engine warmed up first
        assert [(r.batch_size, r.num_requests) for r in records] == [(1, 8), (16, 16)]
        assert len(outputs) == 16 and all(r.method == name for r in records)


def test_warm_bench_starts_every_batch_size_from_the_cache_of_other_prompts(monkeypatch):
    from specdec.bench import throughput
    from specdec.config import EngineConfig
    from specdec.engines import vllm_engine
    from specdec.types import GenerationRequest

    monkeypatch.setattr(vllm_engine, "VllmEngine", RecordingEngine)
    RecordingEngine.started = []
    requests = [GenerationRequest(f"p{i}", [1, 2, 3], 4) for i in range(20)]
    warmup = [GenerationRequest("w", [4, 5], 4)]
    warm_from = [GenerationRequest(f"old{i}", [6, 7], 4) for i in range(5)]
    spec = throughput.engine_methods(4)["specdec[warm]"]
    records, _ = throughput.run_method("specdec[warm]", spec, EngineConfig(max_model_len=2048), requests, warmup, [1, 16], "d", None, 8,
                                       warm_from)
    [engine] = RecordingEngine.started
    assert engine.calls[:2] == [(1, None), (5, None)]  # warm-up, then the warm set in one go
    old = [r.id for r in warm_from]
    # The warm set's run starts cold; each measured batch size starts from exactly its cache,
    # never from the measured prompts of an earlier batch size (nor the warm-up prompt).
    assert engine.cache_at_reset == [[], old, old]
    assert [(r.batch_size, r.num_requests) for r in records] == [(1, 8), (16, 16)]
    assert all("5 other prompts" in r.started_from for r in records)
    assert not Path(engine.spec.cache_file).parent.exists()  # the bench's own folder is cleaned up
    with pytest.raises(ValueError, match="needs prompts"):
        throughput.run_method("specdec[warm]", spec, EngineConfig(max_model_len=2048), requests, warmup, [1], "d", None, 8)
