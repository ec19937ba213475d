"""The run benches: the replayed run's simulator (bench/run_replay.py) on hand-checkable cases,
and the real-engine run bench's rounds (bench/throughput.py) on a continuous-batching double."""

from __future__ import annotations

import pytest

from bench import throughput
from bench.throughput import Timing
from bench.cost_models import h100_llama3_8b
from bench.run_replay import (RunJob, fluid_seconds, job, render_run_table, run_records, run_seconds,
                              sequential_seconds, stream_seconds)
from specdec import generate as generate_mod
from specdec.params import GenerationParams
from specdec.prompts import PromptRow
from support.echo_engine import EchoTokenizer
from support.stepping import TokenByToken


def steps_only(*forwards: int) -> list[RunJob]:
    return [RunJob(f, 0.0, f) for f in forwards]


def test_one_request_takes_its_forwards_and_a_full_queue_waits_for_rows():
    assert run_seconds(steps_only(10), rows=4, step_s=1.0) == 10
    assert run_seconds(steps_only(10, 10, 10, 10), rows=2, step_s=1.0) == 20
    assert run_seconds(steps_only(3), rows=1, step_s=0.5, start=2.0) == 3.5


def test_a_long_request_in_a_shard_drains_the_sequential_worker_not_the_stream():
    jobs = steps_only(10, 1, 1, 1)
    # sequential: [10, 1] takes 10 steps, then [1, 1] one more; the stream runs the short
    # ones beside the long one; the fluid bound puts 13 forwards in full steps of 2
    assert sequential_seconds(jobs, 2, 1.0, shard=2) == 11
    assert stream_seconds(jobs, 2, 1.0, shard=2) == 10
    assert fluid_seconds(jobs, 2, 1.0) == 6.5
    # shard I/O of 3 s: the sequential worker waits for each shard, the stream reads ahead
    assert sequential_seconds(jobs, 2, 1.0, shard=2, shard_io_s=3.0) == 3 + 10 + 3 + 1
    assert stream_seconds(jobs, 2, 1.0, shard=2, shard_io_s=3.0) == 3 + 10


def test_one_shard_is_one_stream_and_fluid_le_stream_le_sequential():
    cost = h100_llama3_8b()
    lengths = [(50 + 13 * i % 200, 1 + (37 * i) % 300) for i in range(200)]
    jobs = [job(cost, p, n, n) for p, n in lengths]
    step_s = cost.step.fixed_s + cost.per_step_overhead_s
    one_queue = run_seconds(jobs, 16, step_s)
    assert sequential_seconds(jobs, 16, step_s, shard=len(jobs)) == pytest.approx(one_queue)
    assert stream_seconds(jobs, 16, step_s, shard=len(jobs)) == pytest.approx(one_queue)
    for shard in (8, 16, 64):
        stream = stream_seconds(jobs, 16, step_s, shard)
        assert fluid_seconds(jobs, 16, step_s) <= stream <= sequential_seconds(jobs, 16, step_s, shard)
    records = run_records(jobs, cost, step_s, 16, [8, 200], 0.0, method="none", dataset="d")
    assert records[0].speedup > 1 and records[1].speedup == pytest.approx(1.0)
    assert "16 rows at once" in render_run_table(records)


def test_a_job_prices_its_rows_share_on_the_step_model():
    cost = h100_llama3_8b()
    s = cost.step
    # prompt 10, 5 output tokens in 5 forwards (prefill + 4 decode), no drafts
    kv = 4 * 11 + 1.0 * 4 * 3 / 2  # contexts 11, 12, 13, 14
    assert job(cost, 10, 5, 5).row_s == pytest.approx(s.per_token_s * (10 + 4) + s.per_kv_token_s * kv)
    # drafts: 2 decode forwards verifying 6 draft tokens in all
    assert job(cost, 10, 5, 3, drafted=6, draft_forwards=2).row_s == pytest.approx(
        s.per_token_s * (10 + 2 + 6) + s.per_kv_token_s * (2 * 11 + 2.0 * 2 * 1 / 2))


class Engine(TokenByToken):
    tokenizer = EchoTokenizer()


def test_run_rounds_interleave_shapes_and_methods_on_one_engine(monkeypatch):
    engine = Engine(max_num_seqs=4)
    asked: list[str] = []  # the method each run's stream asks the engine cache for
    monkeypatch.setattr(generate_mod, "get_engine", lambda params: (asked.append(params.method), (engine, 0.0))[1])
    rows = [PromptRow(i, f"r{i}", "x" * (1 + 5 * i), None, None) for i in range(8)]
    shards = [generate_mod.ShardRows(f"s{i}", f"s{i}", rows[2 * i : 2 * i + 2], []) for i in range(4)]
    prepared: list[str] = []
    params = GenerationParams(max_tokens=64, batch_size=4, method="specdec")
    timings = throughput.run_shard_rounds(shards, params, ["specdec", "none"], 2,
                                    lambda params, method: prepared.append(method))
    assert prepared == ["specdec", "none"] + ["specdec", "none", "specdec", "none"] + ["none", "specdec", "none", "specdec"]
    assert [(t.round, t.shape, t.method) for t in timings][:4] == [
        (0, "stream", "specdec"), (0, "stream", "none"), (0, "sequential", "specdec"), (0, "sequential", "none")]
    assert [(t.shape, t.method) for t in timings][4:] == [
        ("stream", "none"), ("sequential", "specdec"), ("sequential", "none"), ("stream", "specdec")]
    assert {t.num_output_tokens for t in timings} == {8 * 64}  # every request to max_tokens, every run
    # none runs as none (the cache switches a specdec engine's drafting off), not as the bench's method
    assert asked == ["specdec", "none"] + [t.method for t in timings]  # each method warmed up first
    records = throughput.make_run_records(timings, "d", shards, params)
    assert [(r.shape, r.method) for r in records] == [
        ("stream", "specdec"), ("stream", "none"), ("sequential", "specdec"), ("sequential", "none")]
    stream = records[0]
    assert stream.rounds == 2 and stream.vs_sequential is not None and stream.vs_none is not None
    assert stream.tokens_per_s.low <= stream.tokens_per_s.median <= stream.tokens_per_s.high
    assert records[2].vs_sequential is None and records[1].vs_none is None
    assert "x sequential" in throughput.render_runs(records)


def test_paired_ratios_take_the_same_round():
    timings = [Timing(r, "none", 16, 100, 0.0, seconds, shape) for r, shape, seconds in
               [(0, "stream", 1.0), (0, "sequential", 2.0), (1, "stream", 2.0), (1, "sequential", 3.0)]]
    shards = [generate_mod.ShardRows("s", "s", [], [])]
    stream = throughput.make_run_records(timings, "d", shards, GenerationParams())[0]
    assert stream.vs_sequential is not None
    assert (stream.vs_sequential.low, stream.vs_sequential.high) == pytest.approx((1.5, 2.0))
    assert (stream.tokens_per_s.low, stream.tokens_per_s.high) == (50.0, 100.0)


def test_the_long_first_shape_starts_the_longest_expected_first_and_needs_a_cache_file(monkeypatch, tmp_path):
    engine = Engine(max_num_seqs=1, step_s=0.01)  # two requests in the engine at once; steps slow
    # enough for the read-ahead to load every shard before the third request goes in
    monkeypatch.setattr(generate_mod, "get_engine", lambda params: (engine, 0.0))

    class ByPromptLength:  # a history in which longer prompts ran longer
        def expected_tokens(self, requests):
            return [float(len(r.prompt_token_ids)) for r in requests]

    monkeypatch.setattr(generate_mod, "_length_history",
                        lambda params: ByPromptLength() if params.long_first and params.cache_file else None)
    rows = [PromptRow(i, f"r{i}", "x" * (1 + 5 * i), None, None) for i in range(8)]
    shards = [generate_mod.ShardRows(f"s{i}", f"s{i}", rows[2 * i : 2 * i + 2], []) for i in range(4)]
    params = GenerationParams(max_tokens=4, batch_size=1, cache_file=str(tmp_path / "cache.npz"))
    with pytest.raises(ValueError, match="cache file"):
        throughput.run_shard_rounds(shards, params.model_copy(update={"cache_file": None}), ["none"], 1,
                              lambda params, method: None, shapes=["long-first"])
    starts: list[int] = []  # where each run's requests begin in engine.added
    timings = throughput.run_shard_rounds(shards, params, ["none"], 1, lambda params, method: starts.append(len(engine.added)),
                                    shapes=["stream", "long-first"])
    assert [t.shape for t in timings] == ["stream", "long-first"]
    assert starts[1] - starts[0] == 8  # the untimed first run: every shard (it records the history)
    prompt_len = {rid: len(engine.requests[rid].prompt_token_ids) for rid in engine.added}
    stream, long_first = engine.added[starts[1] : starts[2]], engine.added[starts[2] :]
    assert [prompt_len[r] for r in stream] == sorted(prompt_len[r] for r in stream)  # arrival order
    rest = [prompt_len[r] for r in long_first[2:]]  # the first two go in before every shard is loaded
    assert len(long_first) == 8 and rest == sorted(rest, reverse=True)


def test_several_inputs_are_kinds_of_shard_and_auto_is_measured_against_a_speculation_free_none(
        monkeypatch, tmp_path, capsys):
    import argparse

    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in ("chat", "code"):
        pq.write_table(pa.table({"id": [f"{name}-{i}" for i in range(8)], "prompt": [f"{name} {i}" for i in range(8)]}),
                       tmp_path / f"{name}.parquet")
    seen = {}

    def rounds(shards, params, methods, rounds, prepare, progress, shapes):
        seen.update(kinds=[s.kind for s in shards], sizes=[len(s.rows) for s in shards], methods=methods)
        return [Timing(0, m, 4, 10, 0.0, 1.0, "stream") for m in methods]

    monkeypatch.setattr(throughput, "run_shard_rounds", rounds)
    parser = argparse.ArgumentParser()
    throughput.add_run_parser(parser.add_subparsers())
    args = parser.parse_args(["bench-run", "--input", f"{tmp_path / 'chat.parquet'},{tmp_path / 'code.parquet'}",
                              "--shards", "4", "--shard-rows", "3", "--method", "auto", "--vs", "none", "--shapes", "stream"])
    assert throughput.run_bench_run(args) == 0
    assert seen == {"kinds": ["chat", "chat", "code", "code"], "sizes": [3, 3, 3, 3], "methods": ["auto", "none"]}
    # an input smaller than asked: its last shard holds the rest, and the run says so
    args = parser.parse_args(["bench-run", "--input", str(tmp_path / "code.parquet"), "--shards", "4", "--shard-rows",
                              "3", "--method", "auto", "--vs", "none", "--shapes", "stream"])
    assert throughput.run_bench_run(args) == 0
    assert seen["sizes"] == [3, 3, 2]
    assert "code: 8 rows, fewer than 4 shards x 3: 3 shards" in capsys.readouterr().out
