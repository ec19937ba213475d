"""vLLM general plugins shipped with specdec (entry point group `vllm.general_plugins`).

vLLM calls them in every process it starts, before any model code runs. Keep imports here
light: vLLM imports this package in its engine and worker processes.
"""
