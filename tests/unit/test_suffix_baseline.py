"""The suffix-decoding baseline proposer (arctic-inference's cache driven as vLLM's `suffix`
method drives it): unit behaviour, step-for-step agreement with vLLM's own
`SuffixDecodingProposer` on a simulated batch; arctic's own vLLM plugin stays off. Replay ==
real engine: tests/engine/test_suffix_engine.py."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

try:
    import arctic_inference.suffix_decoding  # noqa: F401
except ImportError as exc:  # built at set-up by scripts/install.sh (packaging/suffix_tree)
    pytest.skip(
        f"arctic_inference.suffix_decoding is not installed ({exc}); run scripts/install.sh VENV (it builds packaging/suffix_tree)",
        allow_module_level=True,
    )

from bench import drafters
from bench.drafters import ArcticSuffixProposer

K = 4


def arr(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.int64)


def test_defaults_are_vllms():
    from vllm.config import SpeculativeConfig

    defaults = {f.name: f.default for f in dataclasses.fields(SpeculativeConfig)}
    assert defaults["suffix_decoding_max_tree_depth"] == drafters.VLLM_MAX_TREE_DEPTH
    assert defaults["suffix_decoding_max_cached_requests"] == drafters.VLLM_MAX_CACHED_REQUESTS
    assert defaults["suffix_decoding_max_spec_factor"] == drafters.VLLM_MAX_SPEC_FACTOR
    assert defaults["suffix_decoding_min_token_prob"] == drafters.VLLM_MIN_TOKEN_PROB


def test_drafts_from_own_prompt_and_respects_k():
    p = ArcticSuffixProposer()
    prompt = [5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3]
    # context ends with 5 6 7 -> the prompt continues 8 9 10 11 12 ...; the spec factor
    # (1.0 x match length 3) caps the draft at 3 tokens
    p.propose("a", arr(*prompt, 5), K)  # first sight: prompt + one output token
    draft = p.propose("a", arr(*prompt, 5, 6, 7), K)
    assert draft.tolist() == [8, 9, 10]
    assert p.propose("a", arr(*prompt, 5, 6, 7), 2).tolist() == [8, 9]
    assert p.propose("a", arr(*prompt, 5, 6, 7, 8, 9, 10, 11), K).tolist() == [12, 1, 2, 3]
    assert draft.dtype == np.int64


def test_no_match_drafts_nothing():
    p = ArcticSuffixProposer()
    assert p.propose("a", arr(1, 2, 3, 4, 5), K).shape == (0,)


def test_finished_responses_serve_later_requests_but_prompts_do_not():
    p = ArcticSuffixProposer()
    # request a: its prompt holds 40 41 42 43 44, its response 20 21 22 23 24 25
    prompt_a = [40, 41, 42, 43, 44, 9]
    seq = prompt_a + [20]
    p.propose("a", arr(*seq), K)
    for tok in [21, 22, 23, 24, 25]:
        seq.append(tok)
        p.propose("a", arr(*seq), K)
    p.forget("a")
    assert "a" not in p.cache.active_requests and "a" in p.cache.cached_requests
    # request b, unrelated prompt: a's response is drafted from the global tree...
    prompt_b = [70, 71, 72]
    p.propose("b", arr(*prompt_b, 20), K)
    assert p.propose("b", arr(*prompt_b, 20, 21, 22), K).tolist() == [23, 24, 25]
    # ...but a's prompt is not (only responses enter the global tree)
    p.forget("b")
    p.propose("c", arr(80, 81, 40), K)
    assert p.propose("c", arr(80, 81, 40, 41, 42), K).shape == (0,)


def _finish(p: ArcticSuffixProposer, req_id: str, prompt: list[int], response: list[int]) -> None:
    for n in range(1, len(response) + 1):
        p.propose(req_id, arr(*prompt, *response[:n]), K)
    p.forget(req_id)


@pytest.mark.parametrize("second_id", ["a", "b"])
def test_reused_request_id_evicts_its_old_response(second_id):
    p = ArcticSuffixProposer()
    _finish(p, "a", [1, 2, 3], [50, 51, 52, 53])
    p.forget("a")  # idempotent
    p.propose(second_id, arr(60, 61, 50), K)
    draft = p.propose(second_id, arr(60, 61, 50, 51), K).tolist()
    # as in vLLM: a new request under a cached id first evicts that id's cached response
    assert draft == ([] if second_id == "a" else [52, 53])
    assert sorted(p.cache.cached_requests) == sorted({"a", second_id})


def test_max_model_len_caps_the_draft():
    p = ArcticSuffixProposer(max_model_len=12)
    prompt = [1, 2, 3, 4, 5, 6, 1, 2, 3]
    p.propose("a", arr(*prompt, 4), K)  # 10 tokens: room for 12 - 10 - 1 = 1 draft token
    assert p.propose("a", arr(*prompt, 4), K).tolist() == [5]
    assert p.propose("a", arr(*prompt, 4, 5, 6), K).shape == (0,)  # at max_model_len


# --- agreement with vLLM's own proposer on a simulated batch ------------------------------


class _FakeBatch:
    """The parts of vLLM's InputBatch that SuffixDecodingProposer reads."""

    def __init__(self, seqs: dict[str, list[int]], prompt_lens: dict[str, int], width: int) -> None:
        self.req_ids = list(seqs)
        self.req_id_to_index = {r: i for i, r in enumerate(self.req_ids)}
        self.num_tokens_no_spec = np.array([len(seqs[r]) for r in self.req_ids], dtype=np.int32)
        self.num_prompt_tokens = np.array([prompt_lens[r] for r in self.req_ids], dtype=np.int32)
        self.token_ids_cpu = np.zeros((len(self.req_ids), width), dtype=np.int32)
        for i, r in enumerate(self.req_ids):
            self.token_ids_cpu[i, : len(seqs[r])] = seqs[r]


def _vllm_proposer(k: int, max_model_len: int):
    from vllm.config import SpeculativeConfig
    from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer

    defaults = {f.name: f.default for f in dataclasses.fields(SpeculativeConfig) if f.name.startswith("suffix_")}
    spec = types.SimpleNamespace(num_speculative_tokens=k, **defaults)
    model = types.SimpleNamespace(max_model_len=max_model_len)
    config = types.SimpleNamespace(speculative_config=spec, model_config=model)
    return SuffixDecodingProposer(config)


def test_matches_vllm_suffix_proposer_step_for_step():
    """Random requests entering and leaving a batch of 4 (continuous batching), the target
    model replaced by a repetitive random source: vLLM's proposer over the batch and ours
    per request must draft the same tokens every step."""
    rng = np.random.default_rng(0)
    max_model_len, width = 400, 400
    ours, theirs = ArcticSuffixProposer(max_model_len=max_model_len), _vllm_proposer(K, max_model_len)
    phrases = [rng.integers(0, 30, size=rng.integers(3, 9)).tolist() for _ in range(6)]

    def text(n: int) -> list[int]:  # phrases glued together: plenty of repeats to draft from
        out: list[int] = []
        while len(out) < n:
            out += phrases[rng.integers(len(phrases))] if rng.random() < 0.8 else [int(rng.integers(30))]
        return out[:n]

    waiting = [(f"r{i}", text(int(rng.integers(5, 40))), text(int(rng.integers(10, 60)))) for i in range(24)]
    live: dict[str, dict] = {}
    num_drafted = num_steps = 0
    while waiting or live:
        while waiting and len(live) < 4:  # admit: the prefill emits the first output token
            rid, prompt, target = waiting.pop(0)
            live[rid] = {"seq": prompt + target[:1], "prompt_len": len(prompt), "target": target, "out": 1}
            live[rid]["new"] = target[:1]
        seqs = {r: s["seq"] for r, s in live.items()}
        batch = _FakeBatch(seqs, {r: s["prompt_len"] for r, s in live.items()}, width)
        expected = theirs.propose(K, batch, [s["new"] for s in live.values()])
        for (rid, s), want in zip(list(live.items()), expected, strict=True):
            got = ours.propose(rid, np.array(s["seq"], dtype=np.int64), K)
            assert got.tolist() == list(want), (rid, len(s["seq"]))
            num_drafted += bool(want)
            num_steps += 1
            # verify greedily against the target text, emit one more token
            rest = s["target"][s["out"] :]
            n = 0
            while n < min(len(want), len(rest)) and want[n] == rest[n]:
                n += 1
            s["new"] = rest[: n + 1]
            s["seq"] = s["seq"] + s["new"]
            s["out"] += len(s["new"])
            if s["out"] >= len(s["target"]):
                del live[rid]
                ours.forget(rid)
    assert num_drafted > num_steps // 4  # the comparison covered plenty of real drafts
    assert set(ours.cache.cached_requests) == set(theirs.suffix_cache.cached_requests)


def test_arctic_vllm_plugin_is_not_registered():
    """Arctic's own vLLM plugin patches vLLM internals for other vLLM builds: it must stay off."""
    from importlib.metadata import entry_points

    plugins = [ep.value for ep in entry_points(group="vllm.general_plugins")]
    assert not [v for v in plugins if v.startswith("arctic_inference")], plugins
