"""No import cycles in the product (specdec, flows, tasks, bench, prompt_sets, and lab/ where present):
the graph is read from the source by tests/support/import_graph.py, which also prints it
(`python -m tests.support.import_graph`)."""

from __future__ import annotations

from pathlib import Path

from support.import_graph import build


def test_the_product_has_no_import_cycles():
    graph = build()
    assert {m.split(".")[0] for m in graph.modules} >= {"specdec", "flows", "tasks"}, sorted(graph.modules)
    cycles = graph.cycles()
    assert not cycles, f"{len(cycles)} import cycle(s); break each (move the shared part down a layer):\n" + \
        "\n".join(graph.describe_cycle(c) for c in cycles)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SAMPLE = {
    "pkg/__init__.py": "from pkg.a import run\n",
    "pkg/a.py": "def run():\n    from . import b  # inside a function: counts\n    return b\n",
    "pkg/b.py": "from .sub import c\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/c.py": ("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from pkg import a  # for annotations only: still an edge\n"
                     "else:\n    import json\n"
                     "from ..d import x\n"),
    "pkg/d.py": "import importlib\nx = importlib.import_module('pkg.sub.c')\nimport numpy\n",
    "other/__init__.py": "",
    "other/e.py": "import pkg.sub.c\nfrom pkg import d\nfrom pkg.d import x\n",
}


def test_imports_are_resolved_to_modules(tmp_path):
    graph = build(write(tmp_path, SAMPLE), ("pkg", "other", "missing"))
    assert graph.modules == {"pkg", "pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.d", "other", "other.e"}
    assert graph.targets("pkg") == ["pkg.a"]
    assert graph.targets("pkg.a") == ["pkg.b"]
    assert graph.targets("pkg.b") == ["pkg.sub.c"]
    assert graph.targets("pkg.sub.c") == ["pkg.a", "pkg.d"]  # pkg.a: for type checkers, still counted
    assert graph.targets("pkg.d") == ["pkg.sub.c"]  # import_module with a literal name counts
    assert graph.targets("other.e") == ["pkg.d", "pkg.sub.c"]
    assert graph.edge("pkg.b", "pkg.sub.c").where == "pkg/b.py:1"
    assert ("other", "pkg.sub") in graph.package_edges() and ("pkg", "pkg.sub") in graph.package_edges()


def test_each_cycle_is_reported_once_with_where_it_is_made(tmp_path):
    graph = build(write(tmp_path, SAMPLE), ("pkg", "other"))
    assert graph.cycles() == [["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"], ["pkg.d", "pkg.sub.c", "pkg.d"]]
    assert graph.describe_cycle(graph.cycles()[1]) == \
        "pkg.d -> pkg.sub.c (pkg/d.py:2) -> pkg.d (pkg/sub/c.py:6)"


def test_a_cycle_kept_for_type_checkers_only_is_a_cycle(tmp_path):
    # two modules that need each other, one of them only in annotations: a loop all the same
    files = {"p/__init__.py": "", "p/loop.py": "from p.helpers import Finisher\n",
             "p/helpers.py": ("from __future__ import annotations\nimport typing\n"
                              "if typing.TYPE_CHECKING:\n    from p.loop import Outcome\n")}
    graph = build(write(tmp_path, files), ("p",))
    assert [graph.describe_cycle(c) for c in graph.cycles()] == \
        ["p.helpers -> p.loop (p/helpers.py:4) -> p.helpers (p/loop.py:1)"]


def test_a_longer_cycle_and_a_separate_one(tmp_path):
    files = {"p/__init__.py": "", "p/x.py": "import p.y\n", "p/y.py": "import p.z\n",
             "p/z.py": "from p import x\n", "p/u.py": "import p.v\n", "p/v.py": "import p.u\nimport p.x\n"}
    graph = build(write(tmp_path, files), ("p",))
    assert graph.cycles() == [["p.u", "p.v", "p.u"], ["p.x", "p.y", "p.z", "p.x"]]


def test_an_acyclic_graph_has_no_cycles(tmp_path):
    files = {"p/__init__.py": "", "p/x.py": "import p.y\n", "p/y.py": "def f():\n    import p.z\n", "p/z.py": ""}
    assert build(write(tmp_path, files), ("p",)).cycles() == []
