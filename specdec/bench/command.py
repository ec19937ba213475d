"""`specdec bench`: methods side by side on the same prompts, in one run.

`--engine replay`: greedy outputs are generated once with the real engine (cached), then
every proposer is replayed on them: tokens per target forward, for a K sweep, in seconds.
With `--cost` the replay runs in batches (`--batch-sizes`) and every step is priced by a
step-time model: projected tokens/s per method and batch size (specdec/bench/projection.py).
`--engine vllm`: real throughput per method and batch size, methods alternating in rounds.
`--temperature T --samples S [--epochs E]`: a sampled workload, every prompt S times at
temperature T (each sample its own seed); the replay's references are sampled then, and with
E epochs every method's drafter state (one controller, or one engine) is kept from epoch to
epoch and only the last is measured (see docs/internals.md, "Benchmarks").
Engine and prompt options (model, dtype, --max-model-len, --prompt-format, --max-tokens, ...)
are generate's, from the one parameter model; rows that cannot run are reported and left out.
`specdec store-bench` (the pipeline's) adds the `--json` records to DuckDB.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
from pathlib import Path

from specdec.bench import cost_models
from specdec.bench.datasets import BUILTIN, load_rows
from specdec.cli_options import add_model_options, model_from_args
from specdec.config import ConfigError, EngineConfig
from specdec.engine_cache import engine_configs
from specdec.params import GenerationParams
from specdec.prompts import reject_greedy_samples, tokenize_rows

# Chosen per method and batch size by the bench itself. Sampling (temperature, top_p, top_k,
# seed, samples) is the workload's: greedy by default.
NOT_BENCH_OPTIONS = ("method", "k_max", "budget", "cache_file", "cache_max_tokens", "batch_size", "stall_timeout_s")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="compare methods side by side (tokens/forward, tokens/s)")
    p.add_argument("--engine", choices=["replay", "vllm"], default="replay")
    p.add_argument("--input", action="append", default=None,
                   help=f"prompt Parquet file or folder, or a built-in set ({', '.join(BUILTIN)}); repeatable")
    p.add_argument("--methods", default=None, help="comma list (default: all available)")
    p.add_argument("--batch-sizes", default="1,16",
                   help="vllm engine: requests run in groups of this size, each group to its end; replay with "
                        "--cost: up to this many at once, the next joining as one finishes")
    p.add_argument("--k", default="4", help="K bounds to sweep, e.g. 1,3,5,7 or 1-8")
    p.add_argument("--cost", action="append", default=None,
                   help="replay: price batched steps with this step-time model: "
                        f"{', '.join(cost_models.PRESETS)} or a JSON file; repeatable")
    p.add_argument("--check-engine", action="store_true",
                   help="replay with --cost: also measure the real engine on the same prompts at batch 1 and the "
                        "largest batch size, in interleaved rounds, and print it beside the projection; with cpu-calibrated, "
                        "every round also measures the calibration again, and the projection is fitted to those")
    p.add_argument("--rounds", type=int, default=3,
                   help="vllm engine and --check-engine: interleaved rounds (medians and spread reported)")
    p.add_argument("--step-breakdown", action="store_true",
                   help="vllm engine: time every decode step inside the worker and print where it goes (forward, "
                        "sampling, drafter, engine core; time outside steps per request), with specdec's step time "
                        "over ngram[2..5]'s at matched drafted tokens")
    p.add_argument("--gomp-spin-counts", default=None, metavar="N[,N...]",
                   help="vllm engine: also run every method on engines started with these GOMP_SPINCOUNT values "
                        "(libgomp's default is 300000), as METHOD[gomp-spin=N], side by side with the engine's own")
    p.add_argument("--specdec-draft-us", default=None, metavar="ROW[+TOKEN]",
                   help="replay with --cost: price our drafter at this many microseconds per row per step "
                        "(+ per output token) instead of the compiled drafter's measured CPU time (or its "
                        "bench-propose figure where the Python reference drafts)")
    p.add_argument("--limit", type=int, default=None, help="prompts per dataset")
    p.add_argument("--min-prompts", type=int, default=16,
                   help="vllm engine: prompts measured per batch size (at least one full batch)")
    p.add_argument("--warm-prompts", type=int, default=0,
                   help="vllm engine: `specdec[warm]` starts from the cache file saved after generating "
                        "this many further prompts of the set (never the measured ones)")
    p.add_argument("--epochs", type=int, default=1,
                   help="run the workload this many times (epoch e > 1: new samples of the same prompts), every "
                        "method's drafter state kept from one epoch to the next; only the last epoch is measured")
    p.add_argument("--json", default=None, help="write the records here (specdec store-bench adds them to DuckDB)")
    p.add_argument("--plots", default=None, help="folder for PNG plots")
    add_model_options(p, GenerationParams, exclude=NOT_BENCH_OPTIONS)


def run(args: argparse.Namespace) -> int:
    ks = parse_ks(args.k)
    params = model_from_args(GenerationParams, args)
    engine_cfg, _ = engine_configs(params)
    records: list = []
    warm_prompts = args.warm_prompts if args.engine == "vllm" else 0
    if warm_prompts and args.limit is None:
        raise ConfigError("--warm-prompts needs --limit: the measured prompts come first, the warm ones after them")
    if args.epochs < 1:
        raise ConfigError(f"--epochs must be at least 1, not {args.epochs}")
    if args.check_engine and (params.temperature > 0 or args.epochs > 1):
        raise ConfigError("--check-engine measures greedy single-epoch workloads only: drop --temperature/--epochs "
                          "or compare with `--engine vllm` on the same workload")
    for source in args.input or ["humaneval"]:
        rows, dataset = load_rows(source, None if args.limit is None else args.limit + warm_prompts)
        if warm_prompts and len(rows) < args.limit + warm_prompts:
            raise ConfigError(f"{dataset}: {len(rows)} prompts, fewer than --limit {args.limit} "
                              f"plus --warm-prompts {warm_prompts}")
        tokenized = _tokenize(rows, params, engine_cfg, dataset)
        if args.engine == "replay" and args.cost:
            records += _project(tokenized, ks, dataset, engine_cfg, params, args)
        elif args.engine == "replay":
            records += _replay(tokenized, ks, dataset, engine_cfg, params, args)
        else:
            requests, _, row_samples = tokenized
            num_measured = len(requests) - warm_prompts  # the warm prompts come after the measured ones
            records += _vllm(requests[:num_measured], requests[num_measured:], ks, dataset, engine_cfg, params, args,
                             row_samples)
    _outputs(records, args)
    return 0


def parse_ks(text: str) -> list[int]:
    """`1,3,5` or `1-8` (or both, e.g. `1-4,8`)."""
    ks: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        ks += range(int(low), int(high or low) + 1)
    return sorted(set(ks))


def _tokenize(rows, params: GenerationParams, engine_cfg: EngineConfig, dataset: str):
    """(requests, tokenizer, row samples): one request for each row that fits (the same
    tokenize policy as generate; a sampled workload expands rows into samples per epoch,
    `sampled_requests`), and the (id, samples) of the rows with a `samples` of their own; the
    other rows, and those asking for several greedy samples (as generate rejects them), are
    reported and left out."""
    from transformers import AutoTokenizer

    from specdec.models import resolve_model

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(params.model))
    rows, greedy_samples = reject_greedy_samples(rows, params.temperature, dataset)
    row_samples = tuple((r.id, r.samples) for r in rows if r.samples is not None)
    one_each = [dataclasses.replace(r, samples=None) for r in rows]
    requests, left_out = tokenize_rows(one_each, tokenizer, params.max_tokens, engine_cfg.max_model_len, dataset,
                                       params.prompt_format)
    left_out = greedy_samples + left_out
    if left_out:
        print(f"{dataset}: {len(left_out)} row(s) left out:")
        for row in left_out[:10]:
            print(f"  {row.reason}")
    return requests, tokenizer, row_samples


def _replay(tokenized, ks, dataset, engine_cfg, params: GenerationParams, args) -> list:
    from specdec.bench.replay_bench import builtin_methods, render_replay_table, run_replay

    requests, tokenizer, row_samples = tokenized
    available = builtin_methods(params.drafter)
    print(f"specdec methods draft with the {params.drafter} drafter")
    names = _method_names(args.methods, list(available), allowed=set(available) | {"none", "suffix"})
    if "suffix" in names and "suffix" not in available:
        print("suffix: left out: arctic-inference's suffix tree is not installed here "
              "(scripts/install.sh builds it from packaging/suffix_tree)")
    warm = [n for n in names if n in available and available[n].warm]
    if warm and args.epochs > 1:  # it starts from its own 2-fold cache, not from earlier epochs
        print(f"{', '.join(warm)}: left out: no epochs with a 2-fold cache")
        names = [n for n in names if n not in warm]
    epochs = _reference(requests, tokenizer, engine_cfg, params, args.epochs, row_samples)
    reference, earlier = epochs[-1], epochs[:-1]
    workload = workload_of(params, args.epochs)
    records = []
    for k in ks:
        for name in [n for n in names if n in available]:
            record, _ = run_replay(available[name], reference, k, dataset, earlier, workload)
            records.append(record)
            print(f"{dataset} {name} K={k}: {record.tokens_per_forward:.3f} tokens/forward "
                  f"(started {record.started_from})", flush=True)
    print()
    print(render_replay_table(records))
    return records


def workload_of(params: GenerationParams, epochs: int):
    from specdec.bench.records import Workload

    return Workload(params.temperature, params.samples, epochs)


def sampled_workload(params: GenerationParams, row_samples: tuple[tuple[str, int], ...] = ()):
    """The sampled workload the options ask for (`row_samples`: the rows' own, see
    `_tokenize`); None for greedy."""
    from specdec.bench.reference import SampledWorkload

    if params.temperature == 0:
        return None
    return SampledWorkload(params.temperature, params.samples, params.top_p, params.top_k, params.seed or 0,
                           row_samples)


def _reference(requests, tokenizer, engine_cfg: EngineConfig, params: GenerationParams, epochs: int = 1,
               row_samples: tuple[tuple[str, int], ...] = ()) -> list:
    """Every epoch's replay requests, epoch 1 first: the greedy reference (the same for every
    epoch, ids made unique per epoch) or each epoch's sampled one."""
    from specdec.bench.reference import greedy_reference, replay_id, sampled_reference
    from specdec.models import resolve_model

    # The reference has no batch size to respect: generate it 64 at a time.
    cfg = dataclasses.replace(engine_cfg, max_num_seqs=64)
    workload = sampled_workload(params, row_samples)
    if workload is None:
        greedy = greedy_reference(requests, cfg, resolve_model(params.model), tokenizer.eos_token_id)
        if epochs == 1:
            return [greedy]
        return [[dataclasses.replace(r, id=replay_id(r.id, 0, e)) for r in greedy] for e in range(1, epochs + 1)]
    by_epoch = sampled_reference(requests, workload, range(1, epochs + 1), cfg, resolve_model(params.model),
                                 tokenizer.eos_token_id)
    return [by_epoch[e] for e in range(1, epochs + 1)]


def _project(tokenized, ks, dataset, engine_cfg: EngineConfig, params: GenerationParams, args) -> list:
    from specdec.bench.projection import draft_cost_figure, project, projected_methods, specdec_drafter
    from specdec.bench.projection_report import render_projection_table

    requests, tokenizer, row_samples = tokenized
    epochs = _reference(requests, tokenizer, engine_cfg, params, args.epochs, row_samples)
    reference, earlier = epochs[-1], epochs[:-1]
    warmup: list = []
    if args.check_engine:  # the engines warm up on the last two prompts; both sides measure the others
        from specdec.bench.engine_check import check_batch_sizes

        check_batch_sizes(_batch_sizes(args))
        requests, warmup, reference = requests[:-2], requests[-2:], reference[:-2]
    drafter, draft_cost = specdec_drafter(params.drafter)
    draft_cost = draft_cost_figure(args.specdec_draft_us) if args.specdec_draft_us else draft_cost
    available = projected_methods(draft_cost, drafter)
    print(f"specdec methods draft with the {drafter} drafter (asked: {params.drafter}); "
          f"their drafting time: {draft_cost.source}")
    names = _method_names(args.methods, list(available), allowed=set(available))
    if "none" not in names:
        names.insert(0, "none")  # the speed-ups are against it
    wants_calibration = cost_models.CPU_CALIBRATED in args.cost
    # The check measures first: its rounds' own calibrations give cpu-calibrated.
    check = _check_engine(requests, warmup, names, ks, engine_cfg, wants_calibration, args) if args.check_engine else None
    calibrated = None
    if check is not None and wants_calibration:
        calibrated = cost_models.from_samples(
            cost_models.CPU_CALIBRATED, check.calibration_steps, check.calibration_prefills,
            f"the check's {args.rounds} calibration(s), timed in its rounds: {len(check.calibration_steps)} "
            f"steps and {len(check.calibration_prefills)} prefills")
    elif wants_calibration:
        calibrated = cost_models.cpu_calibrated(engine_cfg, max(ks))
    costs = [cost_models.resolve(c, calibrated) for c in args.cost]
    for cost in costs:
        print(cost.describe())
    records = project(reference, dataset, [available[n] for n in names], ks, _batch_sizes(args), costs,
                      engine_cfg.max_model_len, progress=lambda line: print(line, flush=True),
                      warmup_epochs=earlier, workload=workload_of(params, args.epochs))
    print()
    print(render_projection_table(records))
    if check is not None:
        from specdec.bench.engine_check import render_check

        for cost in dict.fromkeys(r.cost_model for r in records):
            print()
            print(render_check([r for r in records if r.cost_model == cost], check.measured))
    return records


def _check_engine(requests, warmup, names, ks, engine_cfg: EngineConfig, calibrate: bool, args):
    from specdec.bench.engine_check import measure
    from specdec.bench.throughput import engine_methods

    if len(ks) != 1:
        raise ConfigError("--check-engine runs each engine at one K: pass a single --k")
    specs = engine_methods(ks[0])
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ConfigError(f"--check-engine: no real-engine method for {unknown}")
    return measure({n: specs[n] for n in names}, engine_cfg, requests, warmup, _batch_sizes(args), args.rounds,
                   calibrate_k=ks[0] if calibrate else None, progress=lambda line: print(line, flush=True))


def _batch_sizes(args) -> list[int]:
    return [int(b) for b in args.batch_sizes.split(",")]


def _vllm(requests, warm_from, ks, dataset, engine_cfg, params: GenerationParams, args,
          row_samples: tuple[tuple[str, int], ...] = ()) -> list:
    from specdec.bench import engine_memory
    from specdec.bench.throughput import DEFAULT_METHODS, GREEDY, engine_methods, run_rounds
    from specdec.bench.step_breakdown import render_breakdown
    from specdec.bench.throughput_report import render_table
    from specdec.models import kv_bytes_per_token, resolve_model

    available = engine_methods(1, params.draft_model)
    default = [m for m in DEFAULT_METHODS if m != "suffix" or importlib.util.find_spec("arctic_inference")]
    default += ["specdec[warm]"] if warm_from else []
    names = _method_names(args.methods, default, allowed=set(available))
    if "specdec[warm]" in names and not warm_from:
        raise ConfigError("specdec[warm] needs --warm-prompts N: the prompts its cache file is built from")
    if "none" in names:  # listed first: the ratios are against it
        names.remove("none")
        names.insert(0, "none")
    if args.rounds < 1:
        raise ConfigError(f"--rounds must be at least 1, not {args.rounds}")
    batch_sizes = _batch_sizes(args)
    variants = _spin_count_variants(names, args.gomp_spin_counts)
    warmup, measured = requests[-2:], requests[:-2] if len(requests) > 2 else requests
    sampled = sampled_workload(params, row_samples)
    epochs = _engine_epochs(measured, sampled, args.epochs)
    measured = epochs[-1]
    if len(measured) < max(batch_sizes):
        print(f"note: only {len(measured)} prompts to measure: batch {max(batch_sizes)} runs "
              f"{len(measured)} at once (use --limit {max(batch_sizes) + 2} or more)")
    folder = resolve_model(engine_cfg.model)
    memory = engine_memory.plan(
        _num_engines(names) + len(variants), max(batch_sizes),
        max(len(r.prompt_token_ids) + r.max_tokens for r in measured),
        kv_bytes_per_token(folder, engine_cfg.dtype), engine_cfg.kv_cache_gib, engine_memory.weights_gib(folder),
        engine_memory.available_gib())
    print(memory.describe(), flush=True)
    records = []
    for k in ks:
        specs = engine_methods(k, params.draft_model)
        methods = {n: specs[n] for n in names} | {v: specs[base] for v, (base, _) in variants.items()}
        print(f"== {dataset} K={k}: {', '.join(methods)} in {args.rounds} interleaved round(s)", flush=True)
        windows = [] if args.step_breakdown else None
        records += run_rounds(methods, engine_cfg, measured, warmup, batch_sizes, args.rounds, dataset,
                              memory.all_alive, args.min_prompts, warm_from,
                              progress=lambda line: print(line, flush=True), step_windows=windows,
                              engine_env={v: env for v, (_, env) in variants.items()},
                              sampling=sampled.sampling if sampled else GREEDY, warmup_epochs=epochs[:-1],
                              workload=workload_of(params, args.epochs))
        print(render_table(records), flush=True)
        if windows:
            print(render_breakdown(windows), flush=True)
    return records


def _engine_epochs(requests, sampled, epochs: int) -> list:
    """The real engine's requests for every epoch, epoch 1 first: every prompt `samples`
    times with each epoch's seeds (greedy: the same requests every epoch)."""
    from specdec.bench.reference import sampled_requests

    if sampled is None:
        return [list(requests)] * epochs
    return [sampled_requests(requests, sampled, e) for e in range(1, epochs + 1)]


def _num_engines(names: list[str]) -> int:
    """Engines the methods need: an in-engine baseline shares its method's engine."""
    from specdec.bench.rounds import engine_owner

    return len({engine_owner(n, names) for n in names})


def _spin_count_variants(names: list[str], counts: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """`METHOD[gomp-spin=N]` for every method and count: the method, and the variable its
    engines start with."""
    from specdec.bench.rounds import NO_DRAFTS
    from specdec.engines.cpu_threads import SPIN_ENV

    values = [c.strip() for c in counts.split(",") if c.strip()] if counts else []
    shared = sorted(NO_DRAFTS.keys() & set(names))
    if values and shared:
        raise ConfigError(f"--gomp-spin-counts: {shared} runs on another method's engine, which has no "
                          "spin-count variants")
    bad = [v for v in values if not v.isdigit()]
    if bad:
        raise ConfigError(f"--gomp-spin-counts takes whole numbers, not {bad}")
    return {f"{name}[gomp-spin={v}]": (name, {SPIN_ENV: v}) for v in values for name in names}


def _method_names(arg: str | None, default: list[str], allowed: set[str]) -> list[str]:
    names = [m.strip() for m in arg.split(",") if m.strip()] if arg else list(default)
    unknown = [m for m in names if m not in allowed]
    if unknown:
        raise ConfigError(f"unknown method(s) {unknown}; choose from {sorted(allowed)}")
    return names


def _outputs(records: list, args: argparse.Namespace) -> None:
    rows = [dataclasses.asdict(r) for r in records]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
        print(f"wrote {args.json}")
    if args.plots:
        from specdec.bench.plots import write_plots

        for path in write_plots(rows, Path(args.plots)):
            print(f"wrote {path}")
