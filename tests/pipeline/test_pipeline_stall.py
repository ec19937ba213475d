"""A stuck engine: the flow's first shard meets an EngineCore stopped with SIGSTOP (by its
PID). With the stall limit shortened to 10 s that shard fails with a message naming it, the
stopped engine's processes are killed, a new engine starts and the next shard completes.
Two engine starts (~1-2 min on 2 cores), both through the engine cache as in production."""

from __future__ import annotations

import os
import signal

import duckdb
import pytest

from prompt_sets.shards import write_shard
import specdec.engine_cache as engine_cache
from specdec.engines.vllm_engine import VllmEngine
from support.process_tree import describe, wait_until_gone

pytestmark = pytest.mark.slow
STALL_S = 10.0


def test_a_stuck_engine_fails_its_shard_and_the_next_shard_runs_on_a_new_engine(tmp_path, prefect_api, monkeypatch):
    from flows.generation import speculative_generation

    for name in ("a", "b"):
        write_shard([{"id": f"{name}{i}", "prompt": f"Count to {i + 3}."} for i in range(2)], tmp_path / f"src/{name}.parquet")
    stopped: list[VllmEngine] = []
    real_add = VllmEngine.add_request

    def add_to_a_stopped_core(self, *args, **kwargs):
        if not stopped:  # the first request: freeze the engine core before it gets any work
            core = self.processes[0]
            assert "EngineCore" in core.name(), describe(self.processes)
            os.kill(core.pid, signal.SIGSTOP)
            stopped.append(self)
        return real_add(self, *args, **kwargs)

    monkeypatch.setattr(VllmEngine, "add_request", add_to_a_stopped_core)
    monkeypatch.setattr(engine_cache, "_ENGINES", {})
    starts = engine_cache.ENGINE_STARTS
    db = tmp_path / "r.duckdb"
    try:
        with pytest.raises(RuntimeError, match="1 shard") as info:
            speculative_generation(source=str(tmp_path / "src"), db=str(db), staging=str(tmp_path / "staging"),
                                   method="none", max_tokens=8, batch_size=1, kv_cache_gib=1.0,
                                   stall_timeout_s=STALL_S)
        restarted = list(engine_cache._ENGINES.values())
    finally:
        engine_cache.close_engines()
    assert f"a.parquet: shard {tmp_path / 'src' / 'a.parquet'}: no engine step for {STALL_S:.0f} s" in str(info.value)
    assert engine_cache.ENGINE_STARTS - starts == 2
    assert not wait_until_gone(stopped[0].processes, 30), describe(stopped[0].processes)
    assert restarted and restarted[0] is not stopped[0]
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT shard_id, status FROM shards ORDER BY 1").fetchall() == [
            ("a.parquet", "failed"), ("b.parquet", "ingested")]
        assert con.execute("SELECT id FROM outputs ORDER BY 1").fetchall() == [("b0",), ("b1",)]
    finally:
        con.close()
