"""The workload a bench measures (greedy, or S samples per prompt at T over E epochs, new seeds
each epoch) and its reference outputs: generated once by the real engine without speculation,
`lookahead` tokens past max_tokens with EOS ignored, cached under the project home."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.engine_hooks import run_batches
from bench.replay import ReplayRequest
from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.models import specdec_home
from specdec.sampling_seeds import sample_seed
from specdec.types import GenerationRequest, SamplingOptions

LOOKAHEAD = 9  # tokens past max_tokens: more than any K a bench sweeps
# Epoch e's base seed is seed + EPOCH_SEED_STRIDE * (e - 1): far apart, so that the seeds of
# neighbouring base seeds' epochs do not coincide.
EPOCH_SEED_STRIDE = 1_000_003
_SCHEMA = pa.schema([("id", pa.string()), ("sample", pa.int32()), ("output_token_ids", pa.list_(pa.int32()))])


@dataclasses.dataclass(frozen=True)
class Workload:
    temperature: float = 0.0
    samples: int = 1
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    # (row id, samples) of the rows with a `samples` of their own (a Parquet column): theirs win
    row_samples: tuple[tuple[str, int], ...] = ()
    epochs: int = 1

    def __post_init__(self) -> None:
        if self.samples < 1 or any(n < 1 for _, n in self.row_samples) or self.epochs < 1:
            raise ConfigError(f"samples ({self.samples}, rows: {self.row_samples}) and epochs ({self.epochs}) "
                              "must be at least 1")
        if self.temperature == 0 and self.samples > 1:
            raise ConfigError("several greedy samples of a prompt would all be the same: give a temperature")

    @property
    def sampled(self) -> bool:
        return self.temperature > 0

    @property
    def sampling(self) -> SamplingOptions:
        return SamplingOptions(temperature=self.temperature, top_p=self.top_p, top_k=self.top_k)

    def record_fields(self) -> dict[str, float | int]:
        return {"temperature": self.temperature, "samples": self.samples, "epoch": self.epochs}

    def samples_of(self, row_id: str) -> int:
        return dict(self.row_samples).get(row_id, self.samples)


def epoch_seed(seed: int, epoch: int) -> int:
    """The base seed of `epoch` (from 1)."""
    if epoch < 1:
        raise ValueError(f"epochs count from 1, not {epoch}")
    return seed + EPOCH_SEED_STRIDE * (epoch - 1)


def epoch_requests(requests: Sequence[GenerationRequest], workload: Workload, epoch: int) -> list[GenerationRequest]:
    """The requests of `epoch`: the rows, or each row's samples with this epoch's seeds."""
    if not workload.sampled:
        return list(requests)
    base = epoch_seed(workload.seed, epoch)
    return [GenerationRequest(r.id, r.prompt_token_ids, r.max_tokens, sample=s, seed=sample_seed(base, r.id, s))
            for r in requests for s in range(workload.samples_of(r.id))]


def replay_id(req_id: str, sample: int = 0, epoch: int = 1) -> str:
    """Unique per row, sample and epoch, as vLLM's request ids are per engine."""
    return f"{req_id}#s{sample}e{epoch}"


def reference_path(model_dir: Path, requests: Sequence[GenerationRequest], lookahead: int,
                   workload: Workload = Workload()) -> Path:
    digest = hashlib.sha256(f"{model_dir}{lookahead}".encode())
    if workload.sampled:
        digest.update(f"sampled|{workload.temperature!r}|{workload.top_p!r}|{workload.top_k}".encode())
    for r in requests:
        digest.update(f"{r.id}|{r.max_tokens}|{list(r.prompt_token_ids)}".encode())
        if workload.sampled:
            digest.update(f"|{r.sample}|{r.seed}".encode())
    return specdec_home() / "replay" / f"{digest.hexdigest()[:20]}.parquet"


def reference(requests: Sequence[GenerationRequest], workload: Workload, engine_cfg: EngineConfig, model_dir: Path,
              eos_token_id: int, lookahead: int = LOOKAHEAD, engine: Any = None) -> list[list[ReplayRequest]]:
    """Every epoch's replay requests; missing references generated with `engine` (or a new one)."""
    epochs = [epoch_requests(requests, workload, e) for e in range(1, workload.epochs + 1)]
    paths = [reference_path(model_dir, reqs, lookahead, workload) for reqs in epochs]
    missing = {path: reqs for path, reqs in zip(paths, epochs) if not path.exists()}
    kind = "greedy" if not workload.sampled else f"sampled (temperature {workload.temperature})"
    own = missing and engine is None
    if own:
        from specdec.engines.vllm_engine import VllmEngine

        engine = VllmEngine(engine_cfg, SpecConfig(method="none"))
    try:
        for path, reqs in missing.items():
            print(f"generating {kind} reference outputs for {len(reqs)} requests (cached at {path})", flush=True)
            longer = [dataclasses.replace(r, max_tokens=r.max_tokens + lookahead) for r in reqs]
            results = run_batches(engine, longer, dataclasses.replace(workload.sampling, ignore_eos=True),
                                  show_progress=True)
            table = pa.Table.from_pylist([{"id": r.id, "sample": r.sample, "output_token_ids": res.output_token_ids}
                                          for r, res in zip(reqs, results, strict=True)], schema=_SCHEMA)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path.with_name(path.name + ".tmp"))
            path.with_name(path.name + ".tmp").replace(path)  # whole or not at all
    finally:
        if own:
            engine.close()
    stop = frozenset({eos_token_id})
    out = []
    for epoch, (reqs, path) in enumerate(zip(epochs, paths), start=1):
        outputs = {(row["id"], row.get("sample") or 0): row["output_token_ids"] for row in pq.read_table(path).to_pylist()}
        out.append([ReplayRequest(replay_id(r.id, r.sample, epoch), r.prompt_token_ids, outputs[(r.id, r.sample)],
                                  r.max_tokens, stop) for r in reqs])
    return out
