"""Memory over a long run: many small shards through one engine in one flow run.

    python -m flows.memory_bench --shards 200 --rows 4 --max-tokens 32 --cache-max-tokens 5000

writes `--shards` shards of `--rows` distinct prompts (ShareGPT first turns, then HumanEval),
runs the speculative-generation flow over them in this process (Prefect's embedded server
unless PREFECT_API_URL is set), and prints the resident memory (RSS) of the flow process and
of every engine process after shard `--at` (the cross-request cache is at its bound by then
with the default settings) and at the end, with the growth in per cent; then the drafter's
per-request and bounded structures at the end. A figure to read, not a test: tests never
time or weigh anything.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
from pathlib import Path

import psutil

from specdec import engine_cache
from specdec.datasets import humaneval_rows, sharegpt_rows, write_shard


def write_shards(folder: Path, num_shards: int, rows: int) -> None:
    prompts = [r["prompt"] for r in sharegpt_rows(limit=num_shards * rows, max_prompt_chars=600)]
    prompts += [r["prompt"] for r in humaneval_rows()]
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


def sample_after(staging: Path, at: int, into: dict[str, dict[str, int]], done: threading.Event) -> None:
    """Once `at` shards are committed in staging, record every process's RSS."""
    while not done.wait(0.5):
        if len(list(staging.glob("*/shards/*/manifest.json"))) >= at:
            into["after"] = rss_by_process()
            return


def report(after: dict[str, int], end: dict[str, int], at: int) -> str:
    lines = [f"{'process':<28} {'RSS after shard ' + str(at):>20} {'RSS at end':>12} {'growth':>8}"]
    for name, rss in end.items():
        before = after.get(name)
        growth = f"{100.0 * (rss - before) / before:+.1f} %" if before else "n/a"
        lines.append(f"{name:<28} {(before or 0) / 2**20:>17.0f} MiB {rss / 2**20:>8.0f} MiB {growth:>8}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flows.memory_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=200)
    parser.add_argument("--rows", type=int, default=4, help="prompts per shard")
    parser.add_argument("--at", type=int, default=20, help="first measurement after this many shards")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--cache-max-tokens", type=int, default=5_000)
    parser.add_argument("--method", default="specdec")
    parser.add_argument("--workdir", default=None, help="shards, staging and DuckDB here (default: a temp folder)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # a benchmark phones nobody
    from flows.generation import speculative_generation

    work = Path(args.workdir or tempfile.mkdtemp(prefix="specdec-memory-"))
    write_shards(work / "src", args.shards, args.rows)
    samples: dict[str, dict[str, int]] = {}
    done = threading.Event()
    sampler = threading.Thread(target=sample_after, args=(work / "staging", args.at, samples, done), daemon=True)
    sampler.start()
    result = speculative_generation(
        source=str(work / "src"), db=str(work / "r.duckdb"), staging=str(work / "staging"), method=args.method,
        max_tokens=args.max_tokens, batch_size=args.rows, kv_cache_gib=1.0, cache_max_tokens=args.cache_max_tokens)
    done.set()
    end = rss_by_process()
    print(f"{result['num_prompts']} prompts in {result['num_shards']} shards, one engine ({work})")
    print(report(samples.get("after", {}), end, args.at))
    for engine in engine_cache.engines():
        print("drafter and driver state at the end (size, bound):", engine.state_sizes())
    engine_cache.close_engines()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
