"""The layering contract: the core package specdec/ never reaches the pipeline (flows/, tasks/)
nor its packages (prefect, duckdb), nor the bench (bench/), nor the prompt sets (prompt_sets/),
neither by an import statement nor through a module name in a string (importlib.import_module,
__import__, find_spec, pkgutil, or any dotted path). The pipeline, the bench and the prompt sets
join the core's CLI through the entry-point group `specdec.commands` instead. Above the core, each top-level package imports only the layers below
it (the import graph of tests/support/import_graph.py): tasks/ never imports flows/."""

from __future__ import annotations

import ast
import re

import pytest

from support import REPO
from support.import_graph import build

CORE = REPO / "specdec"
# Top-level package -> the product packages it may import: the core none, the prompt sets none
# (they read installed data files); the pipeline's tasks and I/O the core, the flows both and the
# prompt sets (the demo's shards); the bench builds on the core and the prompt sets; lab
# equipment on anything.
MAY_IMPORT = {
    "specdec": set(),
    "prompt_sets": set(),
    "tasks": {"specdec"},
    "flows": {"specdec", "tasks", "prompt_sets"},
    "bench": {"specdec", "prompt_sets"},
    "lab": {"specdec", "tasks", "flows", "bench", "prompt_sets"},
}
FORBIDDEN = ("flows", "tasks", "prefect", "duckdb", "bench", "prompt_sets")
# Calls that take a module name: a forbidden name anywhere in their arguments is a hit.
IMPORT_CALLS = {"import_module", "__import__", "find_spec", "find_loader", "resolve_name",
                "iter_modules", "walk_packages", "get_loader", "get_importer", "get_data"}
_NAME = "|".join(FORBIDDEN)
# A whole string that reads as a module path: "duckdb", "flows.commands", "tasks.db:connect",
# or the prefix of one built at run time ("flows." in f"flows.{name}").
MODULE_PATH = re.compile(rf"(?:{_NAME})(?:\.[A-Za-z_]\w*)*(?::[A-Za-z_][\w.]*)?\.?")
# Inside the arguments of an import call, a string that merely starts with a forbidden name.
MODULE_PREFIX = re.compile(rf"(?:{_NAME})(?:$|[.:])")


def _is_forbidden(module: str) -> bool:
    return module.partition(".")[0] in FORBIDDEN


def _is_import_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in IMPORT_CALLS
    if isinstance(func, ast.Attribute):
        owner = func.value
        return func.attr in IMPORT_CALLS or (isinstance(owner, ast.Name) and owner.id == "pkgutil")
    return False


def layering_violations(source: str, filename: str) -> list[str]:
    """'file:line: what' for every way `source` reaches a forbidden module."""
    tree = ast.parse(source, filename=filename)
    hits: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hits += [(node.lineno, f"import {a.name}") for a in node.names if _is_forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and _is_forbidden(node.module):
                hits.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Call) and _is_import_call(node):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for const in ast.walk(arg):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str) \
                            and MODULE_PREFIX.match(const.value.strip()):
                        hits.append((const.lineno, f"module name {const.value!r} passed to an import call"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and MODULE_PATH.fullmatch(node.value.strip()):
            hits.append((node.lineno, f"string {node.value!r} names a forbidden module"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(set(hits))]


def test_core_never_reaches_the_pipeline():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10, f"no core sources found under {CORE}"
    hits = [hit for path in files
            for hit in layering_violations(path.read_text(encoding="utf-8"), str(path.relative_to(CORE.parent)))]
    assert not hits, "specdec/ must not reach flows/, tasks/, bench/, prompt_sets/, prefect or duckdb:\n" + "\n".join(hits)


def test_each_top_level_package_imports_only_the_layers_below_it():
    graph = build()
    assert {m.split(".")[0] for m in graph.modules} <= set(MAY_IMPORT), "a new top-level package: give it a layer"
    hits = [f"{e.where}: {e.source} imports {e.target}" for e in graph.edges
            if e.target.split(".")[0] != e.source.split(".")[0]
            and e.target.split(".")[0] not in MAY_IMPORT[e.source.split(".")[0]]]
    assert not hits, "imports against the layering (" + ", ".join(
        f"{k} -> {sorted(v) or 'nothing'}" for k, v in MAY_IMPORT.items()) + "):\n" + "\n".join(hits)


BAD = '''\
import duckdb
import prefect.flows as pf
from tasks.db import connect
import importlib, pkgutil
mod = importlib.import_module("flows.commands")
other = __import__("prefect")
spec = importlib.util.find_spec(name="duckdb")
dyn = importlib.import_module("flows" + ".commands")
fmt = importlib.import_module(f"tasks.{name}")
found = pkgutil.resolve_name("tasks.db:connect")
TARGET = "flows.generation"
'''

GOOD = '''\
"""Docstrings may mention flows, tasks, prefect and duckdb in prose: prefect.flow is one."""
import importlib
from . import tasks
from specdec import flows_helper
from specdec.flows import x
mod = importlib.import_module("specdec.engines.vllm_engine")
msg = "install the pipeline: pip install 'specdec[pipeline]' for prefect and duckdb"
GROUP = "specdec.commands"
word = "tasksize"
'''


def test_checker_reports_each_bad_line_with_file_and_line():
    hits = layering_violations(BAD, "bad.py")
    lines = {int(hit.split(":")[1]) for hit in hits}
    assert lines == set(range(1, 12)) - {4}, "\n".join(hits)
    assert all(hit.startswith("bad.py:") for hit in hits)
    assert any("'flows.commands'" in hit for hit in hits)


def test_checker_accepts_clean_source():
    assert layering_violations(GOOD, "good.py") == []


@pytest.mark.parametrize("text", ["duckdb", "tasks", "prefect.client.orchestration", "flows.commands:main", "tasks."])
def test_module_like_strings_are_hits(text):
    assert layering_violations(f"X = {text!r}\n", "m.py") == [f"m.py:1: string {text!r} names a forbidden module"]
