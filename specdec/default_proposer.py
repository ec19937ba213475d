"""Which proposer a SpecConfig drafts with for specdec, and its start from the cache file
(the cross-request cache and the prompts' history): what both controllers and the replay
bench build their drafter from."""

from __future__ import annotations

import logging

from specdec.config import SpecConfig
from specdec.drafting import cache_file, ngram
from specdec.drafting.base import Proposer
from specdec.drafting.cache_file import CacheContents, CacheFileError
from specdec.drafting.hybrid import HybridProposer
from specdec.drafting.native import NativeHybridProposer
from specdec.drafting.ngram import NgramProposer
from specdec.drafting.suffix_cache import DEFAULT_MAX_DEPTH, SuffixTrieCache

# vLLM's "vllm" logger is the one with a handler in its worker processes, where this runs.
log = logging.getLogger("vllm.specdec.controller")


def default_proposer(config: SpecConfig, tokenizer: str | None = None) -> tuple[Proposer, str | None]:
    """specdec's proposer: own-text lookup, prompt groups, the live index and the
    cross-request cache (or lookup alone), compiled or the Python reference as
    `config.drafter` says, starting from `config.cache_file` (cache and history) when it is
    usable; and a warning when it was not (the cache then starts empty)."""
    if not config.cache or config.drafter == "python":
        ngram.warm_up()  # the Python own-text matcher: compile it now, not in the first (timed) step
    if not config.cache:
        return NgramProposer(config.lookup_min, config.lookup_max), None
    contents, warning = _load_cache(config, tokenizer)
    max_depth = contents.max_depth if contents else DEFAULT_MAX_DEPTH
    proposer: HybridProposer | NativeHybridProposer
    shared = {"group_max_tokens": config.group_max_tokens, "history_max_tokens": config.history_max_tokens,
              "history_per_prompt": config.history_per_prompt}
    if config.drafter == "python":
        cache = SuffixTrieCache(max_depth, config.cache_max_tokens)
        proposer = HybridProposer(cache, config.lookup_min, config.lookup_max, config.cache_min_prob, **shared)
    else:
        proposer = NativeHybridProposer(
            config.cache_max_tokens, max_depth, config.lookup_min, config.lookup_max, config.cache_min_prob, **shared
        )
    if contents:
        proposer.load_contents(contents)  # the cache's sequences and the prompts' history
    return proposer, warning


def _load_cache(config: SpecConfig, tokenizer: str | None) -> tuple[CacheContents | None, str | None]:
    """The saved cache's sequences, or none: a missing file is a first run; a damaged,
    foreign, header-less or other-tokenizer file is moved aside with a warning (never a
    failed run)."""
    if not config.cache_file:
        return None, None
    try:
        return cache_file.read_contents(config.cache_file, tokenizer), None
    except FileNotFoundError:
        return None, None
    except CacheFileError as exc:
        aside = cache_file.set_aside(config.cache_file)
        warning = f"draft cache file {exc}; moved to {aside}; starting with an empty cache"
        log.warning("specdec: %s", warning)
        return None, warning
