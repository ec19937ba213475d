"""`python -m lab.propose_speed`: every method at every point, one record per point (behaviour only:
the numbers themselves are not judged); rows sharing prompts."""

import json

import numpy as np

from lab.propose_speed import parser, run, share_prompts


def test_bench_propose_writes_one_record_per_method_and_point(tmp_path, monkeypatch):
    out = tmp_path / "propose.json"
    methods = "specdec-worker,suffix-arctic"
    argv = ["--batch-sizes", "1,3", "--contexts", "256", "--cache-tokens", "0,4096",
            "--methods", methods, "--steps", "2", "--min-request-steps", "2", "--repeats", "2", "--rows-per-prompt", "2",
            "--json", str(out)]
    assert run(parser().parse_args(argv)) == 0
    records = json.loads(out.read_text())
    points = [r for r in records if r["kind"] == "propose"]
    assert {(r["method"], r["batch_size"], r["cache_tokens"]) for r in points} == {
        (m, b, c) for m in methods.split(",") for b in (1, 3) for c in (0, 4096)
    }
    for r in points:
        assert r["context"] == 256 and r["us_per_request_step"] > 0 and r["spread"] >= 0 and r["clock"] == "cpu"
    assert len(points) == len(records)


def test_rows_share_prompts_in_groups_and_write_similar_outputs():
    rng = np.random.default_rng(0)
    token_ids = rng.integers(0, 1000, size=(5, 400)).astype(np.int32)
    shared = share_prompts(token_ids, 300, 2)
    assert (shared[:, :300] == token_ids[[0, 0, 2, 2, 4], :300]).all()  # groups of 2, the last alone
    assert (shared[[0, 2, 4]] == token_ids[[0, 2, 4]]).all()
    same = (shared[1, 300:] == shared[0, 300:]).mean()
    assert 0.8 < same < 1.0  # a sibling's output: the first row's with a few tokens changed
    assert (share_prompts(token_ids, 300, 1) == token_ids).all()
