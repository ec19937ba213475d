"""The engine cache serves a `none` request from a cached specdec engine with its drafting
switched off, and switches it back on for specdec; the engine's switch records statistics
without speculation while off. Doubles stand in for vLLM."""

from __future__ import annotations

import threading
import types

import pytest

import specdec.engine_cache as engine_cache
import specdec.engines.vllm_engine as vllm_engine
from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.engines import vllm_proposer
from specdec.engines.drafter_handle import DrafterHandle
from specdec.params import GenerationParams
from specdec.stats import request_stats
from specdec.types import GenerationRequest


class SwitchableEngine:
    """A started engine as the cache sees it: its configs, alive, and a drafting switch."""

    def __init__(self, engine_config: EngineConfig, spec: SpecConfig) -> None:
        self.engine_config, self.spec = engine_config, spec
        self.alive = True
        self.switches: list[bool] = []

    def set_drafting(self, enabled: bool) -> None:
        if self.spec.method != "specdec":
            raise ConfigError("only specdec's drafting can be switched off")
        self.switches.append(enabled)

    def close(self) -> None:
        self.alive = False


@pytest.fixture
def started(monkeypatch) -> list[SwitchableEngine]:
    """The engines the cache starts, in order (model length settled without a model)."""
    engines: list[SwitchableEngine] = []

    def start(engine_config, spec):
        engines.append(SwitchableEngine(engine_config, spec))
        return engines[-1]

    monkeypatch.setattr(vllm_engine, "VllmEngine", start)
    monkeypatch.setattr(engine_cache, "_ENGINES", {})
    monkeypatch.setattr(engine_cache, "engine_configs",
                        lambda params: (params.engine_config(2048), params.spec_config()))
    yield engines
    engine_cache.close_engines()


def test_none_runs_on_the_cached_specdec_engine_with_drafting_off_and_specdec_turns_it_back_on(started):
    specdec, _ = engine_cache.get_engine(GenerationParams(method="specdec"))
    baseline, reuse_s = engine_cache.get_engine(GenerationParams(method="none"))
    assert baseline is specdec and reuse_s == 0.0
    assert specdec.switches == [False]
    again, _ = engine_cache.get_engine(GenerationParams(method="specdec"))
    assert again is specdec and specdec.switches == [False, True]
    assert started == [specdec]  # one engine start for both methods


def test_none_starts_its_own_engine_where_no_specdec_engine_of_its_engine_config_is_cached(started):
    engine_cache.get_engine(GenerationParams(method="specdec", batch_size=16))
    other, _ = engine_cache.get_engine(GenerationParams(method="none", batch_size=8))  # another EngineConfig
    assert other.spec.method == "none" and started[0].switches == [] and not started[0].alive
    assert engine_cache.get_engine(GenerationParams(method="none", batch_size=8))[0] is other
    ngram, _ = engine_cache.get_engine(GenerationParams(method="ngram", batch_size=8))
    assert ngram is not other and [e.spec.method for e in started] == ["specdec", "none", "ngram"]
    assert engine_cache.get_engine(GenerationParams(method="none", batch_size=8))[0] is not ngram


def test_a_dead_specdec_engine_serves_no_baseline(started):
    specdec, _ = engine_cache.get_engine(GenerationParams(method="specdec"))
    specdec.alive = False
    baseline, _ = engine_cache.get_engine(GenerationParams(method="none"))
    assert baseline is not specdec and baseline.spec.method == "none"


def test_the_engines_auto_did_not_choose_close_in_the_background_and_close_engines_waits_for_them(
        started, monkeypatch):
    monkeypatch.setattr(engine_cache, "engines_fit_together", lambda: True)  # vLLM's CPU build
    release, closed = threading.Event(), []
    none, _ = engine_cache.get_engine(GenerationParams(method="none"), exact=True, keep_others=True)
    none.close = lambda: (release.wait(5), closed.append("none"))  # vLLM takes seconds to stop an engine
    specdec, _ = engine_cache.get_engine(GenerationParams(method="specdec"), exact=True, keep_others=True)
    assert [e.spec.method for e in started] == ["none", "specdec"]  # side by side
    engine_cache.close_other_engines(GenerationParams(method="specdec"))
    assert engine_cache.engines() == [specdec] and closed == []  # returned while none is still closing
    release.set()
    engine_cache.close_engines()
    assert closed == ["none"] and not specdec.alive  # both gone once close_engines returns


class FakeLlm:
    """What VllmEngine.set_drafting asks of vLLM's LLM."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def collective_rpc(self, method, args=()):
        self.calls.append((method, args))
        return [True]

    def reset_prefix_cache(self) -> bool:
        self.calls.append(("reset_prefix_cache", ()))
        return True


def _engine(spec: SpecConfig) -> vllm_engine.VllmEngine:
    engine = vllm_engine.VllmEngine.__new__(vllm_engine.VllmEngine)  # no vLLM: the switch's state only
    engine.spec, engine.llm, engine.drafting, engine.alive = spec, FakeLlm(), spec.speculative, True
    engine.drafter = DrafterHandle(engine.llm) if spec.method == "specdec" else None
    engine._worker_ids = {}
    return engine


def _finished(engine: vllm_engine.VllmEngine, drafted: list[int], accepted: list[int]):
    state = vllm_engine._RunningRequest(GenerationRequest("r", (1, 2, 3), 8), "r-0", token_ids=list(range(8)), text=["x"])
    metrics = types.SimpleNamespace(per_step_drafted=drafted, per_step_accepted=accepted)
    completion = types.SimpleNamespace(spec_decode_metrics=metrics, finish_reason="length")
    return engine._result(state, completion)


def test_the_switch_sends_the_worker_call_empties_the_prefix_cache_and_records_no_speculation():
    engine = _engine(SpecConfig(method="specdec", k_max=4))
    drafting = _finished(engine, [4, 4], [4, 1])
    assert drafting.stats.num_draft_tokens == 8 and drafting.per_step_drafted == [4, 4]
    engine.set_drafting(False)
    assert engine.llm.calls == [(vllm_proposer.set_drafting, (False,)), ("reset_prefix_cache", ())]
    engine.set_drafting(False)  # already off: nothing to send
    assert len(engine.llm.calls) == 2
    off = _finished(engine, [0, 0, 0], [0, 0, 0])  # vLLM still reports the empty drafts
    assert off.stats == request_stats(8, [], [], 4, speculative=False)  # what a `none` engine records
    assert off.per_step_drafted == [] and engine.take_source_counts(["r"]) == {}
    engine.set_drafting(True)
    assert engine.llm.calls[-2] == (vllm_proposer.set_drafting, (True,))
    assert _finished(engine, [4, 4], [4, 1]).stats == drafting.stats


def test_only_specdec_drafting_switches():
    with pytest.raises(ConfigError, match="only specdec"):
        _engine(SpecConfig(method="ngram")).set_drafting(False)
