"""Rewrites of vLLM functions that give vLLM's result with less work on CPU (tied to the
tested vLLM release like the fixes)."""
