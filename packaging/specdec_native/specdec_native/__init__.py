"""specdec's compiled drafting core; use it through specdec.controller."""

from specdec_native._core import DRAFT_SOURCES, Controller, Drafter, MultiIndex, SuffixCache, prompt_digest

# Bumped whenever the core's behaviour changes: specdec checks it matches what it expects.
ABI_VERSION = 7

__all__ = ["ABI_VERSION", "DRAFT_SOURCES", "Controller", "Drafter", "MultiIndex", "SuffixCache", "prompt_digest"]
