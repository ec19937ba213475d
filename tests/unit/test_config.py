"""SpecConfig validation, hashing, and how each method maps onto vLLM's speculative_config."""

import importlib.util

import pytest

from specdec.config import ConfigError, PolicyConfig, SpecConfig, config_hash
from specdec.engines.vllm_engine import speculative_config


def test_round_trip_and_stable_hash():
    cfg = SpecConfig(method="specdec", k_max=6, policy=PolicyConfig(k_init=3))
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
        ({"k_max": 2, "policy": PolicyConfig(adaptive=True, k_init=4)}, "k_init=4"),
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


def test_default_k_init_fits_any_k_max():
    from specdec.policy import AdaptiveK

    for k_max in (1, 2, 3, 8):
        cfg = SpecConfig(method="specdec", k_max=k_max, policy=PolicyConfig(adaptive=True))
        assert AdaptiveK(cfg.policy, k_max).new_state().k == min(4, k_max)  # no k_init: must not fail
        assert AdaptiveK(SpecConfig(k_max=k_max).policy, k_max).new_state().k == k_max  # budget sizes K


def test_drafter_is_recorded_with_the_run_but_not_hashed(monkeypatch):
    """Both drafters draft the same tokens: the choice never decides the output."""
    from specdec import models
    from specdec.params import GenerationParams

    monkeypatch.setattr(models, "model_digest", lambda model: "digest")
    native, python = GenerationParams(drafter="native"), GenerationParams(drafter="python")
    assert native.config_hash() == python.config_hash()
    assert python.recorded_config()["params"]["drafter"] == "python"
    assert python.spec_config().drafter == "python"


def test_a_missing_native_build_is_a_clear_error_unless_python_is_asked_for(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "specdec_native", None)  # import fails as if not installed
    with pytest.raises(ConfigError, match="--drafter python"):
        SpecConfig(method="specdec")
    assert SpecConfig(method="specdec", drafter="python").drafter == "python"
    assert SpecConfig(method="ngram").method == "ngram"  # only specdec needs it
