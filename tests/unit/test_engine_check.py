"""The projection-vs-engine check drives engines as the simulator batches (stand-in engines,
no model): one engine per method, warmed up, interleaved rounds, medians side by side."""

import pytest

from specdec.bench import engine_check
from specdec.bench.records import ProjectionRecord
from specdec.budget import PrefillSample, StepSample
from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.types import GenerationRequest, GenerationResult


class StandInEngine:
    calls: list[tuple[str, int]] = []
    started: list["StandInEngine"] = []

    def __init__(self, engine_cfg, spec) -> None:
        assert all(e.closed for e in StandInEngine.started), "one engine at a time"
        self.cfg, self.spec, self.closed = engine_cfg, spec, False
        StandInEngine.started.append(self)

    def generate(self, requests, sampling, batch_size=None):
        StandInEngine.calls.append((self.spec.method, len(requests)))
        return [GenerationResult(r.id, "", [1, 2, 3], "length", None, [], []) for r in requests]

    def reset_proposer(self) -> None:
        StandInEngine.calls.append((self.spec.method, 0))

    def reset_prefix_cache(self) -> None:
        StandInEngine.calls.append((self.spec.method, -1))

    def recalibrate(self):
        StandInEngine.calls.append((self.spec.method, -2))
        return [StepSample(1, 1, 8, 0, 0.02)], [PrefillSample(1, 8, 0.01)]

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def stand_in(monkeypatch):
    from specdec.engines import vllm_engine

    monkeypatch.setattr(vllm_engine, "VllmEngine", StandInEngine)
    StandInEngine.calls, StandInEngine.started = [], []


def test_rounds_are_interleaved_and_batches_run_as_the_simulator_runs_them(stand_in):
    requests = [GenerationRequest(f"p{i}", [1, 2], 3) for i in range(4)]
    methods = {"none": SpecConfig(method="none"), "specdec": SpecConfig(method="specdec")}
    run = engine_check.measure(methods, EngineConfig(max_model_len=64), requests, requests[:1], [1, 4], rounds=2)
    # a fresh engine per method and round, one at a time, each closed before the next starts
    assert [e.spec.method for e in StandInEngine.started] == ["none", "specdec"] * 2
    assert all(e.cfg.max_num_seqs == 4 and e.closed for e in StandInEngine.started)
    # per round and method: warm-up, batch 1 (resets: drafter, prefix cache; then one request at
    # a time), batch 4 (resets, then all at once)
    one_round = [c for m in ("none", "specdec") for c in [(m, 1), (m, 0), (m, -1)] + [(m, 1)] * 4
                 + [(m, 0), (m, -1), (m, 4)]]
    assert StandInEngine.calls == one_round * 2
    assert sorted((m.method, m.batch_size, len(m.tokens_per_s)) for m in run.measured) == [
        ("none", 1, 2), ("none", 4, 2), ("specdec", 1, 2), ("specdec", 4, 2)]
    assert run.calibration_steps == [] and run.calibration_prefills == []  # no calibrate_k: none measured


def test_every_round_measures_the_calibration_again_in_its_specdec_engine(stand_in):
    requests = [GenerationRequest(f"p{i}", [1, 2], 3) for i in range(2)]
    methods = {"none": SpecConfig(method="none"), "specdec": SpecConfig(method="specdec", k_max=3)}
    run = engine_check.measure(methods, EngineConfig(max_model_len=64), requests, requests[:1], [1, 2], rounds=3,
                               calibrate_k=3)
    assert [e.spec.method for e in StandInEngine.started] == ["none", "specdec"] * 3  # no extra engine
    specdec_calls = [c for c in StandInEngine.calls if c[0] == "specdec"]
    assert specdec_calls.count(("specdec", -2)) == 3
    # each round's specdec engine calibrates first, before its warm-up and measurements
    assert specdec_calls[:: len(specdec_calls) // 3] == [("specdec", -2)] * 3
    assert len(run.calibration_steps) == 3 and len(run.calibration_prefills) == 3


def test_without_a_specdec_method_each_round_starts_one_to_calibrate(stand_in):
    requests = [GenerationRequest(f"p{i}", [1, 2], 3) for i in range(2)]
    run = engine_check.measure({"none": SpecConfig(method="none")}, EngineConfig(max_model_len=64), requests,
                               requests[:1], [1, 2], rounds=2, calibrate_k=4)
    started = [(e.spec.method, e.spec.k_max) for e in StandInEngine.started]
    assert started == [("specdec", 4), ("none", SpecConfig().k_max)] * 2
    assert all(e.closed for e in StandInEngine.started)
    assert len(run.calibration_steps) == 2


def test_check_refuses_batch_sizes_the_engine_cannot_reproduce():
    engine_check.check_batch_sizes([1, 16])
    with pytest.raises(ConfigError, match=r"not \[4\]"):
        engine_check.check_batch_sizes([1, 4, 16])


def test_check_table_sets_projection_beside_the_median():
    record = ProjectionRecord(
        method="none", engine="projected:cpu-calibrated", cost_model="cpu-calibrated", dataset="d", batch_size=16,
        k_max=0, num_requests=8, mean_running=7.5, projected_tokens_per_s=110.0, projected_decode_tokens_per_s=120.0,
        speedup_vs_none=1.0, decode_speedup_vs_none=1.0, tokens_per_forward=1.0, acceptance_rate=0.0,
        mean_drafted_tokens_per_step=0.0, drafting_share=0.0, best_k=True, outputs_identical_to_none=True,
        started_from="", draft_cost="", accepted_per_pos=[], num_output_tokens=100, tokens_per_s=110.0)
    table = engine_check.render_check([record], [engine_check.Measured("none", 16, [90.0, 100.0, 130.0])])
    assert "3 interleaved rounds" in table
    row = table.splitlines()[-1].split()
    assert row[:4] == ["none", "16", "110.0", "100.0"] and row[-1] == "1.100"
