"""`python -m lab.long_first`: what starting long requests first could add to a streamed run.
ShareGPT's reply lengths (the run replay's `sharegpt-replies`, capped at `--max-tokens`), priced
on `h100-llama3-8b` or this machine's `cpu-calibrated` fit, FIFO in file order against
longest-first with every output length known in advance (the most a per-prompt history could
tell), sorted within read-ahead windows and over the whole run, beside the fluid bound; the
same event simulation as `specdec bench --run-shards`. No drafting."""

from __future__ import annotations

import argparse
import statistics

from bench import cost_models
from specdec.engine_cache import engine_configs
from bench.datasets import sharegpt_reply_lengths
from bench.plots import table
from bench.run_replay import RunJob, fluid_seconds, length_jobs, run_seconds
from specdec.params import GenerationParams


def longest_first(jobs: list[RunJob], window: int) -> list[RunJob]:
    """Each window of `window` jobs (the read-ahead) reordered longest first."""
    return [j for w in range(0, len(jobs), window) for j in sorted(jobs[w : w + window], key=lambda j: -j.forwards)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--limit", type=int, default=8000, help="ShareGPT replies read")
    p.add_argument("--run-sizes", default="512,1024,4096,0", help="requests per run (0: all)")
    p.add_argument("--rows", default="256,1024", help="rows at once")
    p.add_argument("--window", type=int, default=GenerationParams().read_ahead_requests, help="read-ahead requests")
    p.add_argument("--max-tokens", type=int, default=0, help="cap on each reply's length (0: none)")
    p.add_argument("--cost", default=cost_models.H100_LLAMA3_8B, choices=cost_models.PRESETS)
    args = p.parse_args()

    from transformers import AutoTokenizer

    from specdec.models import default_model_dir

    lengths = sharegpt_reply_lengths(AutoTokenizer.from_pretrained(default_model_dir()), args.limit)
    if args.max_tokens:
        lengths = [(prompt, min(output, args.max_tokens)) for prompt, output in lengths]
    if args.cost == cost_models.CPU_CALIBRATED:  # the default engine's fit (`specdec bench` does the same)
        params = GenerationParams()
        cost = cost_models.cpu_calibrated(engine_configs(params)[0], params.k_max)
    else:
        cost = cost_models.resolve(args.cost)
    jobs, step_s = length_jobs(lengths, cost)
    print(f"{len(jobs)} replies, mean {statistics.mean(j.num_output_tokens for j in jobs):.0f} tokens, "
          f"priced on {cost.name}; seconds, and FIFO's time over each")
    rows_out = []
    for size in (int(s) or len(jobs) for s in args.run_sizes.split(",")):
        run = jobs[:size]
        for rows in (int(r) for r in args.rows.split(",")):
            fifo = run_seconds(run, rows, step_s)
            windowed = run_seconds(longest_first(run, args.window), rows, step_s)
            whole = run_seconds(longest_first(run, len(run)), rows, step_s)
            rows_out.append((len(run), rows, fifo, windowed, fifo / windowed, whole, fifo / whole,
                             fifo / fluid_seconds(run, rows, step_s)))
    columns = [("requests", ">9"), ("rows", ">5"), ("FIFO s", ">8.1f"), ("window s", ">9.1f"), ("x", ">6.3f"),
               ("whole run s", ">12.1f"), ("x", ">6.3f"), ("FIFO/fluid", ">11.3f")]
    print("\n".join(table(columns, rows_out)))


if __name__ == "__main__":
    main()
