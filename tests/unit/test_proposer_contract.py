"""The proposer against vLLM 0.32's V1 GPU model runner's contract for `custom_class`
drafters, with a stand-in runner (no GPU): vLLM's own loader builds it from the config,
`load_model` is called only where present, `propose` gets the step's sampled tokens as a
list, the token buffers as CPU arrays and the slot mappings as device tensors it must not
read, and hands back one list per row of at most K tokens (vllm/v1/worker/gpu_model_runner.py,
vllm/v1/spec_decode/custom_class_proposer.py). And: only the rank whose drafts vLLM uses
drafts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from specdec.config import SpecConfig
from specdec.engines import vllm_proposer

K = 4
ROWS = 4
REPEATING = [5, 6, 7, 8, 9, 10, 11, 12] * 8


class StandInRunner:
    """What vLLM's V1 GPU runner does with a custom_class drafter, minus the GPU."""

    def __init__(self) -> None:
        from vllm.v1.spec_decode.custom_class_proposer import create_custom_proposer

        config = SimpleNamespace(speculative_config=SimpleNamespace(model=vllm_proposer.CLASS_PATH,
                                                                    num_speculative_tokens=K),
                                 scheduler_config=SimpleNamespace(max_num_seqs=ROWS))
        self.drafter = create_custom_proposer(config)
        if hasattr(self.drafter, "load_model"):  # the runner's own guard
            self.drafter.load_model(SimpleNamespace(name="target"))
        self.input_batch = SimpleNamespace(req_ids=["a", "b"], num_prompt_tokens=np.array([16, 4, 0, 0]))
        self.token_ids_cpu = np.zeros((ROWS, 128), dtype=np.int32)  # [max_num_reqs, max_model_len]
        self.token_ids_cpu[0, : len(REPEATING)] = REPEATING
        self.num_tokens_no_spec = np.array([24, 4, 0, 0], dtype=np.int32)  # [max_num_reqs]

    def propose(self, sampled_token_ids: list[list[int]]):
        # device tensors in the real runner: "meta" tensors raise if anything reads their data
        slot_mappings = {"layer.0": torch.empty(8, dtype=torch.int64, device="meta")}
        assert isinstance(sampled_token_ids, list)  # the runner's assert for custom_class
        return self.drafter.propose(sampled_token_ids, self.num_tokens_no_spec, self.token_ids_cpu,
                                    slot_mappings=slot_mappings)


def test_the_runner_builds_binds_and_steps_the_proposer():
    runner = StandInRunner()
    worker = SimpleNamespace(model_runner=runner)
    assert vllm_proposer.bind_proposer(worker, SpecConfig(method="specdec", k_max=K, budget=False).to_dict()) == ""
    # row a decodes (its last sampled token), row b is still in prefill (nothing sampled)
    drafts = runner.propose([[int(runner.token_ids_cpu[0, 23])], []])
    assert isinstance(drafts, list) and len(drafts) == 2
    assert all(isinstance(d, list) and len(d) <= K for d in drafts)
    assert drafts[0] == REPEATING[24:24 + K] and drafts[1] == []


def test_before_binding_and_with_drafting_off_it_proposes_nothing():
    runner = StandInRunner()
    assert runner.propose([[1], [2]]) == [[], []]
    worker = SimpleNamespace(model_runner=runner)
    vllm_proposer.bind_proposer(worker, SpecConfig(method="specdec", k_max=K, budget=False).to_dict())
    vllm_proposer.set_drafting(worker, False)
    assert runner.propose([[int(runner.token_ids_cpu[0, 23])], []]) == [[], []]


def test_only_the_rank_whose_drafts_vllm_uses_holds_a_drafter(monkeypatch):
    monkeypatch.setattr(vllm_proposer, "_drafts_used_here", lambda: False)
    runner = StandInRunner()
    worker = SimpleNamespace(model_runner=runner)
    assert vllm_proposer.bind_proposer(worker, SpecConfig(method="specdec", k_max=K, budget=False).to_dict()) is None
    assert vllm_proposer.take_source_counts(worker, ["a"]) is None
    assert runner.propose([[int(runner.token_ids_cpu[0, 23])], []]) == [[], []]  # never bound: no drafts


@pytest.mark.parametrize("tp_rank, last_stage, uses", [(0, True, True), (1, True, False), (0, False, False)])
def test_the_drafting_rank_is_the_first_tensor_rank_of_the_last_stage(monkeypatch, tp_rank, last_stage, uses):
    from vllm.distributed import parallel_state

    monkeypatch.setattr(parallel_state, "get_tp_group", lambda: SimpleNamespace(rank_in_group=tp_rank))
    monkeypatch.setattr(parallel_state, "get_pp_group", lambda: SimpleNamespace(is_last_rank=last_stage))
    assert vllm_proposer._drafts_used_here() is uses
