"""Stands in for VllmEngine to check how the real-engine bench drives engines (no model runs):
it logs every call, and keeps a cross-request 'cache' of the request ids it generated."""

from __future__ import annotations

from specdec.engines import vllm_proposer
from specdec.stats import RequestStats
from specdec.types import GenerationResult


class RecordingLLM:
    """The engine's `llm` as the bench's engine hooks call it."""

    def __init__(self, engine: "RecordingEngine") -> None:
        self.engine = engine

    def reset_prefix_cache(self) -> bool:
        RecordingEngine.log.append((self.engine.serial, "reset_prefix_cache"))
        return True

    def collective_rpc(self, method, args=()):
        if method is vllm_proposer.reset_proposer:
            self.engine.resets += 1
            self.engine.cached = []
            RecordingEngine.log.append((self.engine.serial, "reset"))
        else:
            RecordingEngine.log.append((self.engine.serial, method.__name__, *args))
        return [True]


class RecordingEngine:
    started: list["RecordingEngine"] = []
    log: list[tuple] = []  # (engine serial, event, ...) across all engines, in order

    def __init__(self, engine_cfg, spec) -> None:
        self.spec, self.resets, self.calls, self.closed = spec, 0, [], False
        self.serial = len(RecordingEngine.started)
        self.llm = RecordingLLM(self)
        self.cached: list[str] = []  # request ids in the cross-request cache
        self.cache_at_generate: list[list[str]] = []
        RecordingEngine.started.append(self)
        RecordingEngine.log.append((self.serial, "start"))

    @classmethod
    def clear(cls) -> None:
        cls.started, cls.log = [], []

    def generate(self, requests, sampling, batch_size=None):
        assert not self.closed
        self.calls.append((len(requests), batch_size))
        self.cache_at_generate.append(list(self.cached))
        RecordingEngine.log.append((self.serial, "generate", len(requests), max(r.max_tokens for r in requests)))
        self.cached += [r.id for r in requests]
        results = []
        for r in requests:
            n = min(4, r.max_tokens)
            stats = RequestStats(n, n, 0, 0, 0, [0] * self.spec.k_max, [n] + [0] * self.spec.k_max, n)
            results.append(GenerationResult(r.id, "", [1, 2, 3, 4][:n], "length", stats, [], [], sample=r.sample))
        return results

    def step_cost(self):
        return None

    def close(self) -> None:
        self.closed = True
        RecordingEngine.log.append((self.serial, "close"))
