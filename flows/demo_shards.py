"""The demo's prompt shards: code-editing prompts built from HumanEval's solutions (answers
that restate most of the prompt: where speculation pays) and ShareGPT chat turns (little to
draft from), one folder per kind."""

from __future__ import annotations

import ast
from pathlib import Path

from prompt_sets.humaneval import humaneval_items
from prompt_sets.shards import write_shard
from prompt_sets.sharegpt import sharegpt_rows

# Edits whose answer restates most of the prompt: where drafting from the prompt pays.
CODE_EDITS = ("type-hints", "rename", "docstrings")


def code_edit_rows(limit: int | None = None, max_code_chars: int = 700, every_edit: bool = False) -> list[dict[str, str]]:
    """Code-editing prompts built from HumanEval's solutions (prompt + canonical solution),
    the edits taking turns (`every_edit`: each edit of each solution): add type hints, rename
    the first parameter, add docstrings (to the code with its docstring taken out). Solutions
    longer than `max_code_chars` are skipped, so that an answer fits a short max_tokens."""
    rows: list[dict[str, str]] = []
    for item in humaneval_items():
        code = (item["prompt"] + item["canonical_solution"]).strip("\n")
        function = _function(code, item["entry_point"])
        if len(code) > max_code_chars or function is None or not function.args.args:
            continue
        for edit in CODE_EDITS if every_edit else (CODE_EDITS[len(rows) % len(CODE_EDITS)],):
            rows.append({"id": f"code-edit/{item['task_id']}/{edit}", "prompt": _edit_prompt(code, function, edit)})
        if limit is not None and len(rows) >= limit:
            return rows[:limit]
    return rows


def _edit_prompt(code: str, function: ast.FunctionDef, edit: str) -> str:
    if edit == "type-hints":
        ask = "Add type hints to every variable in this code"
    elif edit == "rename":
        old = function.args.args[0].arg
        ask = f"Rename the variable `{old}` to `{old}_in` everywhere in this code"
    else:
        code = _without_docstring(code, function)
        ask = "Add a docstring to this function, keeping the code otherwise unchanged"
    return f"{ask}. Reply with the whole edited code in one Python block.\n\n```python\n{code}\n```"


def _function(code: str, name: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _without_docstring(code: str, function: ast.FunctionDef) -> str:
    first = function.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str) and first.end_lineno is not None and len(function.body) > 1):
        return code
    lines = code.splitlines()
    return "\n".join(lines[: first.lineno - 1] + lines[first.end_lineno:])


# The demo's shard kinds, one folder each under the demo's prompts: one run per kind and method.
DEMO_KINDS = ("code-edit", "chat")


def demo_shards(output: str | Path, per_shard: int = 16, shards_per_kind: int = 2) -> list[Path]:
    """The demo's shards, `shards_per_kind` of each kind: code-editing prompts (answers restate
    most of the prompt: where speculation pays) under `code-edit/`, and ShareGPT chat turns
    (little to draft from) under `chat/`."""
    output = Path(output)
    rows = {"code-edit": code_edit_rows(limit=shards_per_kind * per_shard),
            "chat": sharegpt_rows(limit=shards_per_kind * per_shard, max_prompt_chars=400)}
    return [write_shard(rows[kind][i * per_shard:(i + 1) * per_shard], output / kind / f"{kind}-{i:03d}.parquet")
            for kind in DEMO_KINDS for i in range(shards_per_kind)]
