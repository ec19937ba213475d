"""Memory over a long run: many small shards streamed through one engine by the worker.

    python -m lab.memory_bench --shards 200 --rows 4 --max-tokens 16

writes `--shards` shards of `--rows` distinct short prompts (ShareGPT first turns, then
HumanEval), runs the speculative-generation flow over them in this process (the pipeline's
streamed worker: read ahead, one engine stream, each shard staged and ingested as it
finishes; Prefect's embedded server unless PREFECT_API_URL is set), and prints the resident
memory (RSS) of the flow process and of every engine process at the start (the first shard
committed: the engine is up), after shard `--at` (the cross-request cache is at its bound by
then with the default settings), every `--every` shards after it and at the end, with the
growth from shard `--at` in per cent (the target: flat within 5 %); then the driver's and
drafter's per-request and bounded structures at the end (tests/support/engine_state.py).
A figure to read, not a test: tests never time or weigh anything.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
from pathlib import Path

import psutil

from tests.support.engine_state import state_sizes
from prompt_sets.humaneval import humaneval_rows
from prompt_sets.shards import write_shard
from prompt_sets.sharegpt import sharegpt_rows
from specdec import engine_cache

FLAT_WITHIN = 0.05  # the target: RSS at the end within 5 % of RSS after shard --at


def write_shards(folder: Path, num_shards: int, rows: int, max_prompt_chars: int) -> None:
    prompts = [r["prompt"] for r in sharegpt_rows(limit=num_shards * rows, max_prompt_chars=max_prompt_chars)]
    prompts += [r["prompt"][:max_prompt_chars] for r in humaneval_rows()]
    for shard in range(num_shards):
        part = [{"id": f"m{shard:04d}-{i}", "prompt": prompts[(shard * rows + i) % len(prompts)]} for i in range(rows)]
        write_shard(part, folder / f"m{shard:04d}.parquet")


def rss_by_process() -> dict[str, int]:
    """RSS in bytes of this (the flow) process and of each engine process, by name and PID."""
    found = {f"flow process {os.getpid()}": psutil.Process().memory_info().rss}
    for engine in engine_cache.engines():
        for proc in getattr(engine, "processes", []):
            try:
                found[f"{proc.name()} {proc.pid}"] = proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
    return found


def sample_every(staging: Path, marks: list[int], every: int, into: dict[int, dict[str, int]],
                 done: threading.Event) -> None:
    """Record every process's RSS once each of `marks` shards are committed in staging, then
    every `every` shards: the curve tells a plateau (allocator caches filling up) from
    steady growth."""
    pending = sorted(marks)
    while not done.wait(0.5):
        committed = len(list(staging.glob("*/shards/*/manifest.json")))
        if pending and committed >= pending[0]:
            into[committed] = rss_by_process()
            while pending and pending[0] <= committed:
                pending.pop(0)
            if not pending:
                pending.append(committed + every)


def report(samples: dict[int, dict[str, int]], end: dict[str, int], at: int) -> str:
    """RSS per process at each sample and at the end, and the growth from shard `at` (the
    first sample at or after it)."""
    base_at = min((n for n in samples if n >= at), default=None)
    base = samples.get(base_at, {}) if base_at is not None else {}
    heads = "".join(f"{'shard ' + str(n):>11}" for n in sorted(samples))
    lines = [f"{'process':<28}{heads}{'end':>11} {'growth from shard ' + str(base_at):>20}  flat?"]
    for name, rss in end.items():
        cells = "".join(f"{samples[n].get(name, 0) / 2**20:>7.0f} MiB" for n in sorted(samples))
        before = base.get(name)
        growth = (rss - before) / before if before else None
        shown = f"{100.0 * growth:+.1f} %" if growth is not None else "n/a"
        verdict = "n/a" if growth is None else ("yes" if abs(growth) <= FLAT_WITHIN else "NO")
        lines.append(f"{name:<28}{cells}{rss / 2**20:>7.0f} MiB {shown:>20}  {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.memory_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=200)
    parser.add_argument("--rows", type=int, default=4, help="prompts per shard")
    parser.add_argument("--at", type=int, default=20, help="the baseline: after this many shards")
    parser.add_argument("--every", type=int, default=20, help="then one sample every this many shards")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--max-prompt-chars", type=int, default=300, help="tiny prompts: prefill is slow on CPU")
    parser.add_argument("--batch-size", type=int, default=16, help="rows at once: many shards in the engine")
    parser.add_argument("--cache-max-tokens", type=int, default=5_000)
    parser.add_argument("--method", default="specdec")
    parser.add_argument("--workdir", default=None, help="shards, staging and DuckDB here (default: a temp folder)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # a benchmark phones nobody
    from flows.generation import speculative_generation

    work = Path(args.workdir or tempfile.mkdtemp(prefix="specdec-memory-"))
    write_shards(work / "src", args.shards, args.rows, args.max_prompt_chars)
    samples: dict[int, dict[str, int]] = {}
    done = threading.Event()
    sampler = threading.Thread(target=sample_every, args=(work / "staging", [1, args.at], args.every, samples, done),
                               daemon=True)
    sampler.start()
    try:
        result = speculative_generation(
            source=str(work / "src"), db=str(work / "r.duckdb"), staging=str(work / "staging"), method=args.method,
            max_tokens=args.max_tokens, batch_size=args.batch_size, kv_cache_gib=1.0,
            cache_max_tokens=args.cache_max_tokens)
        done.set()
        end = rss_by_process()
        print(f"{result['num_prompts']} prompts in {result['num_shards']} shards, one engine stream ({work})")
        print(report(samples, end, args.at))
        for engine in engine_cache.engines():
            print("driver and drafter state at the end (size, bound):", state_sizes(engine))
    finally:
        done.set()
        engine_cache.close_engines()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
