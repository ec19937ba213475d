"""Stands in for VllmEngine to check how the real-engine bench drives engines (no model runs):
it logs every call (one "generate" per run of requests, from the first added to the stream's
end, as bench/batches.run_batches makes one), and keeps a cross-request 'cache' of the request
ids it generated."""

from __future__ import annotations

from specdec.engines import vllm_proposer
from specdec.engines.drafter_handle import DrafterHandle
from specdec.stats import RequestStats
from specdec.types import GenerationResult
from support.stepping import StepsAll


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


class RecordingEngine(StepsAll):
    started: list["RecordingEngine"] = []
    log: list[tuple] = []  # (engine serial, event, ...) across all engines, in order

    def __init__(self, engine_cfg, spec) -> None:
        self.spec, self.resets, self.calls, self.closed = spec, 0, [], False
        self.serial = len(RecordingEngine.started)
        self.llm = RecordingLLM(self)
        self.drafter = DrafterHandle(self.llm) if spec.method == "specdec" else None
        self.cached: list[str] = []  # request ids in the cross-request cache
        self.cache_at_generate: list[list[str]] = []  # at the start of each run
        self.run: list = []  # the requests of the run under way
        RecordingEngine.started.append(self)
        RecordingEngine.log.append((self.serial, "start"))

    @classmethod
    def clear(cls) -> None:
        cls.started, cls.log = [], []

    def add_request(self, request_id, request, sampling, seed_index) -> None:
        if not self.run:
            self.cache_at_generate.append(list(self.cached))
        self.run.append(request)
        super().add_request(request_id, request, sampling, seed_index)

    def finish_stream(self) -> None:
        self.calls.append(len(self.run))
        RecordingEngine.log.append((self.serial, "generate", len(self.run), max(r.max_tokens for r in self.run)))
        self.run = []

    def generate(self, requests, sampling):
        """One step's requests, each to its end."""
        assert not self.closed
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
