"""The real-engine bench's records and table: per method and batch size, decode and end-to-end
tokens/s (medians over rounds) and the ratio to `none` (median, min-max over rounds)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from bench.records import BenchRecord, Workload
from bench.rounds import REFERENCE, UNRESETTABLE, Timing, summarize
from specdec.config import SpecConfig
from specdec.stats import ShardStats
from specdec.types import GenerationResult


def make_records(
    methods: dict[str, SpecConfig],
    timings: Sequence[Timing],
    results: dict[tuple[str, int], list[GenerationResult]],
    dataset: str,
    starts: dict[str, int],
    workload: Workload = Workload(),
) -> list[BenchRecord]:
    """One record per method and batch size; acceptance figures over all its rounds. Sampled
    outputs are not compared with `none`'s (the random stream depends on the drafts)."""
    records = []
    for s in summarize(timings):
        spec = methods[s.method]
        runs = results[(s.method, s.batch_size)]
        total = ShardStats.aggregate(r.stats for r in runs)
        decode, e2e = s.decode_ratio, s.ratio
        records.append(BenchRecord.from_stats(
            total,
            method=s.method,
            engine="vllm",
            dataset=dataset,
            batch_size=s.batch_size,
            k_max=spec.k_max,
            num_requests=len(runs) // s.rounds,
            outputs_identical_to_none=None if workload.temperature > 0 else _identical(
                runs, results.get((REFERENCE, s.batch_size))),
            started_from=_started_from(spec, s.rounds, starts[s.method], workload.epoch),
            tokens_per_s=s.tokens_per_s.median,
            seconds=statistics.median(t.prefill_s + t.decode_s for t in timings
                                      if (t.method, t.batch_size) == (s.method, s.batch_size)),
            decode_tokens_per_s=s.decode_tokens_per_s.median,
            prefill_seconds=s.prefill_s,
            rounds=s.rounds,
            speedup_vs_none=e2e.median if e2e else None,
            speedup_min=e2e.low if e2e else None,
            speedup_max=e2e.high if e2e else None,
            decode_speedup_vs_none=decode.median if decode else None,
            decode_speedup_min=decode.low if decode else None,
            decode_speedup_max=decode.high if decode else None,
            **workload.fields(),
        ))
    return records


def _identical(runs: Sequence[GenerationResult], reference: Sequence[GenerationResult] | None) -> bool | None:
    """Every round's output of every prompt equals `none`'s (any round of it)."""
    if reference is None:
        return None
    ref = {(r.id, r.sample): r.output_token_ids for r in reference}
    return all(ref.get((r.id, r.sample)) == r.output_token_ids for r in runs)


def _started_from(spec: SpecConfig, rounds: int, starts: int, epoch: int = 1) -> str:
    kept = "a fresh engine per measurement" if spec.method in UNRESETTABLE else "one engine kept alive through the rounds"
    epochs = f"; epochs 1-{epoch - 1} of the same prompts generated before the clock" if epoch > 1 else ""
    return (f"{rounds} interleaved rounds, {kept} ({starts} started), warmed up on other prompts; "
            f"prompts prefilled before the clock; cold cross-request cache per measurement{epochs}")


def render_table(records: Sequence[BenchRecord]) -> str:
    width = max([20] + [len(r.method) + 2 for r in records])
    header = (f"{'method':<{width}}{'batch':>6}{'decode/s':>10}{'x none':>8}{'min-max':>12}"
              f"{'e2e/s':>9}{'x none':>8}{'min-max':>12}{'tok/fwd':>9}{'accept':>8}  identical")
    lines = [header, "-" * len(header)]
    for r in records:
        ident = "-" if r.outputs_identical_to_none is None else ("yes" if r.outputs_identical_to_none else "NO")
        decode = _ratio(r.decode_speedup_vs_none, r.decode_speedup_min, r.decode_speedup_max)
        e2e = _ratio(r.speedup_vs_none, r.speedup_min, r.speedup_max)
        lines.append(f"{r.method:<{width}}{r.batch_size:>6}{_num(r.decode_tokens_per_s, 10, 1)}{decode}"
                     f"{_num(r.tokens_per_s, 9, 1)}{e2e}{r.tokens_per_forward:>9.2f}{r.acceptance_rate:>8.2f}  {ident}")
    rounds = "/".join(sorted({str(r.rounds) for r in records}))
    lines.append(f"medians over {rounds} interleaved round(s); "
                 "ratios to none in the same round; decode: prompts already prefilled")
    return "\n".join(lines)


def _ratio(median: float | None, low: float | None, high: float | None) -> str:
    if median is None or low is None or high is None:
        return f"{'-':>8}{'':>12}"
    return f"{median:>8.2f}{f'{low:.2f}-{high:.2f}':>12}"


def _num(value: float | None, width: int, digits: int) -> str:
    return f"{(math.nan if value is None else value):>{width}.{digits}f}"
