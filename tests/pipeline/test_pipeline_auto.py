"""Method auto on the real engine: one run over two kinds of shard, `chat` (its pilot measures
none faster) then `code` (its pilot measures specdec faster), SIGKILLed once the second kind's
first shard is committed, and resumed. The pilots really measure (engine wall time); the
inputs keep each choice clear of the run's 50 % margin on a machine running the suite alone:
- code: raw prompts of one code line repeated, which the model keeps repeating and the
  drafter predicts whole (measured 2.45-2.91x none's tokens per engine-second);
- chat: ordinary questions as chat turns, little to draft from (measured 0.43-1.00x).
The killed run pilots with both engines (a subprocess: `specdec run`); the resume runs in
this process on the session's specdec engine and must not pilot again. The decision on
synthetic measurements, and whole runs on engine doubles: tests/unit/test_auto_method.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import specdec.engine_cache as engine_cache
import specdec.generate as generate_mod
from flows.params import FlowParams
from prompt_sets.humaneval import humaneval_rows
from support.db import query
from support.killed_flow import kill_flow_process_mid_stream
from support.shards import write_shard
from tasks.staging import Staging

pytestmark = pytest.mark.slow

SHARDS = ["part-000.parquet", "part-001.parquet", "part-002.parquet", "part-003.parquet"]
LONG_TOKENS = 128  # the last two shards' rows of a kind: still in the engine when its first shard is committed
MARGIN = 0.5  # specdec must be 1.5x none to run a kind
CHOSEN = {"chat": "none", "code": "specdec"}  # the kinds in the order they run, and what their pilots choose

# Lines the model repeats for all 64 tokens (checked: other names, e.g. `acc`, end the pattern).
REPEATED_LINES = ["".join(f"{name} = {name} + {i + 1}\n" for _ in range(12))
                  for i, name in enumerate(["x", "y", "total", "count", "value", "step", "size", "a"])]
CHAT = ["Explain why the sky is blue.", "Describe how bread is made.", "Why do we need sleep?",
        "Describe a walk in a forest.", "Explain how a bicycle works.", "Why do leaves change colour in autumn?",
        "Describe what a library is for.", "Explain how rain forms."]
STORIES = [f"Write a short story about {thing}." for thing in (
    "a lost umbrella", "a brave mouse", "a lighthouse keeper", "a robot who paints", "a quiet town",
    "a river journey", "an old clock", "a friendly dragon")]


def write_kind(tmp_path: Path, kind: str, first: list[str], long: list[str]) -> None:
    """16 rows in 4 shards: `first` (the pilot samples these), then `long`, LONG_TOKENS each;
    chat rows carry their prompt as a chat turn (the run completes plain prompts as raw text)."""
    turn = (lambda p: {"messages": json.dumps([{"role": "user", "content": p}])}) if kind == "chat" else (lambda p: {})
    rows = [{"id": f"{kind}-{i}", "prompt": p, **turn(p)} for i, p in enumerate(first)] + [
        {"id": f"{kind}-{len(first) + i}", "prompt": p, **turn(p), "max_tokens": LONG_TOKENS} for i, p in enumerate(long)]
    for n, shard in enumerate(SHARDS):
        write_shard(tmp_path / "src" / kind / shard, rows[4 * n: 4 * n + 4])


def test_a_killed_auto_run_resumes_on_each_kinds_pilot_choice_with_every_row_once(
        tmp_path, prefect_server, prefect_api, engine_factory, engine_config, monkeypatch):
    """1. `specdec run --method auto` pilots each kind on none and on specdec, chooses as
    designed, stages each decision, and is SIGKILLed once code's first shard is committed: both
    decisions are in DuckDB already, code's long shards are not. 2. The resume (same run) reads
    the decisions: no pilot, only specdec asked for, no engine started. 3. Every row exactly once,
    on its kind's engine but for the pilot's share on the other, one decision per kind in
    v_pilot_decisions: the killed run's, with the kind's totals."""
    write_kind(tmp_path, "chat", CHAT, STORIES)
    write_kind(tmp_path, "code", REPEATED_LINES, [r["prompt"] for r in humaneval_rows(limit=8)])
    params = dict(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"), staging=str(tmp_path / "staging"),
                  method="auto", prompt_format="raw", max_tokens=64, batch_size=16, kv_cache_gib=1.0,
                  pilot_requests=4, pilot_min_requests=8, pilot_margin=MARGIN)  # engine: the session's
    db = Path(params["db"])
    args = [arg for key, value in params.items() for arg in (f"--{key.replace('_', '-')}", str(value))]
    log = kill_flow_process_mid_stream(prefect_server, args, tmp_path / "killed.log", timeout=900,
                                       until=lambda log: "ingested" in log.partition("code: specdec")[2])

    decided = query(db, "SELECT kind, method, reason, speedup FROM v_pilot_decisions ORDER BY ordinal")
    assert [row[:2] for row in decided] == list(CHOSEN.items()), (decided, log[-3000:])
    for kind, method, reason, speedup in decided:
        assert re.findall(rf"{kind}: specdec [\d.]+x none in the pilot[^\n]*", log) == [reason]
        assert re.search(rf"\(2 requests on none in [\d.]+ s, 2 on specdec in [\d.]+ s, margin 50%\): ran {method}$",
                         reason)
        assert (speedup > 1 + MARGIN) if method == "specdec" else (speedup <= 1 + MARGIN)
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    committed = dict(query(db, "SELECT shard_id, generated_at FROM shards WHERE status = 'ingested'"))
    assert {f"chat/{shard}" for shard in SHARDS} | {f"code/{SHARDS[0]}"} <= set(committed)
    staged = {shard for shard in SHARDS if Staging(params["staging"]).read_manifest(run_id, f"code/{shard}")}
    assert not staged & set(SHARDS[2:]), (staged, log[-3000:])  # in the engine when killed: not committed

    # The resume, in this process, on the session's specdec engine (chat is done).
    chosen = FlowParams(**params).generation_params().model_copy(update={"method": "specdec"})
    key = engine_cache.engine_configs(chosen)
    assert key[0] == engine_config  # the session's engine runs exactly the run's engine config
    monkeypatch.setitem(engine_cache._ENGINES, key, engine_factory("specdec"))
    pilots, asked = [], []
    real_pilot, real_get_engine = generate_mod._none_share, generate_mod.get_engine
    monkeypatch.setattr(generate_mod, "_none_share", lambda *a, **kw: pilots.append(a[0]) or real_pilot(*a, **kw))
    monkeypatch.setattr(generate_mod, "get_engine",
                        lambda p, **kw: asked.append(p.method) or real_get_engine(p, **kw))
    starts = engine_cache.ENGINE_STARTS
    from flows.generation import speculative_generation

    assert speculative_generation(**params) == {"run_id": run_id, "num_shards": 8, "num_prompts": 32}
    assert pilots == [] and set(asked) == {"specdec"} and engine_cache.ENGINE_STARTS == starts

    assert query(db, "SELECT count(*), count(DISTINCT id) FROM outputs") == [(32, 32)]
    # Every row once, on its kind's engine but for the pilot's share on the other engine in the
    # shards the killed run staged (kept, and named so); code's others ran again, whole, on
    # specdec. Each pilot took rows 0, 2, 4, 6 of its kind's first 8: none 0 and 4, specdec 2 and 6.
    on_other = {"chat-2", "chat-6"} | {f"code-{4 * n}" for n in (0, 1) if SHARDS[n] in staged}
    engines = query(db, "SELECT id, method FROM request_stats")
    assert {row_id for row_id, method in engines if method != CHOSEN[row_id.split("-")[0]]} == on_other
    drafted = dict(query(db, "SELECT method, count(*) FILTER (WHERE num_drafts > 0) FROM request_stats GROUP BY 1"))
    assert drafted["none"] == 0  # none drafts nothing; specdec every repeated line it ran (all but 2)
    assert drafted["specdec"] >= len(REPEATED_LINES) - 2
    assert query(db, "SELECT input_rows, output_rows, quarantined_rows, balanced FROM v_run_accounting") == [
        (32, 32, 0, True)]
    assert query(db, "SELECT shard_id, status, kind, method FROM shards ORDER BY 1") == [
        (f"{kind}/{shard}", "ingested", kind, method) for kind, method in CHOSEN.items() for shard in SHARDS]
    resumed = dict(query(db, "SELECT shard_id, generated_at FROM shards"))
    assert {shard: resumed[shard] for shard in committed} == committed  # not generated again
    assert query(db, "SELECT kind, method, reason, speedup, shards_done, num_prompts FROM v_pilot_decisions "
                     "ORDER BY ordinal") == [(*row, 4, 16) for row in decided]
