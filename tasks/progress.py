"""What a running run shows in the Prefect UI: a progress artifact (shards done of total, with
the run's tokens/s and acceptance so far) and a table of the run so far and its latest shards,
both updated in place as shards commit.

Shards commit in the stream's finisher thread; publishing is an API call, so it happens in a
publisher thread of its own that sends the latest state at most once per `min_interval_s`:
neither the engine nor the finisher ever waits on the Prefect API, and a failure to publish
is logged, never raised. The table keeps the latest RECENT_ROWS shards (re-sending every
shard on every update would grow without bound over thousands of shards); the full per-shard
table is published once the run ends (tasks.prefect_artifacts).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from prefect import get_client, get_run_logger
from prefect.artifacts import create_progress_artifact, create_table_artifact
from prefect.client.schemas.actions import ArtifactUpdate

from tasks.prefect_artifacts import shard_rows
from tasks.staging import ShardManifest

LIVE_TABLE = "Shards so far"  # the table's description starts with it: the fan-out parent finds its groups' tables by it
RECENT_ROWS = 50
TOTAL = "run so far"  # the `status` of the table's first row, the run's totals


def live_key(run_id: str, what: str) -> str:
    # Artifact keys allow lowercase letters, digits and dashes only.
    return re.sub(r"[^a-z0-9-]+", "-", f"{what}-{run_id}".lower()).strip("-")[:120]


@dataclasses.dataclass
class Tally:
    """A run's (or a group's) shards so far."""

    total: int
    done: int = 0  # every shard with an outcome: generated, skipped (already staged) or failed
    failed: int = 0
    skipped: int = 0
    prompts: int = 0
    output_tokens: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0

    def add(self, m: ShardManifest, status: str) -> None:
        self.done += 1
        self.failed += status == "failed"
        self.skipped += status == "skipped"
        self.prompts += m.num_prompts
        if status == "generated":  # tokens of this run only, so tokens/s is this run's rate
            self.output_tokens += m.stats.num_output_tokens
            self.draft_tokens += m.stats.num_draft_tokens
            self.accepted_tokens += m.stats.num_accepted_tokens

    @property
    def acceptance_rate(self) -> float | None:
        return round(self.accepted_tokens / self.draft_tokens, 4) if self.draft_tokens else None

    def row(self, elapsed_s: float) -> dict[str, Any]:
        """The table's first row (same columns as a shard's row)."""
        return {"shard": f"{self.done} of {self.total}", "status": TOTAL, "prompts": self.prompts,
                "output tokens": self.output_tokens, "acceptance rate": self.acceptance_rate,
                "tokens/s": round(self.output_tokens / elapsed_s, 1) if elapsed_s > 0 else None,
                "draft tokens": self.draft_tokens, "accepted tokens": self.accepted_tokens,
                "failed": self.failed, "skipped": self.skipped, "worker": None, "committed": None}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Tally":
        done, total = (int(n) for n in str(row["shard"]).split(" of "))
        return cls(total, done, int(row["failed"]), int(row["skipped"]), int(row["prompts"]),
                   int(row["output tokens"]), int(row["draft tokens"]), int(row["accepted tokens"]))

    @classmethod
    def combine(cls, tallies: Iterable["Tally"], total: int) -> "Tally":
        out = cls(total)
        for t in tallies:
            for f in dataclasses.fields(cls):
                if f.name != "total":
                    setattr(out, f.name, getattr(out, f.name) + getattr(t, f.name))
        return out

    def describe(self, elapsed_s: float) -> str:
        rate = self.output_tokens / elapsed_s if elapsed_s > 0 else 0.0
        acceptance = f"{self.acceptance_rate:.3f}" if self.acceptance_rate is not None else "n/a"
        return (f"{self.done} of {self.total} shards done ({self.failed} failed, {self.skipped} already "
                f"generated); {self.prompts} prompts, {self.output_tokens} output tokens, {rate:.1f} tokens/s, "
                f"acceptance rate {acceptance}")


def shard_row(m: ShardManifest, status: str) -> dict[str, Any]:
    """A committed shard as a row of the live table."""
    row = shard_rows([m])[0]
    return {"shard": m.shard_id, "status": status, "prompts": m.num_prompts,
            "output tokens": row["output tokens"], "acceptance rate": row["acceptance rate"],
            "tokens/s": row["tokens/s"], "draft tokens": m.stats.num_draft_tokens,
            "accepted tokens": m.stats.num_accepted_tokens, "failed": int(status == "failed"),
            "skipped": int(status == "skipped"), "worker": m.worker,
            "committed": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}  # UTC; sorts as text


def split_table(rows: list[dict[str, Any]]) -> tuple[Tally, list[dict[str, Any]]]:
    """A live table read back: its totals and its shard rows (newest first)."""
    return Tally.from_row(rows[0]), rows[1:]


class LiveProgress:
    """The live artifacts of one flow run. `keyed`: under the run id's keys (listed on the UI's
    Artifacts page, one version per flow run); otherwise only on the flow run's own page."""

    def __init__(self, run_id: str, total: int, keyed: bool = True, min_interval_s: float = 1.0) -> None:
        self.run_id = run_id
        self.tally = Tally(total)
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_ROWS)
        self.min_interval_s = min_interval_s
        self.started = time.monotonic()
        self._logger = get_run_logger()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._failing = False
        self._ids: tuple[UUID, UUID] | None = None
        try:  # here, in the flow's thread: the run context links the artifacts to the flow run
            self._ids = (
                create_progress_artifact(0.0, key=live_key(run_id, "progress") if keyed else None,
                                         description=self.tally.describe(0.0)),
                create_table_artifact([self.tally.row(0.0)], key=live_key(run_id, "live-shards") if keyed else None,
                                      description=f"{LIVE_TABLE}: run {run_id}, latest {RECENT_ROWS} shards first"),
            )
        except Exception as exc:
            self._logger.warning("live progress of run %s is off: could not create its artifacts (%s)", run_id, exc)
            return
        context = contextvars.copy_context()  # the API settings of this flow run
        self._thread = threading.Thread(target=context.run, args=(self._run,), daemon=True, name="specdec-progress")
        self._thread.start()

    def shard_done(self, manifest: ShardManifest, status: str) -> None:
        """A shard committed (`status`: generated | skipped | failed); returns at once, never raises."""
        try:
            row = shard_row(manifest, status)
            with self._lock:
                self.tally.add(manifest, status)
                self.recent.appendleft(row)
            self._wake.set()
        except Exception as exc:  # never the shard's failure: it is committed already
            self._logger.warning("live progress: could not count shard %s (%s)", manifest.shard_id, exc)

    def replace(self, tally: Tally, recent: list[dict[str, Any]]) -> None:
        """Set the whole state (the fan-out parent, from its groups' tables)."""
        with self._lock:
            self.tally = tally
            self.recent = deque(recent[:RECENT_ROWS], maxlen=RECENT_ROWS)
        self._wake.set()

    @property
    def enabled(self) -> bool:
        return self._ids is not None

    def close(self, timeout_s: float = 30.0) -> None:
        """Publish the last state and stop (a hung API holds the run at most `timeout_s`)."""
        if self._ids is None:
            return
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            with get_client(sync_client=True) as client:
                while True:
                    self._wake.wait()
                    self._wake.clear()
                    closing = self._closing.is_set()
                    self._publish(client)
                    if closing:
                        return
                    self._closing.wait(self.min_interval_s)  # what commits meanwhile goes in the next update
        except Exception as exc:
            self._logger.warning("live progress of run %s stopped: %s", self.run_id, exc)

    def _publish(self, client: Any) -> None:
        assert self._ids is not None
        elapsed = time.monotonic() - self.started
        with self._lock:
            tally = dataclasses.replace(self.tally)
            rows = [tally.row(elapsed), *self.recent]
        done = 100.0 * tally.done / tally.total if tally.total else 100.0
        try:
            # the table first: once the progress shows a state, the table shows it too
            client.update_artifact(self._ids[1], ArtifactUpdate(data=json.dumps(rows)))
            client.update_artifact(self._ids[0], ArtifactUpdate(data=min(done, 100.0),
                                                                description=tally.describe(elapsed)))
        except Exception as exc:  # progress is for people watching: the run goes on without it
            if not self._failing:
                self._logger.warning("could not update the live progress of run %s (%s); retrying at the "
                                     "next shard", self.run_id, exc)
            self._failing = True
            return
        if self._failing:
            self._logger.info("live progress of run %s is updated again", self.run_id)
        self._failing = False


def combine_groups(tables: Iterable[list[dict[str, Any]]], total: int) -> tuple[Tally, list[dict[str, Any]]]:
    """A fan-out run's progress from its groups' live tables: their totals summed, their
    latest shards merged newest first."""
    tallies, rows = [], []
    for table in tables:
        tally, recent = split_table(table)
        tallies.append(tally)
        rows += recent
    rows.sort(key=lambda r: r.get("committed") or "", reverse=True)
    return Tally.combine(tallies, total), rows[:RECENT_ROWS]
