"""Samples per prompt (no engine): the parameter and its greedy rule, a row's own `samples`
and its quarantine reasons, one seed per (seed, row, sample) whatever the batch (and the
process: tests/process/test_fresh_interpreter.py), expansion of a row into adjacent requests,
and results keyed by (id, sample) through the one generate path and `specdec generate`. Through the real engine, Prefect and DuckDB:
tests/pipeline/test_pipeline_samples.py."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

import specdec.generate as generate_mod
from specdec.cli import main
from specdec.params import SAMPLES_LIMIT, GenerationParams
from specdec.prompts import InputError, reject_greedy_samples, to_requests, tokenize_rows, validate_rows
from specdec.sampling_seeds import sample_seed
from specdec.types import GenerationRequest, SamplingOptions
from support.echo_engine import EchoEngine, EchoTokenizer
from support.shards import write_shard


# --- the parameter -------------------------------------------------------------------------

def test_samples_default_to_one_and_more_need_sampling():
    assert GenerationParams().samples == 1
    assert GenerationParams(samples=4, temperature=0.8).samples == 4
    with pytest.raises(ValidationError, match="samples=4 with temperature=0: greedy decoding"):
        GenerationParams(samples=4)
    for bad in (0, SAMPLES_LIMIT + 1):
        with pytest.raises(ValidationError, match="samples"):
            GenerationParams(samples=bad, temperature=0.8)


def test_samples_decide_the_output_so_they_enter_the_config_hash():
    one = GenerationParams(temperature=0.8)
    assert GenerationParams(temperature=0.8, samples=2).config_hash() != one.config_hash()
    assert one.output_config()["samples"] == 1


def test_generate_takes_samples_from_the_parameter_model_and_refuses_greedy_samples(tmp_path, capsys):
    src = str(write_shard(tmp_path / "p.parquet", [{"id": "a", "prompt": "hi"}]))
    assert main(["generate", "--input", src, "--output", str(tmp_path / "o.parquet"), "--samples", "3"]) == 2
    assert "samples=3 with temperature=0" in capsys.readouterr().err
    assert not (tmp_path / "o.parquet").exists()


# --- seeds ---------------------------------------------------------------------------------

def test_sample_seeds_spread_over_rows_samples_and_run_seeds():
    seeds = {sample_seed(s, f"r{r}", i) for s in (0, 1) for r in range(50) for i in range(10)}
    assert len(seeds) == 1000  # no collisions among these
    assert all(0 <= x < 2**31 for x in seeds)
    # the separator keeps fields apart: ("1", "2|3") and ("1|2", "3") are different samples
    assert sample_seed(1, "2|3", 0) != sample_seed(12, "3", 0) != sample_seed(1, "23", 0)


# --- a row's own samples -------------------------------------------------------------------

def _validate(samples: pa.Array):
    table = pa.table({"id": [f"r{i}" for i in range(len(samples))], "prompt": ["x"] * len(samples),
                      "samples": samples})
    return validate_rows(table, "t.parquet")


def test_row_samples_out_of_range_are_quarantined_and_null_means_the_run_setting():
    valid, rejected = _validate(pa.array([3, None, 0, -1, SAMPLES_LIMIT + 1, SAMPLES_LIMIT], pa.int64()))
    assert [(r.id, r.samples) for r in valid] == [("r0", 3), ("r1", None), ("r5", SAMPLES_LIMIT)]
    assert [(r.index, r.reason) for r in rejected] == [
        (2, f"samples=0 outside [1, {SAMPLES_LIMIT}]"), (3, f"samples=-1 outside [1, {SAMPLES_LIMIT}]"),
        (4, f"samples={SAMPLES_LIMIT + 1} outside [1, {SAMPLES_LIMIT}]")]


@pytest.mark.parametrize("column, accepted, reasons", [
    (pa.array([2.0, 2.5, None, float("nan")]), {"r0": 2, "r2": None},
     {1: "samples: 2.5 is not an integer", 3: "samples: nan is not an integer"}),
    (pa.array(["3", None]), {"r1": None}, {0: "samples: '3' is not an integer"}),
    (pa.array([True, None]), {"r1": None}, {0: "samples: True is not an integer"}),
])
def test_a_samples_cell_that_is_not_an_integer_rejects_its_row_not_the_file(column, accepted, reasons):
    valid, rejected = _validate(column)
    assert {r.id: r.samples for r in valid} == accepted
    assert {r.index: r.reason for r in rejected} == reasons
    assert all(r.stage == "validate" for r in rejected)


def test_row_samples_under_greedy_decoding_are_quarantined_naming_file_and_row():
    valid, _ = _validate(pa.array([1, 2, None]))
    passed, rejected = reject_greedy_samples(valid, 0.0, "shard s3://b/p.parquet")
    assert [r.id for r in passed] == ["r0", "r2"]
    assert [(r.index, r.id, r.stage) for r in rejected] == [(1, "r1", "validate")]
    assert rejected[0].reason.startswith("shard s3://b/p.parquet: row 1 (id='r1'): samples=2 with temperature=0")
    assert reject_greedy_samples(valid, 0.7, "x") == (valid, [])


# --- expansion -----------------------------------------------------------------------------

def _rows(samples: list[int | None]):
    valid, rejected = _validate(pa.array(samples, pa.int64()))
    assert not rejected
    return valid


def test_a_row_becomes_adjacent_requests_one_per_sample_each_with_its_own_seed():
    rows = _rows([None, 3, 1])
    requests = to_requests(rows, EchoTokenizer(), 8, 2048, "t.parquet", "raw", samples=2, seed=7)
    assert [(r.id, r.sample) for r in requests] == [("r0", 0), ("r0", 1), ("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0)]
    assert [r.seed for r in requests] == [sample_seed(7, r.id, r.sample) for r in requests]
    assert len({r.seed for r in requests}) == len(requests)
    assert len({r.prompt_token_ids for r in requests if r.id == "r1"}) == 1
    unseeded = to_requests(rows, EchoTokenizer(), 8, 2048, "t.parquet", "raw", samples=2)
    assert [r.seed for r in unseeded] == [None] * 6  # the engine's own rule applies


def test_seeds_do_not_depend_on_a_requests_position():
    rows = _rows([2, 2, 2])
    whole = tokenize_rows(rows, EchoTokenizer(), 8, 2048, "t", "raw", 1, 11)[0]
    later = tokenize_rows(rows[1:], EchoTokenizer(), 8, 2048, "t", "raw", 1, 11)[0]  # e.g. a resumed part
    assert {(r.id, r.sample): r.seed for r in later}.items() <= {(r.id, r.sample): r.seed for r in whole}.items()


def test_bench_style_calls_keep_one_request_per_row():
    requests, _ = tokenize_rows(_rows([None, None]), EchoTokenizer(), 8, 2048, "t", "raw")
    assert [(r.id, r.sample, r.seed) for r in requests] == [("r0", 0, None), ("r1", 0, None)]


def test_the_engine_passes_a_requests_own_seed_to_vllm():
    from specdec.engines.vllm_engine import _sampling_params

    own = GenerationRequest("a", (1, 2), 4, sample=0, seed=99)
    plain = GenerationRequest("b", (1, 2), 4)
    sampling = SamplingOptions(temperature=0.5, seed=10)
    # own seed; else the run's seed + the request's place in its shard, however shards interleave
    assert [_sampling_params(r, sampling, i).seed for i, r in ((4, own), (5, plain))] == [99, 15]
    assert _sampling_params(plain, SamplingOptions(temperature=0.5), 5).seed is None


# --- the one generate path -----------------------------------------------------------------

@pytest.fixture
def echo(monkeypatch) -> list[list[GenerationRequest]]:
    """Generation by EchoEngine; returns the requests of each engine call."""
    calls: list[list[GenerationRequest]] = []

    class Recording(EchoEngine):
        def generate(self, requests, *args, **kwargs):
            calls.append(list(requests))
            return super().generate(requests, *args, **kwargs)

    monkeypatch.setattr(generate_mod, "get_engine", lambda params: (Recording(), 0.0))
    return calls


def test_generate_rows_keys_results_by_id_and_sample(echo):
    rows = _rows([None, 3])
    params = GenerationParams(samples=2, temperature=0.8, seed=5, max_tokens=4)
    out = generate_mod.generate_rows(rows, [], params, "t.parquet", "h", {})
    table = out.results.select(["id", "sample", "num_samples"]).to_pylist()
    assert [tuple(r.values()) for r in table] == [("r0", 0, 2), ("r0", 1, 2), ("r1", 0, 3), ("r1", 1, 3), ("r1", 2, 3)]
    assert (out.num_prompts, out.stats.num_requests, out.quarantined) == (2, 5, [])
    assert [r.seed for r in echo[0]] == [sample_seed(5, r.id, r.sample) for r in echo[0]]


def test_generate_rows_quarantines_greedy_row_samples_and_runs_the_rest(echo):
    rows = _rows([None, 2, 1])
    out = generate_mod.generate_rows(rows, [], GenerationParams(max_tokens=4), "t.parquet", "h", {})
    assert out.results.column("id").to_pylist() == ["r0", "r2"]
    assert [(r.index, r.id) for r in out.quarantined] == [(1, "r1")]
    with pytest.raises(InputError, match=r"t.parquet: 1 row\(s\) cannot run: t.parquet: row 1 \(id='r1'\): samples=2"):
        generate_mod.generate_rows(rows, [], GenerationParams(max_tokens=4), "t.parquet", "h", {}, strict=True)
    assert len(echo) == 1  # strict: nothing generated


def test_generate_command_writes_sample_and_num_samples(tmp_path, echo, capsys):
    src = str(write_shard(tmp_path / "p.parquet", pa.table({"id": ["a", "b"], "prompt": ["hi", "yo"],
                                                            "samples": pa.array([None, 3], pa.int32())})))
    out = tmp_path / "o.parquet"
    assert main(["generate", "--input", src, "--output", str(out), "--samples", "2", "--temperature", "0.7",
                 "--seed", "1", "--max-tokens", "4"]) == 0
    table = pq.read_table(out)
    assert list(zip(*(table.column(c).to_pylist() for c in ("id", "sample", "num_samples")))) == [
        ("a", 0, 2), ("a", 1, 2), ("b", 0, 3), ("b", 1, 3), ("b", 2, 3)]
    assert "2 completed (5 samples)" in capsys.readouterr().out
