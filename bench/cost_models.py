"""Step-time models (`t = fixed + per_seq*rows + per_token*tokens + per_kv_token*KV + per_draft_kv_token*draft KV +
overhead`, + `host_s` for synchronous methods on a GPU) and pricing a replay's step log: `h100-llama3-8b` (arXiv
2601.11580's fit), `cpu-calibrated` (this machine's calibration, prefill at its timed rate) or a JSON file of the
coefficients. A priced step is its forward plus the drafter's time; a mixed step's decode part is priced as over its
decoding rows alone."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.step_cost import PrefillSample, StepCost, StepSample, fit_step_cost, nonnegative_lstsq

# vLLM's default token budget per step for offline `LLM` use (vllm/engine/arg_utils.py)
H100_MAX_BATCHED_TOKENS = 16384
GPU_MAX_BATCHED_TOKENS = 8192
CPU_MAX_BATCHED_TOKENS = 4096

H100_LLAMA3_8B = "h100-llama3-8b"
CPU_CALIBRATED = "cpu-calibrated"
PRESETS = (H100_LLAMA3_8B, CPU_CALIBRATED)
_JSON_FIELDS = ("per_kv_token_s", "per_token_s", "fixed_s", "per_step_overhead_s")
_OPTIONAL_JSON_FIELDS = ("per_seq_s", "per_draft_kv_token_s", "per_prefill_token_s", "max_batched_tokens", "host_s")

# Async scheduling's published gain at batch 1 for a custom proposer, +10 % at 4B and +5.5 % at 9B, interpolated
# linearly in parameters to 8B (0.10 + 4/5 x (0.055 - 0.10) = 0.064): an interpolation, not a measurement.
H100_LLAMA3_8B_ASYNC_GAIN = 0.10 + (8 - 4) / (9 - 4) * (0.055 - 0.10)


@dataclasses.dataclass(frozen=True)
class CostModel:
    name: str
    step: StepCost
    per_step_overhead_s: float
    max_batched_tokens: int  # the scheduler's token budget per step (prefill is chunked to it)
    source: str
    per_prefill_token_s: float | None = None  # None: prefill tokens cost what any token does
    host_s: float = 0.0  # per step, paid by synchronous methods only (0: no async scheduling, a CPU's case)

    def run_by(self, synchronous: bool) -> "CostModel":
        """The step as a method runs it: synchronous ones pay the host term every step, async ones overlap it."""
        return dataclasses.replace(self, per_step_overhead_s=self.per_step_overhead_s + self.host_s * synchronous,
                                   host_s=0.0)

    def prefill_correction(self, num_prefill_rows: Any, num_prefill_tokens: Any) -> Any:
        """What pricing prefill at its own rate changes (a prefilling row's last token is a decode row's)."""
        if self.per_prefill_token_s is None:
            return 0.0
        return (self.per_prefill_token_s - self.step.per_token_s) * (num_prefill_tokens - num_prefill_rows)

    def seconds(self, num_seqs: int, num_tokens: int, num_kv_tokens: int, num_draft_kv_tokens: int = 0) -> float:
        return self.step.seconds(num_seqs, num_tokens, num_kv_tokens, num_draft_kv_tokens) + self.per_step_overhead_s

    def describe(self) -> str:
        terms = {**dataclasses.asdict(self.step), "per_step_overhead_s": self.per_step_overhead_s,
                 "per_prefill_token_s": self.per_prefill_token_s, "host_s (synchronous methods)": self.host_s or None}
        return f"{self.name}: " + ", ".join(f"{k} {v:.4g}" for k, v in terms.items() if v is not None) + f" ({self.source})"


def h100_llama3_8b() -> CostModel:
    """The fit; its host term: a synchronous step is (1 + g) x the async one, so the term is g x
    the batch-1 step at a 1k-token context (0.064 x 7.154 ms = 0.458 ms)."""
    fit = CostModel(H100_LLAMA3_8B, StepCost(fixed_s=5.886e-3, per_seq_s=0.0, per_token_s=2.101e-5,
                                             per_kv_token_s=3.926e-8),
                    per_step_overhead_s=1.207e-3, max_batched_tokens=H100_MAX_BATCHED_TOKENS,
                    source="SpecDecode-Bench simulator fit, Llama-3.1-8B on one H100 (arXiv 2601.11580)")
    return dataclasses.replace(fit, host_s=H100_LLAMA3_8B_ASYNC_GAIN * fit.seconds(1, 1, 1024))


def fit_prefill_token_seconds(samples: Sequence[PrefillSample]) -> float | None:
    """Seconds per prompt token of prefill: the slope of a least-squares line through the
    samples (its intercept takes the per-call overhead); None with fewer than two distinct
    token counts."""
    tokens = np.array([s.num_tokens for s in samples], dtype=np.float64)
    if np.unique(tokens).shape[0] < 2:
        return None
    secs = np.array([s.seconds for s in samples], dtype=np.float64)
    a = np.stack([np.ones_like(tokens), tokens / tokens.max()], axis=1)
    return float(nonnegative_lstsq(a, secs)[1] / tokens.max())


def from_samples(name: str, samples: list[StepSample], prefills: list[PrefillSample], source: str) -> CostModel:
    """The budget's fit of measured steps, prefill at the timed prefills' rate."""
    fitted = fit_step_cost(samples)
    if fitted is None:
        raise ConfigError(f"{name}: {len(samples)} step samples cannot be fitted ({source})")
    return CostModel(name, fitted, 0.0, CPU_MAX_BATCHED_TOKENS, source, fit_prefill_token_seconds(prefills))


def from_json(path: Path) -> CostModel:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cost model {path}: {exc}") from exc
    given = {f: data[f] for f in (*_JSON_FIELDS, *_OPTIONAL_JSON_FIELDS) if f in data}
    wrong = [f for f in _JSON_FIELDS if f not in given] + [f for f, v in given.items() if not isinstance(v, (int, float))]
    if wrong:
        raise ConfigError(f"cost model {path}: needs numbers for {', '.join(wrong)}")
    if min(given.values()) < 0:
        raise ConfigError(f"cost model {path}: coefficients must be >= 0")
    step = StepCost(given["fixed_s"], given.get("per_seq_s", 0.0), given["per_token_s"], given["per_kv_token_s"],
                    given.get("per_draft_kv_token_s", 0.0))
    return CostModel(path.stem, step, given["per_step_overhead_s"],
                     int(given.get("max_batched_tokens", GPU_MAX_BATCHED_TOKENS)), f"file {path.name}",
                     given.get("per_prefill_token_s"), given.get("host_s", 0.0))


def resolve(name_or_path: str, calibrated: CostModel | None = None, host_s: float | None = None) -> CostModel:
    """A preset or a JSON file; `calibrated`: this machine's fit (no host term: a CPU build runs no
    async scheduling); `host_s` replaces a GPU model's host term."""
    if name_or_path == CPU_CALIBRATED:
        if calibrated is None:
            raise ConfigError("cpu-calibrated: no calibration of this machine was given")
        return calibrated
    if host_s is not None and host_s < 0:
        raise ConfigError(f"the host term must be >= 0 seconds, not {host_s}")
    path = Path(name_or_path)
    if name_or_path == H100_LLAMA3_8B or path.suffix == ".json":
        cost = h100_llama3_8b() if name_or_path == H100_LLAMA3_8B else from_json(path)
        return cost if host_s is None else dataclasses.replace(cost, host_s=host_s)
    raise ConfigError(f"unknown cost model {name_or_path!r}: choose {', '.join(PRESETS)} or a .json file")


def cpu_calibrated(engine: EngineConfig, k_max: int) -> CostModel:
    """This machine's fit from a specdec engine's cached start-up calibration (measured if none)."""
    from specdec.engines import calibration, cpu_threads
    from specdec.models import resolve_model

    binding = cpu_threads.apply_cpu_threads(engine.reserved_cpus)
    path = calibration.calibration_path(engine, resolve_model(engine.model), k_max, binding)
    if not path.exists():
        from specdec.engines.vllm_engine import VllmEngine

        print(f"cpu-calibrated: no calibration of this machine yet; an engine starts to measure it ({path})", flush=True)
        VllmEngine(engine, SpecConfig(method="specdec", k_max=k_max)).close()
    samples, prefills = calibration.read_calibration(path)
    return from_samples(CPU_CALIBRATED, samples, prefills,
                        f"calibration {path.name}: {len(samples)} steps and {len(prefills)} prefills timed on this machine")


@dataclasses.dataclass(frozen=True)
class DraftCost:
    """What drafting adds to a step: measured CPU time, or per call, row and emitted token."""

    per_row_s: float = 0.0
    per_emitted_token_s: float = 0.0
    per_call_s: float = 0.0
    measured: bool = False
    source: str = "no drafter"

    def seconds(self, log: dict[str, np.ndarray]) -> np.ndarray:
        if self.measured:
            return log["draft_cpu_s"]
        return (self.per_call_s * (log["num_proposed"] > 0) + self.per_row_s * log["num_proposed"]
                + self.per_emitted_token_s * log["num_emitted"])


@dataclasses.dataclass(frozen=True)
class Priced:
    seconds: float  # end to end: prefill, decode and drafting
    decode_seconds: float  # decode forwards (their share of mixed steps) plus drafting
    draft_seconds: float
    num_steps: int
    mean_running: float  # requests running per step (vLLM's "Running: N reqs")
    mean_drafted_per_row_step: float  # draft tokens verified per decoding row per step
    num_decode_row_steps: int  # forwards of decoding rows (each request's prefill adds one more)


def price(log: dict[str, np.ndarray], cost: CostModel, draft: DraftCost) -> Priced:
    forward = cost.seconds(log["num_rows"], log["num_tokens"], log["num_kv_tokens"], log["num_draft_kv_tokens"])
    forward = forward + cost.prefill_correction(log["num_rows"] - log["num_decode_rows"],
                                                log["num_tokens"] - log["num_decode_tokens"])
    decoding = log["num_decode_rows"] > 0
    decode_forward = np.where(decoding, cost.seconds(log["num_decode_rows"], log["num_decode_tokens"],
                                                     log["num_decode_kv_tokens"], log["num_decode_draft_kv_tokens"]), 0.0)
    drafting = draft.seconds(log)
    decode_row_steps = float(log["num_decode_rows"].sum())
    return Priced(seconds=float(forward.sum() + drafting.sum()), decode_seconds=float(decode_forward.sum() + drafting.sum()),
                  draft_seconds=float(drafting.sum()), num_steps=int(forward.shape[0]),
                  mean_running=float(log["num_running"].mean()) if forward.shape[0] else 0.0,
                  mean_drafted_per_row_step=float(log["num_drafted"].sum()) / decode_row_steps if decode_row_steps else 0.0,
                  num_decode_row_steps=int(decode_row_steps))
