"""`specdec demo` (`make demo`): where model-free speculation pays, on the bundled data.

One process runs every flow run of the demo, so Prefect's embedded server starts once and
its engines serve every run. For each shard kind (code-editing prompts, whose answers restate
the prompt; chat turns, which give little to draft from) a run without speculation (`none`,
an engine without vLLM's speculative path), then a run under the default method `auto`: its
pilot generates a sample of the kind on `none` and on `specdec` and the kind continues on the
faster engine. The terminal gets one line per run, what each pilot measured and chose, the
final table and the PNG charts written under the output folder's plots/ (tasks/charts.py);
vLLM's and Prefect's logs go to a file under the output folder (`--verbose` shows them instead).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from specdec.console import Console, console

RUN_PREFIX = "demo"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="out/demo", help="folder for prompts, staging, results, charts and the log")
    parser.add_argument("--prompts-per-shard", type=int, default=16,
                        help="prompts in each shard (two code-edit shards, one chat shard)")
    parser.add_argument("--code-max-tokens", type=int, default=192,
                        help="most new tokens per code-editing answer (they restate the code)")
    parser.add_argument("--chat-max-tokens", type=int, default=96, help="most new tokens per chat answer")
    parser.add_argument("--batch-size", type=int, default=8,
                        help="requests running at once (one engine for all runs; each half of a pilot fills it)")
    parser.add_argument("--pilot-requests", type=int, default=16,
                        help="auto: requests of each kind in the pilot, half on each engine, drawn from the kind's "
                             "first shard (the demo's kinds are small)")
    parser.add_argument("--verbose", action="store_true", help="show the engine's and Prefect's logs here")


def run(args: argparse.Namespace) -> int:
    """The demo, start to end; 0 when every run completed."""
    from specdec import engine_cache

    started = time.perf_counter()
    out = Path(args.out)
    _use_embedded_prefect(out)
    import prefect  # noqa: F401  (configures logging before the console takes the terminal over)

    with console(None if args.verbose else out / "demo.log") as term:
        if term.log_path is not None:
            term.line(f"demo: engine and Prefect logs go to {term.log_path} (--verbose shows them here)")
        kinds = _write_shards(out, args.prompts_per_shard, term)
        _fresh_results(out)
        _model_ready(term)
        try:  # the none runs first: their engine is the pilots' speculation-free one
            for method in ("none", "auto"):
                for kind in kinds:
                    _run(term, out, kind, method, args)
        finally:
            engine_cache.close_engines()  # its shutdown lines go to the log too
        _final_tables(term, out, started)
    return 0


def _use_embedded_prefect(out: Path) -> None:
    """A Prefect home of its own and no API URL: the runs use the embedded server, whatever
    Prefect profile this machine has. Set before Prefect is imported: it reads them then."""
    home = out / "prefect-home"
    home.mkdir(parents=True, exist_ok=True)  # Prefect makes no missing parent folders
    os.environ["PREFECT_HOME"] = str(home.resolve())
    os.environ.pop("PREFECT_API_URL", None)
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    # Its first start migrates a fresh database: slower than Prefect's 20 s default on 2 cores.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _write_shards(out: Path, per_shard: int, term: Console) -> list[str]:
    from flows.demo_shards import DEMO_KINDS, demo_shards

    prompts = out / "prompts"
    shutil.rmtree(prompts, ignore_errors=True)
    paths = demo_shards(prompts, per_shard)
    counts = ", ".join(f"{sum(p.parent.name == k for p in paths)} {k}" for k in DEMO_KINDS)
    term.line(f"demo: prompt shards ({counts}; {per_shard} prompts each) under {prompts}")
    return list(DEMO_KINDS)


def _model_ready(term: Console) -> None:
    """Convert the bundled model now, where it is the first use on this machine: its minute
    then counts in no run's throughput."""
    from specdec.models import default_model_dir

    started = time.perf_counter()
    term.status("demo: the bundled model (converted on a machine's first use)")
    folder = default_model_dir()
    if time.perf_counter() - started > 1.0:
        term.line(f"demo: converted the bundled model in {time.perf_counter() - started:.0f} s (cached: {folder})")


def _fresh_results(out: Path) -> None:
    """The demo's runs have fixed names: earlier results would make them resume, not run."""
    (out / "specdec.duckdb").unlink(missing_ok=True)
    shutil.rmtree(out / "staging", ignore_errors=True)
    shutil.rmtree(out / "plots", ignore_errors=True)


def _run(term: Console, out: Path, kind: str, method: str, args: argparse.Namespace) -> None:
    from flows.generation import speculative_generation

    run_name = f"{RUN_PREFIX}-{kind}" + ("" if method == "auto" else f"-{method}")
    term.status(f"run {run_name}: running ({method})")
    max_tokens = args.code_max_tokens if kind == "code-edit" else args.chat_max_tokens
    # The pilot samples from the kind's first pilot_min_requests requests: here, its first shard.
    pilot = {"pilot_requests": args.pilot_requests, "pilot_min_requests": args.prompts_per_shard}
    speculative_generation(source=str(out / "prompts"), shard_glob=f"{kind}/*.parquet", db=str(out / "specdec.duckdb"),
                           staging=str(out / "staging"), method=method, run_name=run_name,
                           max_tokens=max_tokens, batch_size=args.batch_size, **pilot)
    term.line(_run_line(out, run_name, method))
    if method == "auto":
        for line in _pilot_lines(out, run_name):
            term.line(f"  {line}")


def _run_line(out: Path, run_name: str, method: str) -> str:
    row = _query(out, "demo_run_line", [run_name])[1][0]
    shards_done, num_shards, prompts, tokens, tokens_per_s, wall_s, start_s = row
    start = f", engine start {start_s:.0f} s" if start_s else ""
    return (f"run {run_name} ({method}): {shards_done}/{num_shards} shards, {prompts} rows, {tokens} tokens, "
            f"{tokens_per_s:.1f} tokens/s, {wall_s:.0f} s{start}")


def _pilot_lines(out: Path, run_name: str) -> list[str]:
    """What the run's pilot measured per kind and the engine the kind ran on."""
    _, rows = _query(out, "demo_pilot_by_kind", [run_name])
    lines = []
    for kind, requests, basis, none_tps, specdec_tps, speedup, ran, prompts, tps in rows:
        measured = (f"specdec {speedup:.2f}x none in the pilot ({requests} requests, half on each engine; on "
                    f"{basis}: {none_tps:.1f} vs {specdec_tps:.1f} tokens/s)") if speedup is not None \
            else "no pilot (too few requests)"
        lines.append(f"{kind}: {measured}, ran {'without speculation' if ran == 'none' else 'specdec'}; "
                     f"{prompts} prompts at {tps or 0:.1f} tokens per engine-second")
    return lines


def _final_tables(term: Console, out: Path, started: float) -> None:
    from tasks.charts import chart_lines, write_charts
    from tasks.report import render_table

    columns, rows = _query(out, "demo_speedup_by_kind", [RUN_PREFIX])
    term.line()
    term.line("== Method auto against none, per shard kind (same shards; auto's pilot included in run_speedup)")
    term.line(render_table(columns, rows))
    term.line("speedup: tokens per engine-second; run_speedup: the runs' wall-clock tokens/s (Prefect's work included)")
    db = out / "specdec.duckdb"
    term.line()
    for line in chart_lines(write_charts(db, out / "plots")):
        term.line(f"demo: {line}")
    term.line(f"demo: {time.perf_counter() - started:.0f} s wall; results in {db} (more: specdec report --db {db})")


def _query(out: Path, name: str, params: list[Any]) -> tuple[list[str], list[tuple]]:
    from tasks.db import connect_read_only, load_sql

    con = connect_read_only(str(out / "specdec.duckdb"))
    try:
        cur = con.execute(load_sql(name), params)
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m flows.demo`: the demo without the `specdec` console script."""
    from specdec import engine_cache, interrupts

    parser = argparse.ArgumentParser(prog="specdec demo", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    with interrupts.handled(kill=engine_cache.kill_engines):
        try:
            return run(args)
        except interrupts.Interrupted as exc:
            print(f"specdec demo: {exc}: shutting the engine down", file=sys.stderr)
            engine_cache.close_engines()
            return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
