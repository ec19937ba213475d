"""SpecConfig validation, hashing, and how each method maps onto vLLM's speculative_config."""

import importlib.util

import pytest

from specdec import models
from specdec.config import ConfigError, SpecConfig, config_hash
from specdec.engines.vllm_args import speculative_config


def test_round_trip_and_stable_hash():
    cfg = SpecConfig(method="specdec", k_max=6, tail_k_max=9, cache_file="warm.npz")
    assert SpecConfig.from_dict(cfg.to_dict()) == cfg
    assert config_hash(cfg.to_dict()) == config_hash(SpecConfig.from_dict(cfg.to_dict()).to_dict())
    assert config_hash(cfg.to_dict()) != config_hash(SpecConfig(method="specdec", k_max=5).to_dict())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "magic"}, "unknown method 'magic'"),
        ({"k_max": 0}, "k_max=0"),
        ({"ngram_min": 4, "ngram_max": 2}, "ngram_min"),
        ({"method": "draft"}, "draft_model"),
        ({"method": "specdec", "cache_max_tokens": 0}, "cache_max_tokens=0"),
    ],
)
def test_invalid_configs_name_the_field(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SpecConfig(**kwargs)


def test_methods_map_to_vllm_speculative_config():
    assert speculative_config(SpecConfig(method="none")) is None
    ngram = speculative_config(SpecConfig(method="ngram", k_max=3, ngram_min=2, ngram_max=4))
    assert ngram == {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
    ours = speculative_config(SpecConfig(method="specdec", k_max=5, budget=False))
    assert ours["method"] == "custom_class" and ours["num_speculative_tokens"] == 5
    assert ours["model"] == "specdec.engines.vllm_proposer.SpecdecVllmProposer"
    # with its budget, vLLM verifies up to the tail ceiling: twice k_max unless set
    assert speculative_config(SpecConfig(method="specdec", k_max=5))["num_speculative_tokens"] == 10
    assert speculative_config(SpecConfig(method="specdec", k_max=5, tail_k_max=7))["num_speculative_tokens"] == 7


def test_the_tail_ceiling_is_bounded_by_k_max_and_64():
    assert SpecConfig(method="specdec", k_max=40).k_ceiling == 64
    assert SpecConfig(method="ngram", k_max=4).k_ceiling == 4  # only specdec's budget drafts past k_max
    for bad in (3, 65):
        with pytest.raises(ConfigError, match="tail_k_max"):
            SpecConfig(method="specdec", k_max=4, tail_k_max=bad)


@pytest.mark.skipif(importlib.util.find_spec("arctic_inference") is not None, reason="arctic-inference installed")
def test_suffix_without_arctic_inference_is_a_clear_error():
    with pytest.raises(ConfigError, match="arctic-inference"):
        speculative_config(SpecConfig(method="suffix"))


def test_draft_method_needs_a_real_model_folder(tmp_path):
    from specdec.models import ModelError

    with pytest.raises(ModelError, match="no config.json"):
        speculative_config(SpecConfig(method="draft", draft_model=str(tmp_path)))


def test_the_hash_holds_only_what_a_user_sets(monkeypatch):
    """Every hashed field is a parameter a user sets; settings no user sets are not in it."""
    from specdec.params import GenerationParams

    monkeypatch.setattr(models, "model_digest", lambda model: "digest")
    for method in ("specdec", "ngram", "none"):
        decided = GenerationParams(method=method).output_config()
        assert set(decided) <= set(GenerationParams.model_fields), method
    assert GenerationParams(k_max=5).config_hash() != GenerationParams(k_max=4).config_hash()
    assert GenerationParams(cache_file="a").config_hash() == GenerationParams().config_hash()


def test_spec_and_engine_defaults_are_the_parameters_defaults():
    from specdec.config import EngineConfig
    from specdec.params import GenerationParams

    params = GenerationParams()
    assert params.spec_config() == SpecConfig()
    assert params.engine_config(2048) == EngineConfig(max_model_len=2048)


def test_a_missing_native_build_is_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "specdec_native", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match="make setup"):
        SpecConfig(method="specdec")
    assert SpecConfig(method="ngram").method == "ngram"  # only specdec needs it
