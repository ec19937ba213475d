"""Minimal arctic-inference: only `arctic_inference.suffix_decoding`, built from the 0.3.0
sdist by specdec's packaging/suffix_tree for vLLM's `suffix` speculative method."""
