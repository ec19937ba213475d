"""vLLM general plugins shipped with specdec (entry point group `vllm.general_plugins`): fixes/
(correctness), speedups/ (less work on CPU), engine_guard (process hygiene). vLLM calls the
plugin in every process it starts, before any model code runs: keep imports here light.
Each fix and speedup has its own opt-out variable (DISABLE_ENV in its module).
"""


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
