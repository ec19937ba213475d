"""The flow's parameters as one pydantic model: everything is validated before any work.

The flow takes these as flat keyword parameters (so `prefect deployment run ... --param
source=...` works) and builds this model first thing; a test keeps both in step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specdec.config import ConfigError, EngineConfig, SpecConfig, config_hash
from specdec.types import SamplingOptions
from tasks.storage import S3Options, is_s3

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


class FlowParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="folder or s3://bucket/prefix holding prompt shards")
    shard_glob: str = Field("*.parquet", description="which files under source are shards")
    db: str = Field("out/specdec.duckdb", description="local DuckDB file for the results")
    staging: str = Field("out/staging", description="folder or s3:// prefix for per-shard results")
    run_name: str | None = Field(None, description="run id; default derived from source + config")
    model: str | None = Field(None, description="HF model folder; default: bundled SmolLM2-135M")
    method: Literal["none", "ngram", "suffix", "draft", "specdec"] = "specdec"
    k_max: int = Field(4, ge=1, le=64)
    ngram_min: int = Field(2, ge=1)
    ngram_max: int = Field(5, ge=1)
    draft_model: str | None = None
    budget: bool = Field(True, description="specdec: size drafts by the measured cost of verifying them")
    cache_file: str | None = Field(
        None, description="specdec: cross-request cache file on the worker, loaded at start and saved after each shard")
    max_tokens: int = Field(128, ge=1, le=1 << 20)
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    seed: int | None = None
    batch_size: int = Field(16, ge=1, le=4096, description="most requests running at once")
    max_model_len: int = Field(2048, ge=16)
    kv_cache_gib: float = Field(2.0, gt=0.0)
    dtype: str = "float32"
    enforce_eager: bool = True
    s3_endpoint_url: str | None = Field(None, description="default: AWS_ENDPOINT_URL[_S3]")
    s3_region: str | None = None
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
    def _consistent(self) -> "FlowParams":
        if not is_s3(self.source) and not Path(self.source).expanduser().is_dir():
            raise ValueError(f"source {self.source!r} is not an existing folder")
        try:
            self.spec_config()
        except ConfigError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def check_model_folders(self) -> None:
        """Fail fast, before any shard, where the model folders are not on this host (called
        where the engine will run: a fan-out parent may run on a host without them)."""
        for name in ("model", "draft_model"):
            value = getattr(self, name)
            if value is not None and not (Path(value).expanduser() / "config.json").is_file():
                raise ConfigError(f"{name} {value!r}: not a model folder (no config.json) on this host")

    def spec_config(self) -> SpecConfig:
        return SpecConfig(
            method=self.method, k_max=self.k_max, ngram_min=self.ngram_min,
            ngram_max=self.ngram_max, draft_model=self.draft_model, budget=self.budget,
            cache_file=self.cache_file,
        )

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            model=self.model, dtype=self.dtype, max_model_len=self.max_model_len,
            kv_cache_gib=self.kv_cache_gib, enforce_eager=self.enforce_eager,
            max_num_seqs=self.batch_size, seed=self.seed or 0,
        )

    def sampling(self) -> SamplingOptions:
        return SamplingOptions(self.temperature, self.top_p, self.top_k, self.seed)

    def s3_options(self) -> S3Options:
        """Endpoint and region; credentials from the block (loaded where the flow runs) or
        the worker's environment."""
        from flows.credentials import resolve_s3_options

        return resolve_s3_options(self.s3_endpoint_url, self.s3_region, self.s3_credentials_block)

    def generation_config(self) -> dict[str, Any]:
        """The configuration that determines the outputs (hashed; recorded with results)."""
        return {
            "spec": self.spec_config().to_dict(),
            "engine": self.engine_config().__dict__,
            "sampling": self.sampling().__dict__,
            "max_tokens": self.max_tokens,
        }

    def config_hash(self) -> str:
        return config_hash(self.generation_config())

    def recorded_config(self) -> dict[str, Any]:
        """Everything worth recording about the run; never credentials."""
        return {
            **self.generation_config(),
            "source": self.source,
            "shard_glob": self.shard_glob,
            "staging": self.staging,
            "batch_size": self.batch_size,
            "s3": {"endpoint_url": self.s3_endpoint_url, "region": self.s3_region},
        }

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
