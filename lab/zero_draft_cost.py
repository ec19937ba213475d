"""`python -m lab.zero_draft_cost`: what a speculative engine costs per decode step when it drafts
nothing, against a true `none` engine (no speculative_config), both started in this process.

Variants, per round in rotating order, each over the same fresh prompts (prefill not timed):
  none        a `none` engine: vLLM without speculation (vLLM's CPU platform schedules every
              engine synchronously, this one too; on a GPU it would schedule asynchronously)
  none-again  a second `none` engine, started last: the control (two like engines started at
              other times differ by this much)
  off         the specdec engine with drafting switched off (`set_drafting(False)`): our proposer
              returns empty lists at once, so what is left is vLLM's speculative path
  off-no-take a second specdec engine, drafting off, whose EngineCore never asks its worker for
              drafts: without vLLM's per-step `take_draft_token_ids` RPC (a lab patch, forked
              into that engine's EngineCore; no draft is lost: there are none)
  priced-out  the specdec engine drafting, its budget priced so that no token pays (a step cost
              of 1 s per scheduled token, kept across refits): our whole per-step path runs
              (the core's step, the timer) and drafts nothing
Each step is one `VllmEngine.step()` (the request loop the product drives), timed while every
row decodes. Per round the median step per variant; printed: the median over rounds and the
p25-p75 of rounds, and each variant's ratio to each none engine in the same round. `--profile VARIANT`
instead runs that variant alone, in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), under
cProfile, and prints where its decode steps' time goes."""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import json
import os
import pstats
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

VARIANTS = ("none", "off", "off-no-take", "priced-out", "none-again")
# Where a decode step's host time goes (cumulative, per step), for --profile: vLLM's spec path
# and ours beside the forward they all share. (file suffix, function name)
PROFILED = (("models/llama.py", "forward"), ("gpu_model_runner.py", "_prepare_inputs"),
            ("gpu_model_runner.py", "_calc_spec_decode_metadata"), ("gpu_model_runner.py", "_sample"),
            ("rejection_sampler.py", "forward"), ("gpu_model_runner.py", "propose_draft_token_ids"),
            ("vllm_proposer.py", "propose"), ("controller.py", "engine_step"), ("step_cost.py", "refit"),
            ("gpu_model_runner.py", "_bookkeeping_sync"), ("gpu_model_runner.py", "take_draft_token_ids"),
            ("scheduler.py", "update_draft_token_ids"), ("scheduler.py", "schedule"),
            ("scheduler.py", "update_from_output"), ("output_processor.py", "process_outputs"),
            ("gpu_model_runner.py", "execute_model"), ("gpu_model_runner.py", "sample_tokens"),
            ("v1/engine/core.py", "step"), ("vllm_engine.py", "step"))
# Every scheduled token costs 1 s: no expected gain (< 1 token) pays for one, nor for a lookup.
PRICED_OUT = {"fixed_s": 0.001, "per_seq_s": 0.0, "per_token_s": 1.0}


def price_out(worker: Any, cost: dict[str, float]) -> bool:
    """collective_rpc: the budget's step cost becomes `cost`, and stays so after each refit
    (the refit itself still runs, as it does every few dozen steps)."""
    from specdec.engines.vllm_proposer import _drafter
    from specdec.step_cost import StepCost

    drafter = _drafter(worker)
    if drafter is None:
        return False
    timer, fixed = drafter.timer, StepCost(**cost)
    refit = type(timer).refit

    def pinned_refit() -> None:
        refit(timer)
        timer.model = fixed

    timer.refit = pinned_refit
    timer.model = fixed
    return True


@contextlib.contextmanager
def no_draft_take() -> Iterator[None]:
    """EngineCore processes forked meanwhile (vLLM forks on a CPU) never call their worker's
    `take_draft_token_ids` after a step."""
    from vllm.v1.engine.core import EngineCore

    init = EngineCore.__init__

    def without_take(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.check_for_draft_tokens = False

    EngineCore.__init__ = without_take  # type: ignore[method-assign]
    try:
        yield
    finally:
        EngineCore.__init__ = init  # type: ignore[method-assign]


class Bench:
    def __init__(self, variants: list[str], batch_size: int, k_max: int, engine_args: dict[str, Any]) -> None:
        from specdec.config import SpecConfig
        from specdec.engine_cache import engine_configs
        from specdec.engines.vllm_engine import VllmEngine
        from specdec.params import GenerationParams

        config = engine_configs(GenerationParams(batch_size=batch_size, kv_cache_gib=1.0))[0]
        config = dataclasses.replace(config, engine_args=json.dumps(engine_args, sort_keys=True))
        self.engines: dict[str, Any] = {}
        if "none" in variants:
            self.engines["none"] = VllmEngine(config, SpecConfig(method="none"))
        if {"off", "priced-out"} & set(variants):
            specdec = VllmEngine(config, SpecConfig(method="specdec", k_max=k_max))
            if not all(specdec.llm.collective_rpc(price_out, args=(PRICED_OUT,))):
                raise RuntimeError("no specdec drafter in the worker")
            self.engines["specdec"] = specdec
        if "off-no-take" in variants:
            # no budget (its calibration would time drafts never verified), the same vLLM K
            same_k = SpecConfig(method="specdec", k_max=k_max).k_ceiling
            with no_draft_take():
                self.engines["off-no-take"] = VllmEngine(config, SpecConfig(method="specdec", k_max=same_k,
                                                                            budget=False))
            self.engines["off-no-take"].set_drafting(False)
        if "none-again" in variants:
            self.engines["none-again"] = VllmEngine(config, SpecConfig(method="none"))
        self.vocab = next(iter(self.engines.values())).tokenizer.vocab_size
        for name, engine in self.engines.items():
            settings = engine.resolved
            print(f"engine {name}: async_scheduling={settings['async_scheduling']}, model runner "
                  f"{settings['model_runner']}, executor {settings['distributed_executor_backend']}, "
                  f"speculative {settings['speculative_method']} K={settings['num_speculative_tokens']}")

    def engine(self, variant: str) -> Any:
        if variant in ("none", "off-no-take", "none-again"):
            return self.engines[variant]
        engine = self.engines["specdec"]
        engine.set_drafting(variant == "priced-out")
        return engine

    def block(self, variant: str, batch: int, prompt_tokens: int, steps: int, seed: int,
              profile: cProfile.Profile | None = None) -> tuple[list[float], int]:
        """`batch` fresh requests of `prompt_tokens` random tokens, prefilled, then `steps`
        decode steps timed; returns the step times and the tokens drafted."""
        from specdec.types import GenerationRequest, SamplingOptions

        engine = self.engine(variant)
        rng = np.random.default_rng(seed)
        sampling = SamplingOptions(temperature=0.0, ignore_eos=True)
        for i in range(batch):
            prompt = rng.integers(100, self.vocab, prompt_tokens).tolist()
            engine.add_request(f"{variant}-{seed}-{i}", GenerationRequest(f"r{i}", tuple(prompt), steps + 1), sampling, i)
        started: set[str] = set()
        while len(started) < batch:  # prefill: until every row has its first token
            started |= {u.request_id for u in engine.step() if u.num_new_tokens}
        times, drafted, finished = [], 0, 0
        if profile is not None:
            profile.enable()
        while finished < batch:
            t0 = time.perf_counter()
            updates = engine.step()
            times.append(time.perf_counter() - t0)
            for u in updates:
                if u.result is not None:
                    finished += 1
                    drafted += u.result.stats.num_draft_tokens
        if profile is not None:
            profile.disable()
        return times, drafted

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


def spread(values: list[float]) -> tuple[float, float, float]:
    p25, p50, p75 = np.percentile(values, [25, 50, 75])
    return float(p50), float(p25), float(p75)


def compare(bench: Bench, variants: list[str], batches: list[int], rounds: int, steps: int,
            prompt_tokens: int) -> None:
    for batch in batches:
        per_round: dict[str, list[float]] = {v: [] for v in variants}
        drafted = dict.fromkeys(variants, 0)
        for r in range(-1, rounds):  # round -1: warm-up, not counted
            order = variants[r % len(variants):] + variants[: r % len(variants)]
            for variant in order:
                times, d = bench.block(variant, batch, prompt_tokens, steps, seed=1000 * batch + r)
                if r >= 0:
                    per_round[variant].append(float(np.median(times)) * 1e3)
                    drafted[variant] += d
        print(f"\nbatch {batch}: {rounds} rounds x {steps} decode steps per variant, prompts of {prompt_tokens} "
              f"tokens; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        # "off": the same engine as priced-out, so their ratio is free of engine-to-engine spread
        references = [v for v in ("none", "none-again", "off") if v in per_round]
        print(f"{'variant':<12}{'step ms':>9}{'p25-p75':>16}"
              + "".join(f"{'x ' + ref:>13}{'p25-p75':>14}" for ref in references) + f"{'drafted':>9}")
        for variant in variants:
            ms, lo, hi = spread(per_round[variant])
            line = f"{variant:<12}{ms:>9.2f}{f'{lo:.2f}-{hi:.2f}':>16}"
            for ref in references:  # each variant against each none engine, round by round
                ratio, rlo, rhi = spread([a / b for a, b in zip(per_round[variant], per_round[ref], strict=True)])
                line += f"{ratio:>13.3f}{f'{rlo:.3f}-{rhi:.3f}':>14}"
            print(line + f"{drafted[variant]:>9}")


def profile_variant(variant: str, batch: int, rounds: int, steps: int, prompt_tokens: int, k_max: int,
                    top: int) -> None:
    # the model runner in this process too (vLLM's CPU build gives even one rank a process)
    bench = Bench([variant], batch, k_max, {"distributed_executor_backend": "uni"})
    try:
        # the main thread's CPU time: less swayed by other processes on a shared machine than
        # wall time (the forward's other OpenMP threads are not counted; its barrier spins are)
        profile = cProfile.Profile(time.thread_time)
        bench.block(variant, batch, prompt_tokens, steps, seed=0)  # warm-up
        times = []
        for r in range(rounds):
            times += bench.block(variant, batch, prompt_tokens, steps, seed=r + 1, profile=profile)[0]
        print(f"{variant}, batch {batch}, in-process engine: {len(times)} steps, median "
              f"{np.median(times) * 1e3:.2f} ms wall (profiled); main thread CPU ms per step:")
        stats = pstats.Stats(profile)
        for (path, _, name), (_, calls, _, cumulative, _) in sorted(stats.stats.items()):  # type: ignore[attr-defined]
            if any(path.endswith(suffix) and name == fn for suffix, fn in PROFILED):
                print(f"  {cumulative / len(times) * 1e3:8.3f}  {calls / len(times):5.2f} calls  {path.split('site-packages/')[-1]}:{name}")
        stats.sort_stats("cumulative").print_callees(r"rejection_sampler.py:\d+\(forward\)|sampler.py:\d+\(forward\)")
        stats.sort_stats("tottime").print_stats(top)
        stats.sort_stats("cumulative").print_stats(top)
    finally:
        bench.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-sizes", default="1,16")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--steps", type=int, default=48, help="decode steps timed per variant and round")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--k-max", type=int, default=4)
    p.add_argument("--profile", choices=VARIANTS, help="profile this variant alone (in-process engine)")
    p.add_argument("--top", type=int, default=40, help="functions listed by --profile")
    args = p.parse_args()
    batches = [int(b) for b in args.batch_sizes.split(",")]
    if args.profile:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        profile_variant(args.profile, batches[-1], args.rounds, args.steps, args.prompt_tokens, args.k_max, args.top)
        return
    variants = [v for v in args.variants.split(",") if v]
    bench = Bench(variants, max(batches), args.k_max, {})
    try:
        compare(bench, variants, batches, args.rounds, args.steps, args.prompt_tokens)
    finally:
        bench.close()


if __name__ == "__main__":
    main()
