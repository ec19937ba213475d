"""Model-free speculative decoding for batch generation on vLLM.

The core library: no Prefect, no DuckDB. See DESIGN.md for the shape of the project.
"""

from specdec.config import SpecConfig, PolicyConfig, EngineConfig

__all__ = ["SpecConfig", "PolicyConfig", "EngineConfig"]
