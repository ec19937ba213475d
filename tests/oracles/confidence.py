"""Learned per-token confidence of drafts, by where each drafted token came from.

Every drafted token is filed under an evidence bucket: own-text lookup by match length,
cache continuation by match length and the token's empirical probability, or the text of a
sibling (a request of the same prompt), of the prompt's history or of any running request
(the live index), each by match length. Bucket ids: own 0..7, cache 8..47, sibling 48..55,
history 56..63, live 64..71. After verification the tokens up to the first rejection count
as accepted in their buckets and the rejected one as rejected (tokens after it were never
judged). A bucket's acceptance rate, starting from a neutral prior, is
the confidence of the next token filed under it; the batch budget prices drafts with it.
"""

from __future__ import annotations

import numpy as np

OWN_BUCKETS = 8  # match lengths 1..8+ (index = min(length, 8) - 1)
CACHE_MATCH_LEVELS = 4  # cache match lengths 1, 2, 3, 4+
CACHE_PROB_LEVELS = 10  # empirical probability in tenths
CACHE_BUCKETS = CACHE_MATCH_LEVELS * CACHE_PROB_LEVELS
SHARED_BUCKETS = 8  # sibling, history and live: match lengths 1..8+ each
# Where each source's buckets start, and the source names in counter order.
SOURCES = ("own", "cache", "sibling", "history", "live")
SOURCE_BASE = {"own": 0, "cache": OWN_BUCKETS, "sibling": OWN_BUCKETS + CACHE_BUCKETS,
               "history": OWN_BUCKETS + CACHE_BUCKETS + SHARED_BUCKETS,
               "live": OWN_BUCKETS + CACHE_BUCKETS + 2 * SHARED_BUCKETS}
NUM_BUCKETS = OWN_BUCKETS + CACHE_BUCKETS + 3 * SHARED_BUCKETS  # 72
# [NUM_BUCKETS] each bucket's source, as an index into SOURCES
BUCKET_SOURCE = np.repeat(np.arange(len(SOURCES)), [OWN_BUCKETS, CACHE_BUCKETS] + [SHARED_BUCKETS] * 3)


def own_bucket(match_len: int) -> int:
    return min(max(match_len, 1), OWN_BUCKETS) - 1


def shared_bucket(source: str, match_len: int) -> int:
    """The bucket of a sibling, history or live token drafted after a `match_len` match."""
    return SOURCE_BASE[source] + min(max(match_len, 1), SHARED_BUCKETS) - 1


def cache_buckets(probs: np.ndarray, match_len: int) -> np.ndarray:
    level = min(max(match_len, 1), CACHE_MATCH_LEVELS) - 1
    tenths = np.minimum((np.asarray(probs) * CACHE_PROB_LEVELS).astype(np.int64), CACHE_PROB_LEVELS - 1)
    return OWN_BUCKETS + level * CACHE_PROB_LEVELS + tenths


class ConfidenceTable:
    """Acceptance counts per evidence bucket, shared by all requests of a run."""

    def __init__(self, prior_accepted: float = 1.0, prior_rejected: float = 1.0) -> None:
        self.accepted = np.full(NUM_BUCKETS, prior_accepted)
        self.rejected = np.full(NUM_BUCKETS, prior_rejected)

    def confidence(self, buckets: np.ndarray) -> np.ndarray:
        return self.accepted[buckets] / (self.accepted[buckets] + self.rejected[buckets])

    def best(self) -> float:
        """The highest confidence of any bucket."""
        return float(np.max(self.accepted / (self.accepted + self.rejected)))

    def expected_accepted(self, buckets: np.ndarray) -> float:
        """Expected accepted tokens of a draft filed under `buckets`: the sum over positions
        of the product of the confidences up to it, added up in order (the compiled core
        does the same operations in the same order, so both compare drafts identically)."""
        total = 0.0
        product = 1.0
        for value in self.confidence(buckets).tolist():
            product *= value
            total += product
        return total

    def observe(self, buckets: np.ndarray, num_accepted: int) -> None:
        """A draft filed under `buckets` had its first `num_accepted` tokens accepted."""
        np.add.at(self.accepted, buckets[:num_accepted], 1.0)
        if num_accepted < buckets.shape[0]:
            self.rejected[buckets[num_accepted]] += 1.0
