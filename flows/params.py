"""The flow's parameters as one pydantic model: everything is validated before any work.

The flow takes these as flat keyword parameters (so `prefect deployment run ... --param
source=...` works): its signature is derived from this model (flows.signature), and it
builds the model first thing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from specdec.config import ConfigError, config_hash
from specdec.params import GenerationParams
from tasks.storage import S3Options, is_s3

SHARD_FLOW = "speculative-generation-shards"  # the fan-out's child flow (flows.fanout)
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


class FlowParams(GenerationParams):
    """The flow's parameters: where the shards are and where results go, plus every
    generation parameter (inherited from specdec's one parameter model)."""

    source: str = Field(description="folder or s3://bucket/prefix holding prompt shards")
    shard_glob: str = Field("*.parquet", description="which files under source are shards")
    db: str = Field("out/specdec.duckdb", description="local DuckDB file for the results")
    staging: str = Field("out/staging", description="folder or s3:// prefix for per-shard results")
    run_name: str | None = Field(None, description="run id; default derived from source + config")
    s3_endpoint_url: str | None = Field(None, description="default: AWS_ENDPOINT_URL[_S3]")
    s3_region: str | None = Field(None, description="default: the worker's AWS region")
    # Credentials are never parameters (Prefect shows and stores parameters): a block name.
    s3_credentials_block: str | None = Field(
        None, description="name of an S3Credentials block; default: the worker's AWS credential chain")

    @field_validator("source", "staging")
    @classmethod
    def _uri(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if is_s3(value) and not _S3_URI.match(value):
            raise ValueError(f"{value!r} is not an s3://bucket/prefix URI")
        return value

    @field_validator("db")
    @classmethod
    def _local_db(cls, value: str) -> str:
        if "://" in value:
            raise ValueError("the DuckDB file must be a local path (DuckDB reads no remote files here)")
        return value

    @field_validator("run_name")
    @classmethod
    def _run_name(cls, value: str | None) -> str | None:
        if value is not None and not _RUN_NAME.match(value):
            raise ValueError(f"{value!r}: use letters, digits, '.', '_' or '-' (at most 100)")
        return value

    @model_validator(mode="after")
    def _source_exists(self) -> "FlowParams":
        if not is_s3(self.source) and not Path(self.source).expanduser().is_dir():
            raise ValueError(f"source {self.source!r} is not an existing folder")
        return self

    def check_model_folders(self) -> None:
        """Fail fast, before any shard, where the model folders are not on this host (called
        where the engine will run: a fan-out parent may run on a host without them)."""
        for name in ("model", "draft_model"):
            value = getattr(self, name)
            if value is not None and not (Path(value).expanduser() / "config.json").is_file():
                raise ConfigError(f"{name} {value!r}: not a model folder (no config.json) on this host")

    def s3_options(self) -> S3Options:
        """Endpoint and region; credentials from the block (loaded where the flow runs) or
        the worker's environment."""
        from tasks.credentials import resolve_s3_options

        return resolve_s3_options(self.s3_endpoint_url, self.s3_region, self.s3_credentials_block)

    def generation_params(self) -> GenerationParams:
        """The generation parameters alone (what the engine and the config hash see)."""
        return GenerationParams(**{name: getattr(self, name) for name in GenerationParams.model_fields})

    def run_id(self) -> str:
        """Same source + config -> same run, so re-running resumes instead of starting over."""
        if self.run_name:
            return self.run_name
        source = self.source.rstrip("/") if is_s3(self.source) else str(Path(self.source).resolve())
        where = config_hash({"source": source, "glob": self.shard_glob})
        return f"{self.method}-{self.config_hash()[:8]}-{where[:6]}"

    def shareable(self) -> dict[str, Any]:
        """Parameters for child flow runs: plain JSON, no credentials by construction."""
        return {**self.model_dump(mode="json"), "run_name": self.run_id()}


class FanoutParams(FlowParams):
    """The fan-out flow's parameters: the run's (FlowParams) plus how it is spread."""

    num_groups: int = Field(2, ge=1, description="child flow runs to split the shards into (~ workers)")
    shard_deployment: str = Field(f"{SHARD_FLOW}/gpu-shards",
                                  description="deployment of the child flow that generates a group")
    group_timeout_s: float = Field(24 * 3600.0, gt=0.0, description="longest wait for every group to finish")

    def run_params(self) -> FlowParams:
        """The run's own parameters (what the child flow runs take, what the run id hashes)."""
        return FlowParams(**{name: getattr(self, name) for name in FlowParams.model_fields})
