"""`python -m lab.propose_speed`: drafting cost per request per step (a drafter developer's
microbenchmark, not a user's question), methods side by side on the
same synthetic buffers and cross-request cache, over a grid (batch x context x cache tokens),
in repeats whose method order rotates; the median over repeats (process CPU time by default).
Each drafter is driven as its vLLM adapter drives it on vLLM's buffers (`token_ids`
[num_rows, width] int32, `lengths` [num_rows]): `specdec-worker` (specdec's whole proposer
call, budget and timer on), `suffix-arctic` (arctic's suffix cache), `ngram-vllm` (vLLM's
numba n-gram, lookup 2..5)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import types
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from bench.drafters import arctic_available
from bench.plots import grouped, table
from specdec.config import SpecConfig
from specdec.step_cost import REFIT_EVERY, REFIT_ROWS, StepCost

# Verification nearly free: the budget keeps every draft (its costly path).
FREE = StepCost(fixed_s=0.07, per_seq_s=0.0, per_token_s=1e-5)
METHODS = ("specdec-worker", "suffix-arctic", "ngram-vllm")
VOCAB = 32_000


class Runner:
    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """Finished requests into the cross-request cache."""

    def start(self, token_ids: np.ndarray, lengths: np.ndarray) -> None:
        self.step(token_ids, lengths)

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        """One engine step; returns the tokens drafted."""
        raise NotImplementedError


class WorkerRunner(Runner):
    """specdec's proposer call per step, every draft accepted and verifying nearly free (the
    budget's costly path: it keeps drafting)."""

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
        controller = self.proposer.controller
        assert controller is not None
        for i, seq in enumerate(sequences):
            controller.drafter.cache.insert(f"done-{i}", np.ascontiguousarray(seq, dtype=np.int32))

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.sampled, lengths, token_ids)
        self.sampled = [[0] * (len(d) + 1) for d in drafts]  # vLLM's sampled tokens: every draft accepted
        return sum(map(len, drafts))


class ArcticRunner(Runner):
    def __init__(self, k: int, num_rows: int) -> None:
        from bench.drafters import ArcticSuffixProposer

        self.proposer = ArcticSuffixProposer()
        self.ids = [f"r{i}" for i in range(num_rows)]
        self.k = k

    def fill_cache(self, sequences: Sequence[np.ndarray]) -> None:
        """As vLLM's adapter adds them: started, a token at a time, stopped."""
        cache = self.proposer.cache
        for i, seq in enumerate(sequences):
            cache.start_request(f"done-{i}", np.ascontiguousarray(seq[:1], dtype=np.int32))
            for tok in seq[1:].tolist():
                cache.add_active_response(f"done-{i}", [tok])
            cache.stop_request(f"done-{i}")

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        propose = self.proposer.propose
        return sum(propose(r, token_ids[i, :n], self.k).shape[0] for i, (r, n) in enumerate(zip(self.ids, lengths.tolist())))


class VllmNgramRunner(Runner):
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

    def step(self, token_ids: np.ndarray, lengths: np.ndarray) -> int:
        drafts = self.proposer.propose(self.k, self.sampled, lengths, token_ids)
        return sum(len(d) for d in drafts)


def make_runner(method: str, k: int, num_rows: int, width: int, cache_tokens: int,
                prompt_len: int | None = None) -> Runner:
    """A fresh runner (its cache holds `cache_tokens` twice over; `prompt_len`: each row's prompt)."""
    if method == "specdec-worker":
        return WorkerRunner(k, num_rows, cache_tokens, prompt_len)
    if method == "suffix-arctic":
        return ArcticRunner(k, num_rows)
    if method == "ngram-vllm":
        return VllmNgramRunner(k, num_rows, width)
    raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def synthetic_sequence(rng: np.random.Generator, length: int, donors: list[np.ndarray] | None = None) -> np.ndarray:
    """Random tokens with a 32-token span copied every 256 (from itself, or every other from `donors`)."""
    tokens = rng.integers(0, VOCAB, size=length)
    for i in range(length // 256):
        src = donors[int(rng.integers(len(donors)))] if donors and i % 2 else tokens
        a = int(rng.integers(0, max(src.size - 32, 1)))
        b = int(rng.integers(0, max(length - 32, 1)))
        piece = src[a : a + 32]
        tokens[b : b + piece.size] = piece[: length - b]
    return tokens.astype(np.int64)


def finished_requests(total_tokens: int, length: int = 2048, seed: int = 1) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    left = total_tokens
    while left > 0:
        yield synthetic_sequence(rng, min(length, left))
        left -= length


def request_buffer(num_rows: int, context: int, extra: int, donors: list[np.ndarray], seed: int = 0) -> np.ndarray:
    """vLLM's `token_ids_cpu` [num_rows, context + extra] int32: prompts whose tail repeats
    tokens [100, 108), then `extra` tokens copying on from there (drafts every step)."""
    rng = np.random.default_rng(seed)
    if context < 116:
        raise ValueError(f"context {context} too short (at least 116 tokens)")
    period = context - 108  # generated token j repeats the stream's token 108 + j
    out = np.zeros((num_rows, context + extra), dtype=np.int32)
    for row in range(num_rows):
        tokens = synthetic_sequence(rng, context, donors)
        tokens[-8:] = tokens[100:108]
        out[row, :context] = tokens
        for start in range(context, context + extra, period):
            n = min(period, context + extra - start)
            out[row, start : start + n] = out[row, start - period : start - period + n]
    return out


def share_prompts(token_ids: np.ndarray, context: int, rows_per_prompt: int, seed: int = 0) -> np.ndarray:
    """Rows in groups sharing the first's prompt, and its output with 1 token in 16 changed."""
    if rows_per_prompt < 1:
        raise ValueError(f"rows_per_prompt={rows_per_prompt} must be >= 1")
    rng = np.random.default_rng(seed)
    out = token_ids.copy()
    for row in range(out.shape[0]):
        first = row - row % rows_per_prompt
        if row != first:
            out[row] = out[first]
            changed = context + np.flatnonzero(rng.random(out.shape[1] - context) < 1 / 16)
            out[row, changed] = rng.integers(0, VOCAB, size=changed.size)
    return out


CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}


@dataclasses.dataclass(frozen=True)
class PointResult:
    method: str
    batch_size: int
    context: int
    cache_tokens: int
    us_per_request_step: float  # median over repeats
    spread: float  # max - min over repeats
    repeats: int
    steps: int
    drafted_per_request_step: float


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",")]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.propose_speed",
                                description="time drafting per request per step, methods side by side")
    p.add_argument("--batch-sizes", default="1,64,256", help="requests per step")
    p.add_argument("--contexts", default="1024,8192", help="prompt tokens per request")
    p.add_argument("--cache-tokens", default="0,1000000", help="tokens of finished requests in the cache")
    p.add_argument("--methods", default=None, help=f"comma list of {', '.join(METHODS)} (default: all available)")
    p.add_argument("--k", type=int, default=4, help="draft tokens asked for per request")
    p.add_argument("--rows-per-prompt", type=int, default=8,
                   help="rows sharing one prompt (1: every row its own prompt); specdec's drafters are told "
                        "the prompt lengths")
    p.add_argument("--steps", type=int, default=REFIT_EVERY,
                   help="engine steps per method per repeat (at least; the default holds one of the "
                        "step timer's refits, so each repeat pays for it)")
    p.add_argument("--min-request-steps", type=int, default=2 * REFIT_ROWS,
                   help="small batches run more steps per repeat, so each repeat times at least this many "
                        "request-steps (batch 1: two of the step timer's refits)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (the median is reported)")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="cpu: this process's CPU time (what drafting costs; on a shared machine wall "
                        "time also counts other processes' time slices), wall: elapsed time")
    p.add_argument("--json", default=None, help="write one record per point here")
    return p


def run(args: argparse.Namespace) -> int:
    methods = args.methods.split(",") if args.methods else [m for m in METHODS if m != "suffix-arctic" or arctic_available()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"specdec: error: unknown methods {unknown}; choose from {', '.join(METHODS)}")
    points: list[PointResult] = []
    for cache_tokens in _ints(args.cache_tokens):
        for context in _ints(args.contexts):
            for batch in _ints(args.batch_sizes):
                steps = max(args.steps, -(-args.min_request_steps // batch))
                got = measure_point(methods, batch, context, cache_tokens, args.k, steps, args.repeats,
                                    CLOCKS[args.clock], args.rows_per_prompt)
                for r in got:
                    print(f"batch {r.batch_size:>4} x {r.context:>5} tokens, cache {r.cache_tokens:>9,}: {r.method:<26} "
                          f"{r.us_per_request_step:9.2f} us/request/step (range {r.spread:.2f}), "
                          f"{r.drafted_per_request_step:.2f} tokens drafted", flush=True)
                points += got
    print()
    print(_table(points))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([dataclasses.asdict(p) | {"kind": "propose", "clock": args.clock} for p in points], fh, indent=1)
        print(f"wrote {args.json}")
    return 0


def measure_point(methods: Sequence[str], batch: int, context: int, cache_tokens: int, k: int, steps: int, repeats: int,
                  clock: Callable[[], float] = time.process_time, rows_per_prompt: int = 1) -> list[PointResult]:
    filler = list(finished_requests(cache_tokens)) if cache_tokens else []
    donors = filler[:64] or list(finished_requests(64 * 2048, seed=3))  # spans prompts copy from
    token_ids = share_prompts(request_buffer(batch, context, steps * repeats + 1, donors), context, rows_per_prompt)
    runners = {m: make_runner(m, k, batch, token_ids.shape[1], cache_tokens, context) for m in methods}
    lengths = {m: np.full(batch, context, dtype=np.int32) for m in methods}
    for m, runner in runners.items():
        runner.fill_cache(filler)
        runner.start(token_ids, lengths[m])
    times: dict[str, list[float]] = {m: [] for m in methods}
    drafted = {m: 0 for m in methods}
    for rep in range(repeats):
        for m in [*methods[rep % len(methods) :], *methods[: rep % len(methods)]]:
            started = clock()
            for _ in range(steps):
                lengths[m] += 1
                drafted[m] += runners[m].step(token_ids, lengths[m])
            times[m].append((clock() - started) / (steps * batch) * 1e6)
    del runners
    return [PointResult(m, batch, context, cache_tokens, float(np.median(times[m])), float(np.ptp(times[m])), repeats,
                        steps, drafted[m] / (steps * repeats * batch)) for m in methods]


def _table(points: Sequence[PointResult]) -> str:
    methods = list(dict.fromkeys(p.method for p in points))
    columns = [("cache", ">9,"), ("context", ">8"), ("batch", ">6"), *((m, ">28") for m in methods)]
    rows = [(g[0].cache_tokens, g[0].context, g[0].batch_size,
             *(f"{p.us_per_request_step:>16.2f} ({p.spread:6.2f})" for p in g))
            for g in grouped(points, lambda p: (p.cache_tokens, p.context, p.batch_size))]
    return "\n".join([*table(columns, rows), "us per request per step: median over repeats (range max - min)"])


if __name__ == "__main__":
    raise SystemExit(run(parser().parse_args()))
