"""A running run's live progress, read through a real Prefect server while the run is under
way. The engine is a test double that finishes one request per step, in arrival order, and
holds before shard 10 of 20 while the test reads the API: the progress artifact must show 10
of 20 then, and 20 of 20 at the end. A fan-out parent's progress sums its groups' (the groups
run here in-process as flow runs of the child flow; on real workers in
test_pipeline_fanout.py). Publishing that fails never fails the run."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from specdec.engines.engine_stream import RequestUpdate
from support.db import query
from support.echo_engine import EchoEngine
from support.shards import write_shard

pytestmark = pytest.mark.slow  # starts the session's Prefect server

NUM_SHARDS = 20
HOLD_AT = 10


class HoldingEcho(EchoEngine):
    """Finishes one request per step, in arrival order; calls `on_hold` once, before the
    first request of shard HOLD_AT (the run is then held with shards 0..HOLD_AT-1 committed)."""

    def __init__(self, on_hold) -> None:
        self.on_hold = on_hold
        self.held = False

    def step(self) -> list[RequestUpdate]:
        queued = self.__dict__.setdefault("_queued", {})
        if not queued:
            return []
        request_id, (request, sampling) = next(iter(queued.items()))
        if not self.held and request.id.startswith(f"s{HOLD_AT:02d}-"):
            self.held = True
            self.on_hold()
        del queued[request_id]
        [result] = self.generate([request], sampling)
        return [RequestUpdate(request_id, len(result.output_token_ids), result)]


def live_artifacts(api: str, run_id: str) -> dict[str, Any]:
    """The run's live artifacts by key (every version: each flow run updates its own in place)."""
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.settings import PREFECT_API_URL, temporary_settings

    keys = [f"progress-{run_id}", f"live-shards-{run_id}"]
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
    assert len(found) <= 2, [a.key for a in found]
    return {a.key.split("-")[0]: a for a in found}


def wait_for_progress(api: str, run_id: str, percent: float, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        live = live_artifacts(api, run_id)
        if "progress" in live and live["progress"].data == percent:
            return live
        assert time.monotonic() < deadline, f"progress never reached {percent}: {live}"
        time.sleep(0.2)


def write_shards(src, n: int) -> None:
    for i in range(n):
        write_shard(src / f"part-{i:03d}.parquet", [{"id": f"s{i:02d}-0", "prompt": f"prompt number {i}"}])


def test_progress_moves_in_the_api_while_the_run_is_under_way(tmp_path, prefect_api, monkeypatch):
    import specdec.generate as generate_mod
    from flows.generation import speculative_generation

    write_shards(tmp_path / "src", NUM_SHARDS)
    seen: dict[str, Any] = {}

    def on_hold() -> None:  # the engine holds here: nothing after shard 9 can commit
        seen.update(wait_for_progress(prefect_api, "progress-1", 100.0 * HOLD_AT / NUM_SHARDS))

    monkeypatch.setattr(generate_mod, "get_engine", lambda params: (HoldingEcho(on_hold), 0.0))
    result = speculative_generation(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"),
                                    staging=str(tmp_path / "staging"), max_tokens=8, k_max=2,
                                    run_name="progress-1", long_first=False)
    assert result["num_prompts"] == NUM_SHARDS

    mid_progress, mid_table = seen["progress"], json.loads(seen["live"].data)
    print("mid-run progress artifact:", mid_progress.model_dump_json(include={"key", "type", "description", "data"}))
    print("mid-run table artifact:", seen["live"].model_dump_json(include={"key", "type", "description", "data"}))
    assert mid_progress.flow_run_id is not None  # on the flow run's page too
    assert mid_progress.description.startswith(f"{HOLD_AT} of {NUM_SHARDS} shards done (0 failed")
    totals, *rows = mid_table
    assert totals["shard"] == f"{HOLD_AT} of {NUM_SHARDS}" and totals["prompts"] == HOLD_AT
    assert [r["shard"] for r in rows] == [f"part-{i:03d}.parquet" for i in reversed(range(HOLD_AT))]
    assert totals["output tokens"] == sum(r["output tokens"] for r in rows) > 0
    assert all(r["tokens/s"] and r["acceptance rate"] is not None for r in [totals, *rows])

    end = live_artifacts(prefect_api, "progress-1")  # the same two artifacts, updated
    assert (end["progress"].id, end["live"].id) == (mid_progress.id, seen["live"].id)
    assert end["progress"].data == 100.0
    assert end["progress"].description.startswith(f"{NUM_SHARDS} of {NUM_SHARDS} shards done")
    final_totals = json.loads(end["live"].data)[0]
    assert final_totals["output tokens"] == query(tmp_path / "r.duckdb", "SELECT sum(num_output_tokens) FROM request_stats")[0][0]


def test_the_fanout_parent_shows_the_sum_of_its_groups(tmp_path, prefect_api, echo_engine):
    from prefect import flow

    from flows.fanout import _show_progress, generate_shard_group
    from flows.params import FlowParams
    from tasks.progress import LiveProgress

    write_shards(tmp_path / "src", 6)
    params = FlowParams(source=str(tmp_path / "src"), staging=str(tmp_path / "staging"), max_tokens=8,
                        run_name="fan-progress").shareable()
    groups = [[{"shard_id": f"part-{i:03d}.parquet", "uri": str(tmp_path / f"src/part-{i:03d}.parquet")}
               for i in ids] for ids in ([0, 1, 2, 3], [4, 5])]

    @flow(name="progress-test-parent")
    def parent() -> None:
        live = LiveProgress("fan-progress", 6, min_interval_s=0.1)
        children = []
        for group, percent in zip(groups, (100.0 * 4 / 6, 100.0)):
            state = generate_shard_group(params=params, shards=group, return_state=True)
            children.append(state.state_details.flow_run_id)
            _show_progress(live, children)
            shown = wait_for_progress(prefect_api, "fan-progress", percent)
            totals = json.loads(shown["live"].data)[0]
            assert totals["shard"] == f"{sum(len(g) for g in groups[:len(children)])} of 6", totals
        live.close()

    parent()
    shown = live_artifacts(prefect_api, "fan-progress")
    totals, *rows = json.loads(shown["live"].data)
    assert sorted(r["shard"] for r in rows) == [f"part-{i:03d}.parquet" for i in range(6)]
    assert totals["output tokens"] == sum(r["output tokens"] for r in rows) > 0


def test_a_failure_to_publish_never_fails_the_run(tmp_path, prefect_api, echo_engine, monkeypatch, caplog):
    from prefect.client.orchestration import SyncPrefectClient

    from flows.generation import speculative_generation

    def refuse(*args, **kwargs):
        raise ConnectionError("the API refused the update")

    write_shards(tmp_path / "src", 3)
    monkeypatch.setattr(SyncPrefectClient, "update_artifact", refuse)
    result = speculative_generation(source=str(tmp_path / "src"), db=str(tmp_path / "r.duckdb"),
                                    staging=str(tmp_path / "staging"), max_tokens=8, run_name="refused-1")
    assert result["num_prompts"] == 3
    assert "could not update the live progress of run refused-1" in caplog.text
    monkeypatch.setattr("tasks.progress.create_progress_artifact", refuse)
    write_shards(tmp_path / "src2", 2)
    result = speculative_generation(source=str(tmp_path / "src2"), db=str(tmp_path / "r2.duckdb"),
                                    staging=str(tmp_path / "staging2"), max_tokens=8, run_name="refused-2")
    assert result["num_prompts"] == 2
    assert "live progress of run refused-2 is off" in caplog.text
    assert query(tmp_path / "r2.duckdb", "SELECT count(*) FROM outputs") == [(2,)]
