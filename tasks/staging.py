"""Per-shard results in a staging area (local folder or S3 prefix), keyed by run and shard.

Layout: <staging>/<run_id>/run.json and <staging>/<run_id>/shards/<shard key>/
{results.parquet, manifest.json}. The manifest is written last and is the commit marker:
a shard without one was not finished (for example a run killed mid-shard) and is
generated again. Ingest reads only committed shards.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import time
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from specdec.stats import ShardStats
from tasks import storage
from tasks.storage import S3Options


@dataclasses.dataclass
class ShardManifest:
    """What one finished shard produced; enough to decide whether it must run again."""

    run_id: str
    shard_id: str
    source_path: str
    fingerprint: str  # content hash of the prompt shard
    config_hash: str
    status: str  # generated | failed
    error: str | None = None
    num_prompts: int = 0
    num_rejected: int = 0
    stats: ShardStats = dataclasses.field(default_factory=ShardStats)
    read_s: float = 0.0
    engine_start_s: float = 0.0
    generate_s: float = 0.0
    stage_s: float = 0.0
    generated_at: str | None = None
    # Quarantined input: {"row_index", "id", "stage", "reason", "num_rows"} per entry.
    rejected: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    num_input_rows: int | None = None  # rows in the prompt shard; None when unreadable
    worker: str | None = None  # host:pid that generated it (with its devices where pinned)
    engine: dict[str, Any] | None = None  # what vLLM resolved for the engine that generated it
    method: str | None = None  # the method that generated it (under auto: none or specdec); None: older workers
    kind: str | None = None  # its folder inside the run's source ("": the top level); None: older workers
    results_sha256: str = ""  # of results.parquet: ingest refuses a file that is not the committed one

    def __post_init__(self) -> None:
        if not isinstance(self.stats, ShardStats):
            raise TypeError(f"ShardManifest.stats must be a ShardStats, not {type(self.stats).__name__} "
                            "(manifest.json is read with ShardManifest.from_dict)")

    def matches(self, fingerprint: str, config_hash: str) -> bool:
        return self.fingerprint == fingerprint and self.config_hash == config_hash

    def to_dict(self) -> dict[str, Any]:
        """manifest.json: the fields, stats with its derived figures."""
        data = dataclasses.asdict(self)
        data["stats"] = self.stats.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ShardManifest":
        """Read manifest.json, also as older workers wrote it (stats with other or fewer keys)."""
        return cls(**{**data, "stats": ShardStats.from_dict(data.get("stats") or {})})


@dataclasses.dataclass
class RunManifest:
    run_id: str
    run_name: str | None
    flow_run_id: str | None
    source: str
    method: str
    config_hash: str
    config: dict[str, Any]
    status: str  # running | completed | failed
    num_shards: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    engine_start_s: float | None = None
    message: str | None = None
    # Seconds the engine held requests (the sum of its steps' wall times): what the requests'
    # attributed engine_s add up to. None: not measured (the sequential worker, older runs).
    engine_busy_s: float | None = None
    # Method auto's decisions, one PilotDecision.to_dict() per shard kind in the order decided;
    # empty for other methods and older runs.
    pilot: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class StagingIntegrityError(RuntimeError):
    """A staged file does not match its committed manifest (partial or replaced)."""


def shard_key(shard_id: str) -> str:
    """Folder name for a shard id (a relative path inside the source)."""
    return shard_id.replace("/", "__")


class Staging:
    def __init__(self, uri: str, s3: S3Options | None = None) -> None:
        self.uri = uri
        self.fs, self.root = storage.filesystem(uri, s3)

    def _shard_dir(self, run_id: str, shard_id: str) -> str:
        return storage.join(self.root, run_id, "shards", shard_key(shard_id))

    def write_shard(self, manifest: ShardManifest, results: pa.Table | None) -> ShardManifest:
        """Replace a shard's staged results: old marker out, results in, new marker last.
        Returns the manifest as committed (with the staging time filled in)."""
        started = time.perf_counter()
        folder = self._shard_dir(manifest.run_id, manifest.shard_id)
        marker = storage.join(folder, "manifest.json")
        if storage.exists(self.fs, marker):
            self.fs.delete_file(marker)
        digest = ""
        if results is not None:
            buf = io.BytesIO()
            pq.write_table(results, buf)
            data = buf.getvalue()
            digest = hashlib.sha256(data).hexdigest()
            storage.write_bytes_atomically(self.fs, storage.join(folder, "results.parquet"), data)
        manifest = dataclasses.replace(manifest, stage_s=time.perf_counter() - started, results_sha256=digest)
        data = json.dumps(manifest.to_dict(), sort_keys=True).encode()
        storage.write_bytes_atomically(self.fs, marker, data)
        return manifest

    def read_manifest(self, run_id: str, shard_id: str) -> ShardManifest | None:
        marker = storage.join(self._shard_dir(run_id, shard_id), "manifest.json")
        try:
            raw = storage.read_bytes(self.fs, marker)
        except FileNotFoundError:
            return None
        return ShardManifest.from_dict(json.loads(raw))

    def read_results(self, run_id: str, shard_id: str, expected_sha256: str | None = None) -> pa.Table:
        path = storage.join(self._shard_dir(run_id, shard_id), "results.parquet")
        data = storage.read_bytes(self.fs, path)
        if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
            raise StagingIntegrityError(f"{path}: {len(data)} bytes that are not the committed results")
        return pq.read_table(pa.BufferReader(data))

    def committed_shard_ids(self, run_id: str) -> list[str]:
        base = storage.join(self.root, run_id, "shards")
        selector = pafs.FileSelector(base, allow_not_found=True, recursive=False)
        found = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.Directory:
                manifest = self.read_manifest_at(storage.join(info.path, "manifest.json"))
                if manifest is not None:
                    found.append(manifest.shard_id)
        return sorted(found)

    def read_manifest_at(self, path: str) -> ShardManifest | None:
        try:
            return ShardManifest.from_dict(json.loads(storage.read_bytes(self.fs, path)))
        except FileNotFoundError:
            return None

    def write_run(self, manifest: RunManifest) -> None:
        data = json.dumps(dataclasses.asdict(manifest), sort_keys=True).encode()
        storage.write_bytes_atomically(self.fs, storage.join(self.root, manifest.run_id, "run.json"), data)

    def read_run(self, run_id: str) -> RunManifest | None:
        try:
            raw = storage.read_bytes(self.fs, storage.join(self.root, run_id, "run.json"))
        except FileNotFoundError:
            return None
        return RunManifest(**json.loads(raw))
