"""Stands in for VllmEngine to check how the real-engine bench drives engines (no model runs):
it logs every call, and keeps a cross-request 'cache' of the request ids it generated."""

from __future__ import annotations

import os
from pathlib import Path

from specdec.stats import RequestStats
from specdec.types import GenerationResult


class RecordingEngine:
    started: list["RecordingEngine"] = []
    log: list[tuple] = []  # (engine serial, event, ...) across all engines, in order

    def __init__(self, engine_cfg, spec, record_steps: bool = False) -> None:
        self.spec, self.resets, self.calls, self.closed = spec, 0, [], False
        self.record_steps = record_steps
        self.environ = dict(os.environ)  # what a real engine's processes would start with
        self.serial = len(RecordingEngine.started)
        self.cached: list[str] = self._load_cache()  # request ids in the cross-request cache
        self.cache_at_reset: list[list[str]] = []
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
        if self.spec.cache_file:  # like VllmEngine: the cache is written after every call
            Path(self.spec.cache_file).write_text("\n".join(self.cached))
        results = []
        for r in requests:
            n = min(4, r.max_tokens)
            stats = RequestStats(n, n, 0, 0, 0, [0] * self.spec.k_max, [n] + [0] * self.spec.k_max, n)
            results.append(GenerationResult(r.id, "", [1, 2, 3, 4][:n], "length", stats, [], [], sample=r.sample))
        return results

    def reset_proposer(self) -> None:
        self.resets += 1
        self.cached = self._load_cache()
        self.cache_at_reset.append(list(self.cached))
        RecordingEngine.log.append((self.serial, "reset"))

    def _load_cache(self) -> list[str]:
        path = Path(self.spec.cache_file) if self.spec.cache_file else None
        return path.read_text().split("\n") if path is not None and path.exists() else []

    def set_drafting(self, enabled: bool) -> None:
        RecordingEngine.log.append((self.serial, "drafting", enabled))

    def reset_prefix_cache(self) -> None:
        RecordingEngine.log.append((self.serial, "reset_prefix_cache"))

    def step_cost(self):
        return None

    def close(self) -> None:
        self.closed = True
        RecordingEngine.log.append((self.serial, "close"))
