"""The methods the replay and the projection compare, by bench name, and how each one's
drafting time is counted when a step is priced.

vLLM's own drafters run as the replay drives them (Python wrappers, slower than the engine's
numba and C++ calls), so they are priced by figures fitted to what `specdec bench-propose`
measures; specdec's drafter is timed as it runs, since the replay makes exactly the worker's
call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from bench.drafters import Drafter, FixedK, NullProposer, OracleProposer, Proposer, VllmNgramProposer, specdec_drafter
from bench.pricing import DraftCost
from bench.replay import ReplayRequest
from bench.suffix_baseline import ArcticSuffixProposer, arctic_available
from specdec.config import SpecConfig

NGRAM_DRAFT = DraftCost(per_call_s=10e-6, per_row_s=2.2e-6, source="vLLM numba n-gram, 10 us per step + 2.2 us per row")
SUFFIX_DRAFT = DraftCost(per_call_s=2e-6, per_row_s=10e-6, per_emitted_token_s=2.3e-6,
                         source="arctic suffix cache, 2 us per step + 10 us per row + 2.3 us per output token")
OUR_DRAFT = DraftCost(measured=True, source="measured: thread CPU time of the drafter's calls")
NO_DRAFTER = DraftCost()


@dataclasses.dataclass(frozen=True)
class Method:
    name: str
    make_drafter: Callable[[int, Sequence[ReplayRequest]], Drafter]  # (K, every request it will see)
    draft_cost: DraftCost
    budget: bool = False  # projected with the batch budget sizing drafts, learning the step cost
    tuned_k: bool = True  # projected at every K and shown at its best (else at the largest K)


def fixed_k(method: str, proposer: Callable[[], Proposer], **spec: int) -> Callable[[int, Sequence[ReplayRequest]], Drafter]:
    return lambda k, _: FixedK(SpecConfig(method=method, k_max=k, **spec), proposer())  # type: ignore[arg-type]


def oracle(k: int, requests: Sequence[ReplayRequest]) -> Drafter:
    sequences = {r.id: np.concatenate([np.asarray(r.prompt_token_ids, dtype=np.int64),
                                       np.asarray(r.reference_tokens, dtype=np.int64)]) for r in requests}
    # Any speculative method name will do: the proposer is given.
    return FixedK(SpecConfig(method="ngram", k_max=k), OracleProposer(sequences))


def all_methods() -> dict[str, Method]:
    """Every method; `suffix` only where arctic-inference's suffix tree is installed."""
    ours = lambda k, _: specdec_drafter(SpecConfig(method="specdec", k_max=k))  # noqa: E731
    methods = [
        Method("none", fixed_k("none", NullProposer), NO_DRAFTER, tuned_k=False),
        Method("ngram", fixed_k("ngram", lambda: VllmNgramProposer(5, 5), ngram_min=5, ngram_max=5), NGRAM_DRAFT),
        Method("ngram[2..5]", fixed_k("ngram", lambda: VllmNgramProposer(2, 5), ngram_min=2), NGRAM_DRAFT),
        Method("specdec", ours, OUR_DRAFT, budget=True, tuned_k=False),
        Method("specdec[no-budget]", ours, OUR_DRAFT),
        Method("oracle", oracle, NO_DRAFTER),  # drafts the reference: the ceiling of any drafter
    ]
    if arctic_available():
        methods.insert(3, Method("suffix", fixed_k("suffix", ArcticSuffixProposer), SUFFIX_DRAFT))
    return {m.name: m for m in methods}
