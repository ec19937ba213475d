"""Flow parameters: one pydantic model, kept in step with the flow's flat signature."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from flows.generation import speculative_generation
from flows.params import FlowParams
from specdec.cli import build_parser


def test_flow_signature_matches_the_parameter_model():
    signature = inspect.signature(speculative_generation.fn)
    assert list(signature.parameters) == list(FlowParams.model_fields)
    for name, param in signature.parameters.items():
        field = FlowParams.model_fields[name]
        default = None if field.is_required() else field.default
        assert (param.default if param.default is not inspect.Parameter.empty else None) == default, name


def test_validation_names_the_field(tmp_path):
    cases = {
        "k_max": dict(k_max=0),
        "run_name": dict(run_name="has space"),
        "db": dict(db="s3://bucket/x.duckdb"),
        "staging": dict(staging="s3://"),
        "ngram_min": dict(ngram_min=4, ngram_max=2),
        "draft_model": dict(method="draft"),
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
    assert FlowParams(source=str(tmp_path), run_name="nightly-1").run_id() == "nightly-1"


def test_specdec_run_arguments_build_the_same_parameters(tmp_path):
    from flows.run_command import params_from_args

    args = build_parser().parse_args(["run", "--source", str(tmp_path), "--max-tokens", "16", "--method", "ngram"])
    params = params_from_args(args)
    assert (params.max_tokens, params.method, params.source) == (16, "ngram", str(tmp_path))
    assert params.config_hash() == FlowParams(source=str(tmp_path), max_tokens=16, method="ngram").config_hash()
