"""Test doubles' side of the engine stream (specdec.engines.engine_stream.RequestEngine).

`StepsAll` gives an engine double with a `generate(requests, sampling)` the request-level
interface the stream drives: every queued request finishes in the next step. `TokenByToken`
is a small continuous-batching engine: at most `max_num_seqs` requests run, each makes one
token per step (echoing its prompt), and the rest wait, as in vLLM's scheduler.
"""

from __future__ import annotations

import time
from typing import Any

from specdec.config import EngineConfig
from specdec.engines.engine_stream import RequestUpdate
from specdec.stats import request_stats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions


class StepsAll:
    """Mix into a double that has `generate(requests, sampling)`."""

    def add_request(self, request_id: str, request: GenerationRequest, sampling: SamplingOptions,
                    seed_index: int) -> None:
        queued = self.__dict__.setdefault("_queued", {})
        queued[request_id] = (request, sampling)

    def step(self) -> list[RequestUpdate]:
        queued = self.__dict__.setdefault("_queued", {})
        if not queued:
            return []
        ids = list(queued)
        sampling = queued[ids[0]][1]
        results = self.generate([queued[i][0] for i in ids], sampling)
        queued.clear()
        return [RequestUpdate(i, len(r.output_token_ids), r) for i, r in zip(ids, results, strict=True)]


class TokenByToken:
    """A continuous-batching double: one token per running request per step."""

    tokenizer: Any = None

    def __init__(self, max_num_seqs: int = 4, step_s: float = 0.0) -> None:
        self.engine_config = EngineConfig(max_model_len=2048, max_num_seqs=max_num_seqs)
        self.step_s = step_s
        self.alive = True
        self.waiting: list[str] = []
        self.running: dict[str, list[int]] = {}
        self.requests: dict[str, GenerationRequest] = {}
        self.added: list[str] = []
        self.max_running_seen = 0
        self.steps = 0

    def add_request(self, request_id: str, request: GenerationRequest, sampling: SamplingOptions,
                    seed_index: int) -> None:
        self.requests[request_id] = request
        self.waiting.append(request_id)
        self.added.append(request_id)

    def step(self) -> list[RequestUpdate]:
        self.steps += 1
        if self.step_s:
            time.sleep(self.step_s)
        while self.waiting and len(self.running) < self.engine_config.max_num_seqs:
            self.running[self.waiting.pop(0)] = []
        self.max_running_seen = max(self.max_running_seen, len(self.running))
        updates = []
        for request_id, out in list(self.running.items()):
            request = self.requests[request_id]
            out.append(request.prompt_token_ids[len(out) % len(request.prompt_token_ids)])
            result = None
            if len(out) >= request.max_tokens:
                del self.running[request_id]
                stats = request_stats(len(out), [], [], 1, speculative=False)
                result = GenerationResult(request.id, " ".join(map(str, out)), list(out), "length", stats,
                                          sample=request.sample)
            updates.append(RequestUpdate(request_id, 1, result))
        return updates
