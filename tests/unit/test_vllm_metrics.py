"""vLLM's speculation counters: summing a metrics snapshot, and refusing to read another
engine's figures (no engine starts here)."""

from types import SimpleNamespace

import pytest

from specdec.engines.vllm_engine import VllmEngine
from support.engine_calls import counters
from support.vllm_counters import SpecCounters, read_spec_counters


def metric(name: str, value: int = 0, values: list[int] | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=f"vllm:spec_decode_{name}", value=value, values=values or [])


def test_counters_sum_over_labels_and_subtract_position_by_position():
    snapshot = [
        metric("num_drafts", 3), metric("num_drafts", 2), metric("num_draft_tokens", 12),
        metric("num_accepted_tokens", 7), metric("num_accepted_tokens_per_pos", values=[4, 2, 1]),
        metric("num_accepted_tokens_per_pos", values=[1]),
        SimpleNamespace(name="vllm:num_requests_running", value=9, values=[]),
    ]
    counters = read_spec_counters(snapshot)
    assert counters == SpecCounters(5, 12, 7, (5, 2, 1))
    assert counters - SpecCounters(1, 4, 2, (1,)) == SpecCounters(4, 8, 5, (4, 2, 1))


def test_an_engine_that_is_not_the_newest_refuses_to_read_the_shared_registry(monkeypatch):
    older, newer = object.__new__(VllmEngine), object.__new__(VllmEngine)
    monkeypatch.setattr(VllmEngine, "engines_started", 2)
    older.serial, newer.serial = 1, 2
    newer.llm = SimpleNamespace(get_metrics=lambda: [metric("num_drafts", 4)])
    assert counters(newer).num_drafts == 4
    with pytest.raises(RuntimeError, match="newest engine"):
        counters(older)
