"""What the auto pair probes (lab.auto_timed_pair, lab.auto_rows_pair) share: their arguments, the
input cut into shards of one kind, and the parameters both runs start from."""

from __future__ import annotations

import argparse

from bench.datasets import load_rows
from specdec.generate import ShardRows
from specdec.params import GenerationParams


def pair_input(description: str, order_help: str) -> tuple[argparse.Namespace, list[ShardRows], GenerationParams]:
    """(arguments, shards, auto's parameters at batch 16 and 64 tokens) from the command line."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--input", required=True, help="a built-in prompt set or a Parquet file / folder")
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--shard-rows", type=int, default=8)
    p.add_argument("--order", default="auto,specdec", help=order_help)
    args = p.parse_args()
    r = args.shard_rows
    rows, _ = load_rows(args.input, args.shards * r)
    shards = [ShardRows(f"s-{i}", f"shard {i}", rows[i * r:(i + 1) * r], [], kind="k")
              for i in range(-(-len(rows) // r))]
    return args, shards, GenerationParams(method="auto", max_tokens=64, batch_size=16)
