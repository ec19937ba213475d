"""Naive Python oracles of the compiled core (specdec_native): the equivalence tests
compare the core's drafts, confidences and budgets with theirs."""
