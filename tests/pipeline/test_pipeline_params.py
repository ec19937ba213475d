"""One parameter model: the options of `generate`, `run` and `bench`, the flow's parameters
and prefect.yaml all derive from specdec.params.GenerationParams, and the config hash covers
only what decides the output, so one generation gets one hash however it was started."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from bench.compare import NOT_BENCH_OPTIONS
from flows.generation import speculative_generation
from flows.params import FlowParams
from specdec.cli import build_parser, extensions
from specdec.cli_options import model_from_args
from specdec.params import GenerationParams

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str):
    return build_parser(extensions()).parse_args(list(argv))


def test_flow_parameters_are_the_model_fields_with_their_defaults():
    signature = inspect.signature(speculative_generation.fn)
    assert set(signature.parameters) == set(FlowParams.model_fields)
    for name, param in signature.parameters.items():
        field = FlowParams.model_fields[name]
        if field.is_required():
            assert param.default is inspect.Parameter.empty, name
        else:
            assert param.default == field.default, name
    assert set(speculative_generation.parameters.properties) == set(FlowParams.model_fields)


def test_every_generation_parameter_is_an_option_of_generate_run_and_bench(tmp_path):
    parsers = {"generate": parse("generate", "--input", "x", "--output", "y"),
               "run": parse("run", "--source", str(tmp_path)),
               "bench": parse("bench")}
    help_text = {cmd: _help(cmd) for cmd in parsers}
    for name, field in GenerationParams.model_fields.items():
        flag = "--" + name.replace("_", "-")
        for cmd in ("generate", "run", "bench"):
            if cmd == "bench" and name in NOT_BENCH_OPTIONS:
                continue
            assert flag in help_text[cmd], (cmd, flag)
            assert not hasattr(parsers[cmd], name), (cmd, name)  # unset options leave the model's default
    assert "--max-model-len" in help_text["bench"]


def _help(command: str) -> str:
    parser = build_parser(extensions())
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[command].format_help()


def test_same_generation_same_hash_from_generate_run_deployment_and_bench(tmp_path):
    options = ("--max-tokens", "64", "--method", "ngram", "--k-max", "3")
    generate = model_from_args(GenerationParams, parse("generate", "--input", "x", "--output", "y",
                                                       "--batch-size", "2", "--kv-cache-gib", "5", *options))
    run = model_from_args(FlowParams, parse("run", "--source", str(tmp_path), "--db", "other.duckdb", *options))
    bench = model_from_args(GenerationParams, parse("bench", "--max-tokens", "64", "--kv-cache-gib", "3"))
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    on_demand = next(d for d in deployments if d["name"] == "on-demand")
    deployed = FlowParams(**{**on_demand["parameters"], "source": str(tmp_path), "max_tokens": 64,
                             "method": "ngram", "k_max": 3})
    assert generate.config_hash() == run.config_hash() == deployed.config_hash()
    assert bench.config_hash() == GenerationParams(max_tokens=64).config_hash()


def test_hash_covers_what_decides_the_output_and_nothing_else():
    base = GenerationParams()
    same = [dict(batch_size=64), dict(kv_cache_gib=8.0), dict(reserved_cpus=1), dict(max_model_len=512),
            dict(cache_file="x.cache"), dict(enforce_eager=False), dict(ngram_min=3),  # ngram_* only for ngram
            dict(cache_max_tokens=1000), dict(stall_timeout_s=5.0), dict(read_ahead_requests=64)]
    for change in same:
        assert GenerationParams(**change).config_hash() == base.config_hash(), change
    different = [dict(max_tokens=7), dict(temperature=0.5), dict(top_p=0.9), dict(top_k=5), dict(seed=1),
                 dict(dtype="bfloat16"), dict(prompt_format="raw"), dict(method="ngram"), dict(k_max=5),
                 dict(budget=False)]
    for change in different:
        assert GenerationParams(**change).config_hash() != base.config_hash(), change
    assert GenerationParams(method="none", k_max=2).config_hash() == GenerationParams(method="none").config_hash()


def test_model_is_hashed_by_content_not_by_path(tmp_path):
    first = tmp_path / "a" / "model"
    first.mkdir(parents=True)
    (first / "config.json").write_text(json.dumps({"max_position_embeddings": 64}))
    (first / "weights.bin").write_bytes(b"\x01" * 1000)
    second = tmp_path / "b" / "copy"
    shutil.copytree(first, second)
    assert GenerationParams(model=str(first)).config_hash() == GenerationParams(model=str(second)).config_hash()
    (second / "weights.bin").write_bytes(b"\x02" * 1000)
    assert GenerationParams(model=str(first)).config_hash() != GenerationParams(model=str(second)).config_hash()


def test_validation_names_the_field(tmp_path):
    cases = {
        "k_max": dict(k_max=0),
        "run_name": dict(run_name="has space"),
        "db": dict(db="s3://bucket/x.duckdb"),
        "staging": dict(staging="s3://"),
        "ngram_min": dict(ngram_min=4, ngram_max=2),
        "draft_model": dict(method="draft"),
        "prompt_format": dict(prompt_format="markdown"),
        "extra_field": dict(extra_field=1),
    }
    for field, kwargs in cases.items():
        with pytest.raises(ValidationError, match=field):
            FlowParams(source=str(tmp_path), **kwargs)


def test_run_id_is_stable_for_the_same_source_and_config(tmp_path, monkeypatch):
    a = FlowParams(source=str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)
    b = FlowParams(source=tmp_path.name)  # same folder, relative
    assert a.run_id() == b.run_id()
    assert FlowParams(source=str(tmp_path), max_tokens=7).run_id() != a.run_id()
    assert FlowParams(source=str(tmp_path), batch_size=3).run_id() == a.run_id()
    assert FlowParams(source=str(tmp_path), run_name="nightly-1").run_id() == "nightly-1"
