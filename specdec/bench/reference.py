"""Greedy reference outputs for the replay benchmark: generated once with the real engine
(no speculation) and cached under the project home, keyed by model, prompts and lengths.

Outputs run `lookahead` tokens past `max_tokens` with EOS ignored, because vLLM verifies
drafts past the stop point and the replay needs those tokens to count the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from specdec.config import EngineConfig, SpecConfig
from specdec.engines.replay import ReplayRequest
from specdec.models import specdec_home
from specdec.types import GenerationRequest, SamplingOptions


def reference_path(model_dir: Path, requests: Sequence[GenerationRequest], lookahead: int) -> Path:
    digest = hashlib.sha256()
    digest.update(str(model_dir).encode())
    digest.update(str(lookahead).encode())
    for r in requests:
        digest.update(f"{r.id}|{r.max_tokens}|{list(r.prompt_token_ids)}".encode())
    return specdec_home() / "replay" / f"{digest.hexdigest()[:20]}.parquet"


def greedy_reference(
    requests: Sequence[GenerationRequest],
    engine_cfg: EngineConfig,
    model_dir: Path,
    eos_token_id: int,
    lookahead: int = 9,
) -> list[ReplayRequest]:
    """ReplayRequests with the model's greedy continuation (generated once, then cached)."""
    path = reference_path(model_dir, requests, lookahead)
    if not path.exists():
        _generate(requests, engine_cfg, lookahead, path)
    outputs = {row["id"]: row["output_token_ids"] for row in pq.read_table(path).to_pylist()}
    stop = frozenset({eos_token_id})
    return [ReplayRequest(r.id, r.prompt_token_ids, outputs[r.id], r.max_tokens, stop) for r in requests]


def _generate(requests: Sequence[GenerationRequest], engine_cfg: EngineConfig, lookahead: int, path: Path) -> None:
    from specdec.engines.vllm_engine import VllmEngine

    print(f"generating greedy reference outputs for {len(requests)} prompts (cached at {path})", flush=True)
    engine = VllmEngine(engine_cfg, SpecConfig(method="none"))
    try:
        longer = [GenerationRequest(r.id, r.prompt_token_ids, r.max_tokens + lookahead) for r in requests]
        results = engine.generate(longer, SamplingOptions(temperature=0.0, ignore_eos=True), show_progress=True)
    finally:
        engine.close()
    table = pa.Table.from_pylist(
        [{"id": r.id, "output_token_ids": r.output_token_ids} for r in results],
        schema=pa.schema([("id", pa.string()), ("output_token_ids", pa.list_(pa.int32()))]),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
