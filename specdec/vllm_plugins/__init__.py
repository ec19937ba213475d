"""vLLM general plugins shipped with specdec (entry point group `vllm.general_plugins`), each fix
and speedup with its opt-out (DISABLE_ENV in its module). vLLM calls the plugin in every process
it starts, before any model code runs: keep imports here light."""


def register() -> None:
    """The plugin (entry point `specdec`): every fix, the speedup and, in engine processes,
    the engine guard. Idempotent."""
    from specdec.vllm_plugins import engine_guard
    from specdec.vllm_plugins.fixes import expand_kernel, seeded_chunk, top_k_only
    from specdec.vllm_plugins.speedups import recovered_draws

    expand_kernel.register()
    top_k_only.register()
    seeded_chunk.register()
    recovered_draws.register()
    engine_guard.register()
