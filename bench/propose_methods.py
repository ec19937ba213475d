"""The drafters `specdec bench-propose` times, each driven the way its engine adapter drives it.

A runner sees what vLLM hands a drafter every step: `token_ids` ([num_rows, width] int32,
vLLM's `token_ids_cpu`) and `lengths` ([num_rows], `num_tokens_no_spec`); specdec's runners
also each row's prompt length (vLLM's `num_prompt_tokens`). `start` makes the first proposal
of every request (not timed), `step` is one engine step for the whole batch after each
request gained one token.

- `specdec-worker`: what specdec costs per step in vLLM's worker, all of it: the proposer call
  vLLM makes (`SpecdecVllmProposer.propose`), batch budget and step timer on;
- `specdec-controller`: the controller's `step_tokens` (the replay's call), no budget;
- `suffix-arctic`: arctic-inference's suffix cache as vLLM's `suffix` method drives it (where
  installed);
- `ngram-vllm`: vLLM's own n-gram proposer class (numba), prompt lookup 2..5.
"""

from __future__ import annotations

import types
from collections.abc import Sequence

import numpy as np

from specdec.config import SpecConfig
from specdec.controller import DraftController
from specdec.step_cost import StepCost

# Verification nearly free: the budget keeps every draft (its costly path).
FREE = StepCost(fixed_s=0.07, per_seq_s=0.0, per_token_s=1e-5)
METHODS = ("specdec-worker", "specdec-controller", "suffix-arctic", "ngram-vllm")


def fill_controller_cache(controller: DraftController, sequences: Sequence[np.ndarray]) -> None:
    for i, seq in enumerate(sequences):
        controller.drafter.cache.insert(f"done-{i}", np.ascontiguousarray(seq, dtype=np.int32))


class ControllerRunner:
    """specdec's controller as the replay calls it: one `step_tokens` for the batch."""

    def __init__(self, k: int, num_rows: int, cache_tokens: int, prompt_len: int | None = None) -> None:
        self.controller = DraftController(SpecConfig(method="specdec", k_max=k, budget=False,
                                                     cache_max_tokens=max(cache_tokens, 1) * 2))
        self.ids = [f"r{i}" for i in range(num_rows)]
        self.prompt_lens = None if prompt_len is None else [prompt_len] * num_rows
        self.accepted = [0] * num_rows  # every draft rejected

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        fill_controller_cache(self.controller, sequences)

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        rows = [token_ids[i, :n] for i, n in enumerate(lengths.tolist())]
        drafts = self.controller.step_tokens(self.ids, rows, self.accepted, num_prompt_tokens=self.prompt_lens)
        return sum(int(d.shape[0]) for d in drafts)


class WorkerRunner:
    """specdec's proposer call as vLLM's worker makes it each step (`SpecdecVllmProposer.
    propose`), budget and step timer on. Every draft is reported accepted and verifying is
    nearly free, so that the budget keeps drafting (its costly path); the step timer refits
    from the intervals between calls as it does in the engine."""

    def __init__(self, k: int, num_rows: int, cache_tokens: int, prompt_len: int | None = None) -> None:
        from specdec.engines.vllm_proposer import SpecdecVllmProposer

        cfg = SpecConfig(method="specdec", k_max=k, cache_max_tokens=max(cache_tokens, 1) * 2)
        self.proposer = SpecdecVllmProposer(types.SimpleNamespace(
            speculative_config=types.SimpleNamespace(num_speculative_tokens=cfg.k_ceiling),  # vLLM's K
            scheduler_config=types.SimpleNamespace(max_num_seqs=num_rows)))  # a full batch: no tail
        # vLLM's internal ids: the external id and 8 random characters
        batch = types.SimpleNamespace(req_ids=[f"r{i}-0123abcd" for i in range(num_rows)])
        if prompt_len is not None:  # vLLM's input_batch.num_prompt_tokens
            batch.num_prompt_tokens = np.full(num_rows, prompt_len, dtype=np.int32)
        self.proposer.bind(batch, cfg)
        self.proposer.timer.model = FREE
        self.sampled = [[0]] * num_rows

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        assert self.proposer.controller is not None
        fill_controller_cache(self.proposer.controller, sequences)

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.sampled, lengths, token_ids)
        self.sampled = [[0] * (len(d) + 1) for d in drafts]  # vLLM's sampled tokens: every draft accepted
        return sum(map(len, drafts))


class ArcticRunner:
    """arctic-inference's suffix cache, per request, as vLLM's `suffix` method drives it."""

    def __init__(self, k: int, num_rows: int) -> None:
        from bench.suffix_baseline import ArcticSuffixProposer

        self.proposer = ArcticSuffixProposer()
        self.ids = [f"r{i}" for i in range(num_rows)]
        self.k = k

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """Finished requests into arctic's global tree the way vLLM's adapter does it: the
        prompt (here the first token) starts the request, each new token is added, then it stops."""
        cache = self.proposer.cache
        for i, seq in enumerate(sequences):
            cache.start_request(f"done-{i}", np.ascontiguousarray(seq[:1], dtype=np.int32))
            for tok in seq[1:].tolist():
                cache.add_active_response(f"done-{i}", [tok])
            cache.stop_request(f"done-{i}")

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        propose = self.proposer.propose
        return sum(propose(r, token_ids[i, :n], self.k).shape[0] for i, (r, n) in enumerate(zip(self.ids, lengths.tolist())))


class VllmNgramRunner:
    """vLLM's NgramProposer (its numba batch path, one thread as vLLM sets it)."""

    def __init__(self, k: int, num_rows: int, width: int) -> None:
        from vllm.v1.spec_decode.ngram_proposer import NgramProposer

        config = types.SimpleNamespace(
            speculative_config=types.SimpleNamespace(prompt_lookup_min=2, prompt_lookup_max=5, num_speculative_tokens=k),
            model_config=types.SimpleNamespace(max_model_len=width + k + 1),
            scheduler_config=types.SimpleNamespace(max_num_seqs=num_rows),
            parallel_config=types.SimpleNamespace(tensor_parallel_size=1),
        )
        self.proposer = NgramProposer(config)  # compiles its numba code (seconds)
        self.k = k
        self.sampled = [[0]] * num_rows  # every row decoding

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """No cross-request state."""

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.k, self.sampled, lengths, token_ids)
        return sum(len(d) for d in drafts)


def make_runner(method: str, k: int, num_rows: int, width: int, cache_tokens: int, prompt_len: int | None = None):
    """A fresh runner for `method` (its cache budget holds `cache_tokens` twice over); specdec's
    are told that each row's first `prompt_len` tokens are its prompt (None: unknown)."""
    if method == "specdec-worker":
        return WorkerRunner(k, num_rows, cache_tokens, prompt_len)
    if method == "specdec-controller":
        return ControllerRunner(k, num_rows, cache_tokens, prompt_len)
    if method == "suffix-arctic":
        return ArcticRunner(k, num_rows)
    if method == "ngram-vllm":
        return VllmNgramRunner(k, num_rows, width)
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
