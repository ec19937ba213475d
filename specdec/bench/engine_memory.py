"""How many of the real-engine bench's engines can stay alive at once.

Each engine holds its weights, its KV cache (allocated whole at start-up: `kv_cache_gib`)
and the runtime of its processes. Where all of them fit in the memory available, the bench
keeps one engine per method alive for all rounds; where not, it says so and runs one engine
at a time, restarted every round (still interleaved, only slower to run).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

# vLLM's processes, torch and the tokenizer beside the weights and the KV cache (measured
# resident memory of a SmolLM2-135M engine on CPU is about this much; an estimate).
RUNTIME_GIB = 1.5
USABLE_SHARE = 0.8  # of the memory available now: leave room for the machine's other work


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    kv_need_gib: float  # the largest batch's tokens, prompt and output, in KV bytes
    kv_cache_gib: float  # what every engine allocates
    per_engine_gib: float
    available_gib: float
    num_engines: int

    @property
    def all_alive(self) -> bool:
        return self.engines_alive == self.num_engines

    @property
    def engines_alive(self) -> int:
        fits = int(self.available_gib * USABLE_SHARE // self.per_engine_gib)
        return max(1, min(self.num_engines, fits))

    def describe(self) -> str:
        lines = [f"memory: each engine needs about {self.per_engine_gib:.1f} GiB (KV cache {self.kv_cache_gib:g} GiB, "
                 f"the largest batch needs {self.kv_need_gib:.2f} GiB of it); {self.available_gib:.1f} GiB available"]
        if self.kv_need_gib > self.kv_cache_gib:
            lines.append(f"note: the largest batch needs more KV than --kv-cache-gib {self.kv_cache_gib:g}: vLLM "
                         "will run fewer requests at once than asked (raise --kv-cache-gib)")
        if self.all_alive:
            lines.append(f"memory: all {self.num_engines} engines stay alive through the rounds")
        else:
            lines.append(f"memory: {self.num_engines} engines do not fit at once: one engine at a time, "
                         "restarted every round (still interleaved)")
        return "\n".join(lines)


def plan(num_engines: int, max_batch: int, tokens_per_request: int, kv_bytes_per_token: int,
         kv_cache_gib: float, weights_gib: float, available_gib: float) -> MemoryPlan:
    """`tokens_per_request`: the longest prompt plus max_tokens."""
    kv_need = max_batch * tokens_per_request * kv_bytes_per_token / 2**30
    per_engine = weights_gib + kv_cache_gib + RUNTIME_GIB
    return MemoryPlan(kv_need, kv_cache_gib, per_engine, available_gib, num_engines)


def weights_gib(model_folder: Path) -> float:
    files = [p for pattern in ("*.safetensors", "*.bin", "*.pt") for p in model_folder.glob(pattern)]
    return sum(p.stat().st_size for p in files) / 2**30


def available_gib() -> float:
    """MemAvailable (Linux); elsewhere, as if there were room for one engine only."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0
