"""Sampled workloads for `specdec bench` without an engine: how prompts expand into samples,
the seeds of each epoch, the reference cache and its keys, epochs in the projection and the
real-engine rounds (only the last epoch measured), and the records."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench import compare, throughput
from bench.cost_models import h100_llama3_8b
from bench.drafters import all_methods
from bench.projection import project
from bench.reference import LOOKAHEAD, Workload, epoch_requests, epoch_seed, reference, reference_path, replay_id
from bench.replay import ReplayRequest
from specdec.config import ConfigError, EngineConfig
from specdec.engines import vllm_engine
from specdec.sampling_seeds import sample_seed
from specdec.stats import request_stats
from specdec.types import GenerationRequest, GenerationResult
from support.bench_cli import specdec_main
from support.recording_engine import RecordingEngine
from support.replay_requests import replay
from support.stepping import StepsAll

ROWS = [GenerationRequest(f"p{i}", (1, 2, 3, i), 5) for i in range(3)]
WORKLOAD = Workload(temperature=0.8, samples=4, top_p=0.95, top_k=50, seed=7)


def test_every_row_becomes_its_samples_each_with_its_own_seed_new_every_epoch():
    first, second = epoch_requests(ROWS, WORKLOAD, 1), epoch_requests(ROWS, WORKLOAD, 2)
    assert [(r.id, r.sample) for r in first] == [(f"p{i}", s) for i in range(3) for s in range(4)]
    assert all(r.prompt_token_ids == ROWS[int(r.id[1])].prompt_token_ids and r.max_tokens == 5 for r in first)
    assert [r.seed for r in first] == [sample_seed(7, r.id, r.sample) for r in first]
    assert [r.seed for r in second] == [sample_seed(epoch_seed(7, 2), r.id, r.sample) for r in second]
    seeds = [r.seed for r in first + second]
    assert len(set(seeds)) == len(seeds)  # no two samples of any epoch share a seed
    assert epoch_seed(7, 1) == 7 and epoch_seed(7, 2) != epoch_seed(8, 1)
    with pytest.raises(ValueError):
        epoch_seed(7, 0)
    with pytest.raises(ConfigError):
        Workload(temperature=0.0, samples=4)
    assert epoch_requests(ROWS, Workload(epochs=2), 2) == ROWS  # greedy: the rows themselves, every epoch


def test_the_reference_key_covers_model_prompts_sampling_seeds_samples_and_epoch(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path))
    model = tmp_path / "model"

    def key(workload=WORKLOAD, epoch=1, rows=ROWS, model_dir=model):
        return reference_path(model_dir, epoch_requests(rows, workload, epoch), LOOKAHEAD, workload)

    base = key()
    others = [key(epoch=2), key(dataclasses.replace(WORKLOAD, temperature=0.7)),
              key(dataclasses.replace(WORKLOAD, top_p=0.9)), key(dataclasses.replace(WORKLOAD, top_k=0)),
              key(dataclasses.replace(WORKLOAD, seed=8)), key(dataclasses.replace(WORKLOAD, samples=3)),
              key(rows=ROWS[:2]), key(model_dir=tmp_path / "other")]
    assert base == key() and base.parent == tmp_path / "replay"
    assert len({base, *others}) == 1 + len(others)
    # the greedy key is what it was before sampled workloads (its cached files stay valid)
    assert reference_path(model, ROWS, LOOKAHEAD, Workload()) not in {base, *others}


class SeededEngine(StepsAll):
    """Stands in for a `none` engine: each request's tokens follow from its seed alone."""

    def __init__(self) -> None:
        self.calls = []

    def generate(self, requests, sampling):
        self.calls.append((list(requests), sampling))
        return [GenerationResult(r.id, "", self.tokens(r.seed, r.max_tokens), "length",
                                 request_stats(r.max_tokens, [], [], 0, False)) for r in requests]

    @staticmethod
    def tokens(seed, n):
        return np.random.default_rng(seed).integers(10, 1000, size=n).tolist()


def test_sampled_references_are_generated_once_for_all_epochs_and_then_read_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_HOME", str(tmp_path))
    engine = SeededEngine()
    args = (ROWS, dataclasses.replace(WORKLOAD, epochs=2), EngineConfig(max_model_len=512), tmp_path / "model", 0)
    epochs = reference(*args, engine=engine)
    assert len(engine.calls) == 2  # one generate call per epoch, one engine
    for requests, sampling in engine.calls:
        assert all(r.max_tokens == 5 + LOOKAHEAD for r in requests)  # past the stop point
        assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.ignore_eos) == (0.8, 0.95, 50, True)
    for e, replayed in enumerate(epochs, start=1):
        expanded = epoch_requests(ROWS, WORKLOAD, e)
        assert [r.id for r in replayed] == [replay_id(r.id, r.sample, e) for r in expanded]
        assert [list(r.reference_tokens) for r in replayed] == [SeededEngine.tokens(r.seed, 5 + LOOKAHEAD) for r in expanded]
        assert all(r.stop_token_ids == frozenset({0}) and r.max_tokens == 5 for r in replayed)
    ids = [r.id for replayed in epochs for r in replayed]
    assert len(set(ids)) == len(ids)  # unique per row, sample and epoch

    again = SeededEngine()
    assert reference(*args, engine=again) == epochs and again.calls == []  # cached
    more = reference(ROWS, dataclasses.replace(WORKLOAD, epochs=3), *args[2:], engine=again)
    assert len(again.calls) == 1 and more[1] == epochs[1]  # only the new epoch is generated


def copying_epochs(num_epochs, n=8, seed=0):
    """Epochs of the same prompts whose continuations share a phrase the prompts lack: what
    one epoch's drafter state learns, the next epoch's drafts use."""
    rng = np.random.default_rng(seed)
    phrase = rng.integers(300, 400, size=24).tolist()
    prompts = [rng.integers(0, 50, size=12).tolist() for _ in range(n)]
    return [[ReplayRequest(replay_id(f"r{i}", 0, e), p, (phrase + rng.integers(50, 60, size=4).tolist()) * 3, 40)
             for i, p in enumerate(prompts)] for e in range(1, num_epochs + 1)]


def test_projection_prices_only_the_last_epoch_and_keeps_every_methods_state():
    first, second = copying_epochs(2)
    methods = [m for name, m in all_methods().items() if name in ("none", "specdec", "oracle")]
    costs = [h100_llama3_8b()]
    cold = {r.method: r for r in project(second, "d", methods, [4], [4], costs, 4096)}
    warm = {r.method: r for r in project(second, "d", methods, [4], [4], costs, 4096, warmup_epochs=[first],
                                         workload=Workload(0.8, epochs=2))}
    assert warm["none"].num_output_tokens == cold["none"].num_output_tokens
    assert warm["none"].projected_tokens_per_s == pytest.approx(cold["none"].projected_tokens_per_s)
    assert warm["specdec"].speedup_vs_none > cold["specdec"].speedup_vs_none
    # the oracle drafts the measured epoch's own tokens, whatever came before
    assert warm["oracle"].acceptance_rate == cold["oracle"].acceptance_rate == 1.0
    assert all((r.temperature, r.samples, r.epoch) == (0.8, 1, 2) for r in warm.values())
    assert all(r.outputs_identical_to_none for r in warm.values())


class SamplingRecorder(RecordingEngine):
    calls_seen: list = []

    def generate(self, requests, sampling):
        SamplingRecorder.calls_seen.append((self.spec.method, list(requests), sampling))
        return super().generate(requests, sampling)


def test_real_engine_rounds_generate_earlier_epochs_after_the_cold_start_and_time_the_last(monkeypatch):
    monkeypatch.setattr(vllm_engine, "VllmEngine", SamplingRecorder)
    RecordingEngine.clear()
    SamplingRecorder.calls_seen = []
    rows = [GenerationRequest(f"p{i}", (1, 2, 3), 4) for i in range(4)]
    first, second = epoch_requests(rows, WORKLOAD, 1), epoch_requests(rows, WORKLOAD, 2)
    specs = throughput.engine_methods(4)
    records = throughput.run_rounds({n: specs[n] for n in ("none", "specdec")}, EngineConfig(max_model_len=2048),
                                    [first, second], [GenerationRequest("w", (4, 5), 4)], [8], 2, "d", min_prompts=8,
                                    workload=dataclasses.replace(WORKLOAD, epochs=2))
    engine = next(e for e in RecordingEngine.started if e.spec.method == "specdec")
    events = [e[1:] for e in RecordingEngine.log if e[0] == engine.serial]
    # per measurement: prefill pass, cold cache, epoch 1 (untimed), epoch 2 (timed)
    assert events[2:-1] == [("reset_prefix_cache",), ("generate", 8, 1), ("reset",), ("generate", 8, 4),
                            ("generate", 8, 4)] * 2
    full = [(reqs, s) for m, reqs, s in SamplingRecorder.calls_seen if m == "specdec" and reqs[0].max_tokens == 4
            and reqs[0].id != "w"]
    assert [[r.seed for r in reqs] for reqs, _ in full] == [[r.seed for r in first[:8]], [r.seed for r in second[:8]]] * 2
    assert all(s.temperature == 0.8 for _, s in full)
    assert [(r.method, r.num_requests, r.epoch, r.samples, r.temperature) for r in records] == [
        ("none", 8, 2, 4, 0.8), ("specdec", 8, 2, 4, 0.8)]
    # sampled outputs depend on the drafts: not compared with none's
    assert all(r.outputs_identical_to_none is None for r in records)
    assert "epochs 1-1 generated before the clock" in records[1].started_from


def test_bench_options_reach_the_reference_and_the_records(tmp_path, monkeypatch, capfd):
    main = specdec_main(monkeypatch)
    asked = {}

    def fake_reference(requests, tokenizer, workload, engine_cfg, params):
        asked.update(workload=workload)
        return copying_epochs(workload.epochs, n=6)

    monkeypatch.setattr(compare, "_reference", fake_reference)
    out = tmp_path / "bench.json"
    argv = ["bench", "--engine", "replay", "--input", "humaneval", "--limit", "2", "--k", "2", "--batch-sizes", "1,4",
            "--methods", "oracle,specdec", "--cost", "h100-llama3-8b", "--temperature", "0.8", "--samples", "8",
            "--top-p", "0.95", "--seed", "3", "--epochs", "2", "--json", str(out)]
    assert main(argv) == 0
    assert asked == {"workload": Workload(0.8, 8, 0.95, 0, 3, epochs=2)}
    rows = json.loads(out.read_text())
    assert rows and all((r["temperature"], r["samples"], r["epoch"]) == (0.8, 8, 2) for r in rows)
    assert all(r["num_requests"] == 6 for r in rows)  # the measured epoch only
    # without --cost: priced on the H100 preset
    assert main(argv[:argv.index("--cost")] + argv[argv.index("--temperature"):] + ["--methods", "none,specdec"]) == 0
    rows = json.loads(out.read_text())
    assert {r["method"] for r in rows} == {"none", "specdec"} and {r["cost_model"] for r in rows} == {"h100-llama3-8b"}
    assert all(r["epoch"] == 2 for r in rows)
    capfd.readouterr()
    assert main(argv[:-2] + ["--epochs", "0"]) == 2
    assert "--epochs must be at least 1" in capfd.readouterr().err
    assert main(["bench", "--engine", "replay", "--input", "humaneval", "--limit", "2", "--samples", "2"]) == 2
    assert "temperature" in capfd.readouterr().err  # greedy samples would all be the same


def test_a_rows_own_samples_win_over_the_workloads():
    workload = dataclasses.replace(WORKLOAD, row_samples=(("p1", 2), ("p2", 1)))
    requests = epoch_requests(ROWS, workload, 1)
    assert [(r.id, r.sample) for r in requests] == [("p0", s) for s in range(4)] + [("p1", 0), ("p1", 1), ("p2", 0)]
    assert [r.seed for r in requests] == [sample_seed(7, r.id, r.sample) for r in requests]
    assert workload.samples_of("p1") == 2 and workload.samples_of("other") == 4
    with pytest.raises(ValueError):
        dataclasses.replace(WORKLOAD, row_samples=(("p1", 0),))
    # the reference cache tells the two workloads apart: their requests differ
    assert reference_path(Path("m"), requests, LOOKAHEAD, workload) != reference_path(
        Path("m"), epoch_requests(ROWS, WORKLOAD, 1), LOOKAHEAD, WORKLOAD)


def test_bench_reads_a_parquet_samples_column_as_generate_does(tmp_path, monkeypatch, capfd):
    from support.shards import write_shard

    main = specdec_main(monkeypatch)
    shard = write_shard(tmp_path / "prompts" / "rows.parquet", [
        {"id": "own", "prompt": "def add(a, b):", "samples": 3},
        {"id": "run", "prompt": "def sub(a, b):", "samples": None},
        {"id": "other", "prompt": "def mul(a, b):", "samples": None},
    ])
    asked = {}

    def fake_reference(requests, tokenizer, workload, engine_cfg, params):
        asked.update(rows=[r.id for r in requests], workload=workload)
        return [[ReplayRequest(replay_id(r.id, r.sample), r.prompt_token_ids, [1, 2, 3], 3, frozenset())
                 for r in epoch_requests(requests, workload, 1)]]

    monkeypatch.setattr(compare, "_reference", fake_reference)
    argv = ["bench", "--engine", "replay", "--input", str(shard), "--k", "2", "--methods", "none"]
    assert main(argv + ["--temperature", "0.8", "--samples", "2", "--json", str(tmp_path / "b.json")]) == 0
    # one request per row reaches the reference; the row's own samples travel in the workload
    assert asked["rows"] == ["own", "run", "other"]
    assert asked["workload"].row_samples == (("own", 3),)
    assert json.loads((tmp_path / "b.json").read_text())[0]["num_requests"] == 3 + 2 + 2
    assert asked["workload"].sampled
    # greedy: a row asking for several samples is left out, named, as generate rejects it
    capfd.readouterr()
    assert main(argv) == 0
    assert asked["rows"] == ["run", "other"] and not asked["workload"].sampled
    assert "row 0 (id='own'): samples=3 with temperature=0" in capfd.readouterr().out


def test_plots_name_the_workload():
    from bench.plots import workload_label

    assert workload_label([{"engine": "vllm"}]) == ""  # greedy records
    assert workload_label([{"temperature": 0.8, "samples": 8, "epoch": 2}]) == ", T=0.8, 8 samples, epoch 2"
    assert workload_label([{"temperature": 0.0, "samples": 1, "epoch": 2}]) == ", greedy, epoch 2"
