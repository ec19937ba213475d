"""Rewrites of vLLM functions that give vLLM's result with less work on CPU, tied to the tested
vLLM release like the fixes (see specdec.vllm_plugins.fixes).

    recovered_draws.py  the rejection sampler's recovery noise, drawn only for rows that read it
"""
