"""The driver's handle on specdec's drafter inside vLLM's workers: each call is one `collective_rpc`
of a function in specdec.engines.vllm_proposer, run on every worker; the ranks without a drafter
(all but the one whose drafts vLLM uses) answer None."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from specdec.config import SpecConfig
from specdec.engines import vllm_proposer

SourceCounts = dict[str, tuple[int, int]]  # per draft source: (drafted tokens verified, accepted)


def allow_function_rpc() -> None:
    """vLLM pickles a function for collective_rpc over its local IPC only when this is set;
    must be set before the engine starts."""
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"


@dataclasses.dataclass
class DrafterHandle:
    """specdec's drafter in a started engine (`llm`: vLLM's LLM)."""

    llm: Any

    def _all(self, function: Any, *args: Any) -> list[Any]:
        return self.llm.collective_rpc(function, args=args)

    def _drafting_rank(self, function: Any, *args: Any) -> Any:
        """The reply of the rank that drafts (None: no rank has a drafter)."""
        return next((reply for reply in self._all(function, *args) if reply is not None), None)

    def bind(self, spec: SpecConfig, tokenizer_digest: str | None) -> list[str]:
        """Start the drafter cold from `spec`; the cache file's warnings, if any."""
        bound = self._all(vllm_proposer.bind_proposer, spec.to_dict(), tokenizer_digest)
        if all(b is None for b in bound):
            raise RuntimeError("vLLM did not load the specdec proposer in its worker")
        return sorted({b for b in bound if b})

    def reset(self) -> None:
        """A cold drafter with the same config (no cache, no per-request state)."""
        self._all(vllm_proposer.reset_proposer)

    def set_drafting(self, enabled: bool) -> None:
        self._all(vllm_proposer.set_drafting, enabled)

    def set_stream_ending(self, ending: bool) -> None:
        self._all(vllm_proposer.set_stream_ending, ending)

    def learn(self, finished: list[tuple[str, list[int], list[int]]]) -> None:
        self._all(vllm_proposer.learn, finished)

    def save_cache(self, path: str) -> None:
        self._all(vllm_proposer.save_cache, path)

    def step_cost(self) -> dict[str, float] | None:
        return self._drafting_rank(vllm_proposer.step_cost)

    def take_source_counts(self, worker_ids: list[str]) -> dict[str, SourceCounts]:
        """Per worker-side request id: its per-source counts, then forgotten there."""
        return self._drafting_rank(vllm_proposer.take_source_counts, worker_ids) or {}

    def start_calibration(self, num_draft_tokens: int) -> None:
        self._all(vllm_proposer.start_calibration, num_draft_tokens)

    def finish_calibration(self) -> list[dict[str, float]]:
        return self._drafting_rank(vllm_proposer.finish_calibration) or []

    def load_calibration(self, samples: list[dict[str, float]]) -> None:
        self._all(vllm_proposer.load_calibration, samples)
