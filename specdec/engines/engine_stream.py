"""Requests from many owners (shards) in flight in one engine, and what each one cost: the
finished requests' `engine_s` add up to the engine's `busy_s` (docs/internals.md, "Statistics").
An engine that counts drafts by source also has `take_source_counts(request_ids) ->
{request id: {source: (drafted, accepted)}}`, removing them from its counts."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Protocol

from specdec.types import GenerationRequest, GenerationResult, SamplingOptions


@dataclasses.dataclass(frozen=True)
class RequestUpdate:
    """What one step did for one request: its new tokens, and its result once finished."""

    request_id: str
    num_new_tokens: int
    result: GenerationResult | None = None  # set on the request's last update


class RequestEngine(Protocol):
    def add_request(self, request_id: str, request: GenerationRequest, sampling: SamplingOptions,
                    seed_index: int) -> None: ...

    def step(self) -> list[RequestUpdate]: ...


@dataclasses.dataclass
class _InFlight:
    owner: str
    index: int  # the request's place in its owner's list
    prompt_tokens: int
    started: bool = False  # has produced output (its prefill is done)
    engine_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Finished:
    owner: str
    index: int
    result: GenerationResult  # with its attributed engine_s


class EngineStream:
    """One engine's requests in flight, keyed by (owner, index)."""

    def __init__(self, engine: RequestEngine, sampling: SamplingOptions, full_batch: int | None = None) -> None:
        self.engine = engine
        self.sampling = sampling
        self.busy_s = 0.0  # wall time with at least one request in the engine
        # full-batch steps (auto's pilot): begun with `full_batch` requests in flight, finishing no
        # prompt (a prefill costs every engine alike; a short measurement would weigh it by chance)
        self.full_batch = full_batch
        self.full_batch_s = 0.0
        self.full_batch_tokens = 0
        self._in_flight: dict[str, _InFlight] = {}
        self._mark: float | None = None  # start of the interval the next step closes
        self._unattributed_s = 0.0  # time of steps that produced no output

    @property
    def num_in_flight(self) -> int:
        return len(self._in_flight)

    @staticmethod
    def request_id(owner: str, index: int) -> str:
        """The engine's id of `owner`'s `index`-th request: unique while both are in the engine."""
        return f"{owner}\x1f{index}"

    def add(self, owner: str, index: int, request: GenerationRequest) -> None:
        """Queue `request` (its owner's `index`-th: the default seed follows the index)."""
        request_id = self.request_id(owner, index)
        if request_id in self._in_flight:
            raise ValueError(f"request {index} of {owner} is already in flight")
        if self._mark is None:
            self._mark = time.perf_counter()
        self.engine.add_request(request_id, request, self.sampling, index)
        self._in_flight[request_id] = _InFlight(owner, index, len(request.prompt_token_ids))

    def take_source_counts(self, owner: str, num_requests: int) -> dict[str, tuple[int, int]]:
        """`owner`'s drafts by source, (drafted, accepted) tokens summed over its requests 0 ..
        `num_requests` - 1 and taken from the engine ({} where the engine does not count them)."""
        take = getattr(self.engine, "take_source_counts", None)
        if take is None:
            return {}
        total: dict[str, tuple[int, int]] = {}
        for counts in take([self.request_id(owner, i) for i in range(num_requests)]).values():
            for source, (drafted, accepted) in counts.items():
                was = total.get(source, (0, 0))
                total[source] = (was[0] + int(drafted), was[1] + int(accepted))
        return total

    def step(self) -> list[Finished]:
        if not self._in_flight:
            return []
        full = self.full_batch is not None and len(self._in_flight) >= self.full_batch
        updates = self.engine.step()
        now = time.perf_counter()
        assert self._mark is not None
        self._unattributed_s += now - self._mark
        self.busy_s += now - self._mark
        if full and not any(u.num_new_tokens > 0 and not getattr(self._in_flight.get(u.request_id), "started", True)
                            for u in updates):  # a request's first tokens end its prefill
            self.full_batch_s += now - self._mark
            self.full_batch_tokens += sum(max(u.num_new_tokens, 0) for u in updates)
        self._mark = now
        self._attribute(updates)
        finished = []
        for update in updates:
            if update.result is None:
                continue
            req = self._in_flight.pop(update.request_id)
            update.result.engine_s = req.engine_s
            finished.append(Finished(req.owner, req.index, update.result))
        if not self._in_flight:  # idle: the next add starts a new busy interval
            self._mark, self._unattributed_s = None, 0.0
        return finished

    def _attribute(self, updates: Sequence[RequestUpdate]) -> None:
        shares: dict[str, int] = {}
        for update in updates:
            req = self._in_flight.get(update.request_id)
            if req is None or update.num_new_tokens <= 0:
                continue
            shares[update.request_id] = update.num_new_tokens + (0 if req.started else req.prompt_tokens)
            req.started = True
        if not shares:  # requests that finish without new tokens still take the step's time
            shares = {u.request_id: 1 for u in updates if u.result is not None and u.request_id in self._in_flight}
        total = sum(shares.values())
        if total <= 0:
            return  # no output this step: its time goes to the next step that has some
        for request_id, tokens in shares.items():
            self._in_flight[request_id].engine_s += self._unattributed_s * tokens / total
        self._unattributed_s = 0.0
