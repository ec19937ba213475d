"""Draft proposers: pure numpy, no model."""

from specdec.drafting.base import Proposer
from specdec.drafting.ngram import NgramProposer, propose_ngram

__all__ = ["Proposer", "NgramProposer", "propose_ngram"]
