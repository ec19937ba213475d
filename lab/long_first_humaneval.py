"""`python -m lab.long_first_humaneval`: long requests first on sampled HumanEval in the run
replay (`specdec bench --engine replay --input humaneval --samples 8 --temperature 0.8
--run-shards ...` and its cached references), priced on `h100-llama3-8b`. Beside the sequential
worker and the stream in arrival order: the stream as a seeded re-run would order it (each
request by its prompt's mean output length, what the cache file's history would hold; the
run fits in one read-ahead window, so all of it is sorted), the same with every request's own
length known, and the fluid bound (no tail at all)."""

from __future__ import annotations

import argparse
import collections
import statistics

from bench import compare, cost_models
from bench.datasets import load_rows
from bench.drafters import all_methods
from bench.plots import table
from bench.run_replay import RunJob, fluid_seconds, replayed_jobs, run_seconds, sequential_seconds, stream_seconds
from specdec.engine_cache import engine_configs
from specdec.params import GenerationParams


def longest_first(jobs: list[RunJob], expected: list[float]) -> list[RunJob]:
    return [jobs[i] for i in sorted(range(len(jobs)), key=lambda i: -expected[i])]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--limit", type=int, default=64, help="HumanEval prompts")
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--shard", type=int, default=256, help="rows per shard of the sequential worker")
    p.add_argument("--rows", default="256,1024", help="rows at once")
    args = p.parse_args()

    params = GenerationParams(max_tokens=args.max_tokens, temperature=args.temperature, samples=args.samples)
    engine_cfg, _ = engine_configs(params)
    rows, dataset = load_rows("humaneval", args.limit)
    requests, tokenizer, workload = compare._tokenize(rows, params, engine_cfg, dataset, 1)
    *earlier, measured = compare._reference(requests, tokenizer, workload, engine_cfg, params)
    cost = cost_models.h100_llama3_8b()
    out = []
    for name in ("none", "specdec"):
        for rows_at_once in (int(r) for r in args.rows.split(",")):
            jobs, step_s = replayed_jobs(measured, all_methods()[name], 0 if name == "none" else params.k_max,
                                         rows_at_once, cost, engine_cfg.max_model_len, earlier)
            by_prompt: dict[tuple[int, ...], list[int]] = collections.defaultdict(list)
            for request, job in zip(measured, jobs, strict=True):
                by_prompt[tuple(request.prompt_token_ids)].append(job.num_output_tokens)
            mean = [statistics.mean(by_prompt[tuple(r.prompt_token_ids)]) for r in measured]
            sequential = sequential_seconds(jobs, rows_at_once, step_s, args.shard)
            stream = stream_seconds(jobs, rows_at_once, step_s, args.shard)
            rerun = run_seconds(longest_first(jobs, mean), rows_at_once, step_s)
            known = run_seconds(longest_first(jobs, [j.num_output_tokens for j in jobs]), rows_at_once, step_s)
            fluid = fluid_seconds(jobs, rows_at_once, step_s)
            out.append((name, rows_at_once, sequential, stream, rerun, known, fluid, sequential / stream,
                        sequential / rerun, sequential / known, sequential / fluid))
    print(f"{dataset}: {len(measured)} requests ({args.limit} prompts x {args.samples} samples, T={args.temperature}, "
          f"at most {args.max_tokens} tokens), priced on {cost.name}; sequential: shards of {args.shard} rows")
    columns = [("method", "<8"), ("rows", ">5"), ("sequential s", ">13.2f"), ("stream s", ">9.2f"),
               ("re-run s", ">9.2f"), ("lengths known s", ">16.2f"), ("fluid s", ">8.2f"), ("stream x", ">9.2f"),
               ("re-run x", ">9.2f"), ("known x", ">8.2f"), ("fluid x", ">8.2f")]
    print("\n".join(table(columns, out)))


if __name__ == "__main__":
    main()
