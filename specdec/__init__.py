"""Model-free speculative decoding for batch generation on vLLM: the core library (no
Prefect, no DuckDB). docs/internals.md describes the shape of the project."""

from specdec.config import EngineConfig, SpecConfig

__all__ = ["SpecConfig", "EngineConfig"]
