"""The engine options GPU users set: how each reaches vLLM's arguments, which enter the
config hash, the one memory setting per build, engine_args checked against vLLM's names, and
the rank binding a multi-rank CPU engine gets (specdec.engines.vllm_args, cpu_threads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from specdec.cli_options import add_model_options, model_from_args
from specdec.config import ConfigError, SpecConfig
from specdec.engine_cache import engine_configs
from specdec.engines import cpu_threads, vllm_args
from specdec.params import ENGINE_ARGS_OUTSIDE_HASH, GenerationParams


def _kwargs(params: GenerationParams) -> dict:
    engine, spec = engine_configs(params)
    return vllm_args.llm_kwargs(engine, spec, Path("model"))


def test_every_option_reaches_the_engine_arguments():
    kwargs = _kwargs(GenerationParams(tensor_parallel_size=2, pipeline_parallel_size=1, quantization="fp8",
                                      max_num_batched_tokens=1024, enable_prefix_caching=False, max_model_len=256,
                                      engine_args={"max_logprobs": 3, "block_size": 32}))
    assert kwargs["tensor_parallel_size"] == 2 and kwargs["pipeline_parallel_size"] == 1
    assert kwargs["quantization"] == "fp8" and kwargs["max_num_batched_tokens"] == 1024
    assert kwargs["enable_prefix_caching"] is False
    assert kwargs["max_logprobs"] == 3 and kwargs["block_size"] == 32
    assert kwargs["distributed_executor_backend"] == "mp"  # never Ray
    assert kwargs["kv_cache_memory_bytes"] == 2 * 2**30  # the CPU build's default KV cache


def test_options_left_unset_leave_vllm_its_defaults():
    kwargs = _kwargs(GenerationParams(max_model_len=256))
    for name in ("quantization", "max_num_batched_tokens", "enable_prefix_caching", "gpu_memory_utilization",
                 "distributed_executor_backend"):
        assert name not in kwargs


def test_each_build_takes_its_own_memory_setting(monkeypatch):
    with pytest.raises(ConfigError, match="gpu_memory_utilization applies to GPU builds"):
        engine_configs(GenerationParams(gpu_memory_utilization=0.8))
    monkeypatch.setattr(vllm_args, "is_cpu_build", lambda: False)
    with pytest.raises(ConfigError, match="kv_cache_gib applies to vLLM's CPU build"):
        engine_configs(GenerationParams(kv_cache_gib=4.0))
    kwargs = _kwargs(GenerationParams(gpu_memory_utilization=0.8, max_model_len=256))
    assert kwargs["gpu_memory_utilization"] == 0.8 and "kv_cache_memory_bytes" not in kwargs
    # no memory setting on a GPU: vLLM sizes the KV cache, and the model keeps its own context
    engine, _ = engine_configs(GenerationParams())
    assert engine.max_model_len == 8192


@pytest.mark.parametrize("name, match", [
    ("not_an_argument", "'not_an_argument' is not a vLLM engine argument"),
    ("tensor_parallel_size", "'tensor_parallel_size' is a specdec parameter of its own"),
    ("speculative_config", "'speculative_config' is derived by specdec"),
])
def test_engine_args_are_checked_before_any_work(name, match):
    with pytest.raises(ValidationError, match=match):
        GenerationParams(engine_args={name: 1})


def test_what_changes_tokens_enters_the_config_hash_and_sizes_do_not():
    base = GenerationParams()
    assert GenerationParams(quantization="awq").config_hash() != base.config_hash()
    assert GenerationParams(engine_args={"max_logprobs": 3}).config_hash() != base.config_hash()
    for same in (dict(tensor_parallel_size=4), dict(pipeline_parallel_size=2), dict(max_num_batched_tokens=512),
                 dict(enable_prefix_caching=False), dict(draft_tensor_parallel_size=1),
                 dict(engine_args={name: 1 for name in ENGINE_ARGS_OUTSIDE_HASH[:3]})):
        assert GenerationParams(**same).config_hash() == base.config_hash(), same
    # unset, the new fields leave the hash of runs made before they existed as it was
    assert "quantization" not in base.output_config() and "engine_args" not in base.output_config()


def test_every_name_kept_out_of_the_hash_is_a_vllm_engine_argument():
    GenerationParams(engine_args={name: None for name in ENGINE_ARGS_OUTSIDE_HASH})  # raises on an unknown one


def test_the_command_line_takes_engine_args_as_json():
    import argparse

    parser = argparse.ArgumentParser()
    add_model_options(parser, GenerationParams)
    args = parser.parse_args(["--engine-args", json.dumps({"max_logprobs": 3}), "--tensor-parallel-size", "2",
                              "--no-enable-prefix-caching"])
    params = model_from_args(GenerationParams, args)
    assert params.engine_args == {"max_logprobs": 3} and params.tensor_parallel_size == 2
    assert params.enable_prefix_caching is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--engine-args", "[1, 2]"])


def test_draft_tensor_parallel_size_reaches_the_speculative_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 49152}))
    spec = SpecConfig(method="draft", draft_model=str(tmp_path), draft_tensor_parallel_size=1)
    assert vllm_args.speculative_config(spec)["draft_tensor_parallel_size"] == 1


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(cpu_threads.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv(cpu_threads.BIND_ENV, raising=False)
    monkeypatch.setattr(cpu_threads, "_bound_by_us", None)


def test_a_two_rank_cpu_engine_gets_a_core_per_rank_and_a_later_one_rank_engine_none(two_cpus):
    cpu_threads.bind_ranks(2)
    assert cpu_threads.os.environ[cpu_threads.BIND_ENV] == "0|1"
    cpu_threads.bind_ranks(1)
    assert cpu_threads.BIND_ENV not in cpu_threads.os.environ
    with pytest.raises(ConfigError, match="3 ranks need at least as many CPU cores"):
        cpu_threads.bind_ranks(3)


def test_a_binding_the_user_set_is_kept(two_cpus, monkeypatch):
    monkeypatch.setenv(cpu_threads.BIND_ENV, "1|0")
    cpu_threads.bind_ranks(2)
    assert cpu_threads.os.environ[cpu_threads.BIND_ENV] == "1|0"


def test_without_cuda_graphs_specdec_verifies_no_placeholder_drafts():
    # vLLM pads a fully cached admission to K placeholder drafts for its CUDA graphs; a
    # schedule with the one K for every batch size is how it is told not to
    eager = _kwargs(GenerationParams(batch_size=8, k_max=3))["speculative_config"]
    assert eager["num_speculative_tokens_per_batch_size"] == [(1, 8, eager["num_speculative_tokens"])]
    graphs = _kwargs(GenerationParams(batch_size=8, k_max=3, enforce_eager=False))["speculative_config"]
    assert "num_speculative_tokens_per_batch_size" not in graphs
    assert "num_speculative_tokens_per_batch_size" not in _kwargs(GenerationParams(method="ngram"))["speculative_config"]
