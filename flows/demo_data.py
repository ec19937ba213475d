"""Sample prompt shards for the demo from the bundled datasets (HumanEval code prompts and
ShareGPT chat turns), written as Parquet into a local folder.

    python -m flows.demo_data --output out/demo/prompts [--per-shard 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from specdec.datasets import humaneval_rows, sharegpt_rows

SCHEMA = pa.schema([("id", pa.string()), ("prompt", pa.string()), ("messages", pa.string())])


def write_rows(rows: list[dict[str, str]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{"id": r["id"], "prompt": r["prompt"], "messages": r.get("messages")} for r in rows]
    pq.write_table(pa.Table.from_pylist(full, schema=SCHEMA), path)
    return path


def build_demo_shards(output: Path, per_shard: int = 8) -> list[Path]:
    code = humaneval_rows(limit=2 * per_shard)
    chat = sharegpt_rows(limit=per_shard, max_prompt_chars=400)
    return [
        write_rows(code[:per_shard], output / "humaneval-000.parquet"),
        write_rows(code[per_shard:], output / "humaneval-001.parquet"),
        write_rows(chat, output / "sharegpt-000.parquet"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--per-shard", type=int, default=8)
    args = parser.parse_args()
    for path in build_demo_shards(args.output, args.per_shard):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
