"""The fan-out's split: shards sized from their Parquet footers (rows x samples x max tokens)
and shared out by estimated work, not by count; its parameters are the parameter model's. The
groups on real workers: tests/pipeline/test_pipeline_fanout.py."""

from __future__ import annotations

import inspect
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from flows.fanout import speculative_generation_fanout, split_into_groups, total_engine_busy_s
from flows.params import SHARD_FLOW, FanoutParams, FlowParams
from specdec.engines import vllm_args
from support.shards import write_shard
from tasks.prompt_shards import ShardRef, with_footer_sizes


def refs_of(works: list[float]) -> list[ShardRef]:
    return [ShardRef(f"s{i:03d}.parquet", f"/p/s{i:03d}.parquet", work=w) for i, w in enumerate(works)]


def loads(groups: list[list[ShardRef]]) -> list[float]:
    return [sum(r.work or 0.0 for r in g) for g in groups]


@pytest.mark.parametrize("seed", range(20))
def test_groups_are_balanced_within_the_largest_shard_and_none_is_empty(seed):
    rng = random.Random(seed)
    works = [rng.choice([0.0, rng.uniform(1, 100), rng.uniform(100, 10_000)]) for _ in range(rng.randint(1, 60))]
    num_groups = rng.randint(1, 8)
    groups = split_into_groups(refs_of(works), num_groups)
    assert len(groups) == min(num_groups, len(works))
    assert all(groups)
    assert sorted(r.shard_id for g in groups for r in g) == [r.shard_id for r in refs_of(works)]  # each once
    assert max(loads(groups)) - min(loads(groups)) <= max(works) + 1e-9


def test_one_large_shard_gets_a_group_of_its_own():
    groups = split_into_groups(refs_of([100.0] + [10.0] * 10), 2)
    assert [[r.shard_id for r in g] for g in groups][0] == ["s000.parquet"]
    assert loads(groups) == [100.0, 100.0]


def test_shards_of_no_work_still_fill_every_group():
    groups = split_into_groups(refs_of([0.0, 0.0, 0.0, 5.0]) + [ShardRef("unsized", "/p/unsized")], 4)
    assert [len(g) for g in groups] == [1, 2, 1, 1]  # the one shard with work keeps its group alone


def test_the_same_shards_in_any_order_give_the_same_split():
    refs = refs_of([7.0, 3.0, 3.0, 9.0, 1.0, 3.0, 8.0])
    shuffled = refs[:]
    random.Random(1).shuffle(shuffled)
    assert split_into_groups(shuffled, 3) == split_into_groups(refs, 3)


def test_equal_shards_split_evenly_by_count():
    assert [len(g) for g in split_into_groups(refs_of([4.0] * 8), 2)] == [4, 4]


def test_footer_sizes_use_rows_and_each_rows_own_settings(tmp_path):
    write_shard(tmp_path / "plain.parquet", [{"id": str(i), "prompt": "p"} for i in range(6)])
    own = pa.table({"id": ["a", "b", "c", "d"], "prompt": ["p"] * 4,
                    "max_tokens": pa.array([10, 10, None, 30], pa.int64()),
                    "samples": pa.array([2.0, 2.0, None, 4.0])})  # pandas writes whole numbers as floats
    write_shard(tmp_path / "own.parquet", own)
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    refs = [ShardRef(name, str(tmp_path / name)) for name in ("plain.parquet", "own.parquet", "broken.parquet")]
    plain, mixed, broken = with_footer_sizes(refs, str(tmp_path), samples=3, max_tokens=100)
    assert (plain.num_rows, plain.work) == (6, 6 * 3 * 100)
    # one row group: max_tokens 3 rows in [10, 30] (midpoint 20) + 1 null (100) -> mean 40;
    # samples 3 rows in [2, 4] (midpoint 3) + 1 null (3) -> mean 3
    assert (mixed.num_rows, mixed.work) == (4, 4 * 3 * 40)
    assert (broken.num_rows, broken.work) == (None, 0.0)


def test_footer_sizes_read_each_row_group(tmp_path):
    table = pa.table({"id": [str(i) for i in range(4)], "prompt": ["p"] * 4, "max_tokens": pa.array([8, 8, 64, 64])})
    write_shard(tmp_path / "two.parquet", table.slice(0, 2))  # one row group, then two in one file
    pq.write_table(table, tmp_path / "groups.parquet", row_group_size=2)
    one, two = with_footer_sizes([ShardRef("two.parquet", "a"), ShardRef("groups.parquet", "b")],
                                 str(tmp_path), samples=1, max_tokens=1000)
    assert one.work == 2 * 8
    assert two.work == 2 * 8 + 2 * 64  # per group, not the file's min/max midpoint (36 x 4)


def test_run_busy_time_sums_every_group_or_is_unknown():
    assert total_engine_busy_s({"a": 1.5, "b": 2.0}, ["a", "b"]) == 3.5
    assert total_engine_busy_s({"a": 1.5, "b": None}, ["a", "b"]) is None
    assert total_engine_busy_s({"a": 1.5}, ["a", "b"]) is None  # a group that never reported
    assert total_engine_busy_s({}, []) is None


def test_fanout_parameters_are_the_model_fields_with_their_defaults():
    signature = inspect.signature(speculative_generation_fanout.fn)
    assert list(signature.parameters) == [n for n, f in FanoutParams.model_fields.items() if f.is_required()] + [
        n for n, f in FanoutParams.model_fields.items() if not f.is_required()]
    for name, param in signature.parameters.items():
        field = FanoutParams.model_fields[name]
        assert param.default == (inspect.Parameter.empty if field.is_required() else field.default), name
    assert set(FlowParams.model_fields) < set(signature.parameters)  # every run parameter, typed
    assert set(speculative_generation_fanout.parameters.properties) == set(FanoutParams.model_fields)


PREFECT_YAML = Path(__file__).resolve().parents[2] / "prefect.yaml"
# Each flow's parameter model; a shard-group deployment takes its parameters from the parent.
PARAMS_OF = {"flows/generation.py:speculative_generation": FlowParams,
             "flows/fanout.py:speculative_generation_fanout": FanoutParams}
GROUP_ENTRYPOINT = "flows/fanout.py:generate_shard_group"


def deployments() -> dict[str, dict]:
    return {d["name"]: d for d in yaml.safe_load(PREFECT_YAML.read_text())["deployments"]}


def parameters(deployment: dict, folder: Path) -> dict:
    """A deployment's parameters, a local source (relative to the host's checkout) at `folder`."""
    params = dict(deployment["parameters"])
    if not params["source"].startswith("s3://"):
        params["source"] = str(folder)
    return params


def test_every_deployment_validates_against_its_flows_parameter_model(monkeypatch, tmp_path):
    """Every deployment's parameters are its flow's model fields (unknown names fail); a GPU
    one's engine options are accepted by a GPU build (which refuses kv_cache_gib), a CPU
    one's by this CPU build; a fan-out's shard deployment is a shard-group deployment here."""
    found = deployments()
    on_gpu = {}
    for name, d in found.items():
        if d["entrypoint"] == GROUP_ENTRYPOINT:
            assert not d.get("parameters"), name  # the parent hands each group its run's parameters
            continue
        params = PARAMS_OF[d["entrypoint"]](**parameters(d, tmp_path))
        pool = d["work_pool"]["name"]
        if isinstance(params, FanoutParams):
            flow, _, shard_name = params.shard_deployment.partition("/")
            assert flow == SHARD_FLOW and found[shard_name]["entrypoint"] == GROUP_ENTRYPOINT, name
            pool = found[shard_name]["work_pool"]["name"]  # where its engines run
        on_gpu[name] = (pool.startswith("gpu"), params.run_params() if isinstance(params, FanoutParams) else params)
    for name, (gpu, params) in on_gpu.items():
        if not gpu:
            vllm_args.check_platform(params.engine_config(0))
    monkeypatch.setattr(vllm_args, "is_cpu_build", lambda: False)
    for name, (gpu, params) in on_gpu.items():
        if gpu:
            vllm_args.check_platform(params.engine_config(0))
    assert {n for n, (gpu, _) in on_gpu.items() if gpu} >= {"gpu", "fanout", "gpu-70b-tp4", "fanout-8x", "gpu-awq",
                                                             "gpu-draft"}


def test_the_gpu_host_deployments_set_what_the_docs_say(tmp_path):
    found = deployments()
    tp4 = FlowParams(**parameters(found["gpu-70b-tp4"], tmp_path))
    assert (tp4.tensor_parallel_size, tp4.gpu_memory_utilization, tp4.dtype, tp4.enforce_eager) == (4, 0.9, "auto", False)
    assert not tp4.model.startswith((".", "/")) and tp4.model.count("/") == 1  # a hub id
    fanout = FanoutParams(**found["fanout-8x"]["parameters"])
    assert fanout.num_groups % 8 == 0 and fanout.shard_deployment == f"{SHARD_FLOW}/gpu-8x-shards"
    shards = found["gpu-8x-shards"]
    assert shards["work_pool"]["name"] == "gpu-8x"
    # each worker's own CUDA_VISIBLE_DEVICES reaches its flow runs: the deployment sets none
    assert "CUDA_VISIBLE_DEVICES" not in str(shards["work_pool"].get("job_variables", {}))
    assert FlowParams(**parameters(found["gpu-awq"], tmp_path)).quantization == "awq"
    draft = FlowParams(**parameters(found["gpu-draft"], tmp_path))
    assert (draft.method, draft.k_max) == ("draft", 4) and draft.draft_model


def test_the_fanout_deployment_sets_model_fields_and_the_children_get_the_runs_own():
    deployed = deployments()["fanout"]["parameters"]
    params = FanoutParams(**deployed)  # unknown names fail (extra="forbid")
    assert (params.num_groups, params.max_tokens, params.dtype) == (8, 512, "auto")
    run = params.run_params()
    assert type(run) is FlowParams and run.max_tokens == 512
    assert "num_groups" not in run.shareable()  # what the groups take: FlowParams(**shareable)
    assert FanoutParams(**{**deployed, "num_groups": 3}).run_params().run_id() == run.run_id()
    with pytest.raises(ValueError, match="options"):
        FanoutParams(**deployed, options={"max_tokens": 4})


def test_the_worker_name_shows_the_devices_a_worker_was_pinned_to(monkeypatch):
    """shards.worker: which worker, and on a GPU host which GPU(s), generated each shard."""
    from flows.shard_run import worker_name

    pid = os.getpid()
    monkeypatch.setenv("SPECDEC_WORKER_NAME", "host-a")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker_name() == f"host-a:{pid}"
    for devices, shown in (("3", "[cuda 3]"), ("4,5,6,7", "[cuda 4,5,6,7]"), ("", "[cuda none]")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", devices)
        assert worker_name() == f"host-a:{pid} {shown}"
