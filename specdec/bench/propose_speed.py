"""How long drafting costs per request per step (`specdec bench-propose`)."""

from __future__ import annotations

import argparse
import time

import numpy as np

from specdec.budget import StepCost
from specdec.config import SpecConfig
from specdec.controller import DraftController


def synthetic_contexts(num_requests: int, context_len: int, seed: int = 0) -> list[np.ndarray]:
    """Random token streams with copied spans, so lookups find matches as in real text."""
    rng = np.random.default_rng(seed)
    contexts = []
    for _ in range(num_requests):
        tokens = rng.integers(0, 32_000, size=context_len)
        for _ in range(context_len // 256):
            src, dst = rng.integers(0, context_len - 64, size=2)
            tokens[dst : dst + 32] = tokens[src : src + 32]
        tokens[-8:] = tokens[100:108]  # the tail repeats an earlier span
        contexts.append(tokens.astype(np.int64))
    return contexts


def measure(num_requests: int, context_len: int, k_max: int, rounds: int) -> dict[str, float]:
    """One batch step over all requests per round: lookup in each context, the cross-request
    cache (filled with `num_requests` finished 512-token sequences), and the batch budget."""
    contexts = synthetic_contexts(num_requests, context_len)
    controller = DraftController(SpecConfig(method="specdec", k_max=k_max))
    for i, ctx in enumerate(synthetic_contexts(num_requests, 512, seed=1)):
        controller.proposer.cache.insert(f"done-{i}", ctx)  # type: ignore[attr-defined]
    # Verification nearly free: the budget keeps most drafts, the costly path.
    cost = StepCost(fixed_s=0.07, per_seq_s=0.0, per_token_s=1e-5)
    ids = [str(i) for i in range(num_requests)]
    last = [0] * num_requests
    drafted = 0
    started = 0.0
    for round_ in range(rounds + 1):  # round 0 warms up
        if round_ == 1:
            started = time.perf_counter()
        drafts = controller.step_batch(list(zip(ids, contexts, last)), cost)
        last = [d.shape[0] for d in drafts]  # report every draft as fully accepted
        drafted += sum(last) if round_ else 0
    elapsed = time.perf_counter() - started
    calls = rounds * num_requests
    return {"us_per_request_step": elapsed / calls * 1e6, "calls": calls, "drafted_tokens": drafted}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench-propose", help="time drafting per request per step")
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--context", type=int, default=8192, help="tokens per request context")
    p.add_argument("--k-max", type=int, default=4)
    p.add_argument("--rounds", type=int, default=20)


def run(args: argparse.Namespace) -> int:
    result = measure(args.requests, args.context, args.k_max, args.rounds)
    print(
        f"drafting (own-text lookup + cross-request cache + batch budget): {args.requests} requests x {args.context}-token "
        f"contexts, K<={args.k_max}: {result['us_per_request_step']:.1f} us per request per step "
        f"({result['calls']} calls, {result['drafted_tokens']} tokens drafted)"
    )
    return 0
