"""specdec's compiled drafting core; use it through specdec.controller."""

from specdec_native._core import Controller, Drafter, MultiIndex, SuffixCache, prompt_digest

# Bumped whenever the core's behaviour changes: specdec checks it matches what it expects.
ABI_VERSION = 6

__all__ = ["ABI_VERSION", "Controller", "Drafter", "MultiIndex", "SuffixCache", "prompt_digest"]
