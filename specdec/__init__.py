"""Model-free speculative decoding for batch generation on vLLM.

The core library: no Prefect, no DuckDB (the pipeline joins its CLI through the entry-point
group `specdec.commands`). docs/internals.md describes the shape of the project.
"""

from specdec.config import EngineConfig, SpecConfig

__all__ = ["SpecConfig", "EngineConfig"]
