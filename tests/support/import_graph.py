"""The product's import graph, read from the source (ast): every `import` and `from ... import`
of one product module by another, wherever it stands (inside functions and under
`if TYPE_CHECKING:` too: a cycle kept for type checkers is still two modules that need each
other); relative imports resolved; `importlib.import_module("literal")` counted.
Nodes are modules; `from pkg import name` points at `pkg.name` where that is a module.

    python -m tests.support.import_graph        (from the repository root)

prints the edges between packages, then between modules, then every cycle.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The product's top-level packages; bench/ and lab/ count where those folders exist.
PRODUCT_PACKAGES = ("specdec", "flows", "tasks", "bench", "prompt_sets", "lab")
DYNAMIC_IMPORTS = {"import_module", "__import__"}


@dataclasses.dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # "path:line" of the first import that makes it


@dataclasses.dataclass(frozen=True)
class ImportGraph:
    modules: frozenset[str]
    edges: tuple[Edge, ...]

    def targets(self, module: str) -> list[str]:
        return sorted({e.target for e in self.edges if e.source == module})

    def edge(self, source: str, target: str) -> Edge:
        return next(e for e in self.edges if e.source == source and e.target == target)

    def package_edges(self) -> list[tuple[str, str]]:
        """(importer's package, imported module's package) for edges that cross packages."""
        pairs = {(self.package_of(e.source), self.package_of(e.target)) for e in self.edges}
        return sorted((a, b) for a, b in pairs if a != b)

    def package_of(self, module: str) -> str:
        """The package a module lives in (a package's __init__ is in that package)."""
        if any(m.startswith(module + ".") for m in self.modules):
            return module
        return module.rpartition(".")[0] or module

    def cycles(self) -> list[list[str]]:
        """One shortest cycle through each module that is on a cycle, without repeats: each
        as [m0, m1, ..., m0], rotated to start at its smallest module."""
        found: set[tuple[str, ...]] = set()
        for component in strongly_connected(self.modules, self.targets):
            for start in component:
                path = _shortest_cycle(start, component, self.targets)
                if path:
                    found.add(_rotated(path))
        return [[*c, c[0]] for c in sorted(found)]

    def describe_cycle(self, cycle: list[str]) -> str:
        """`a -> b (a.py:3) -> a (b.py:7)`."""
        steps = [cycle[0]]
        for source, target in zip(cycle, cycle[1:]):
            steps.append(f"{target} ({self.edge(source, target).where})")
        return " -> ".join(steps)


def build(repo: Path = REPO, packages: Iterable[str] = PRODUCT_PACKAGES) -> ImportGraph:
    """The import graph of the given top-level packages under `repo` (absent ones skipped)."""
    files = {module_name(path, repo): path for package in packages if (repo / package).is_dir()
             for path in sorted((repo / package).rglob("*.py"))}
    modules = frozenset(files)
    edges: dict[tuple[str, str], Edge] = {}
    for module, path in sorted(files.items()):
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in imported_modules(tree, module, is_package, modules):
            if target != module and (module, target) not in edges:
                edges[(module, target)] = Edge(module, target, f"{path.relative_to(repo)}:{line}")
    return ImportGraph(modules, tuple(edges.values()))


def module_name(path: Path, repo: Path) -> str:
    parts = list(path.relative_to(repo).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.Module, module: str, is_package: bool,
                     known: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, product module) for every import in `tree` that reaches a module in `known`."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                     for alias in node.names]
        elif isinstance(node, ast.Call) and _is_dynamic_import(node):
            names = [node.args[0].value]
        else:
            continue
        for name in names:
            target = _deepest_known(name, known)
            if target:
                yield node.lineno, target


def _is_dynamic_import(node: ast.Call) -> bool:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name in DYNAMIC_IMPORTS and bool(node.args) and isinstance(node.args[0], ast.Constant) \
        and isinstance(node.args[0].value, str)


def _absolute(module: str | None, level: int, package: str) -> str:
    """`from ..x import y` in package `a.b.c` -> `a.b.x`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _deepest_known(name: str, known: frozenset[str]) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def strongly_connected(nodes: Iterable[str], targets) -> list[list[str]]:
    """Tarjan's components with more than one node (a module never imports itself here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in targets(node):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(nodes):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return components


def _shortest_cycle(start: str, component: list[str], targets) -> list[str] | None:
    """Breadth-first from `start` back to it inside its component: [start, ..., last]."""
    inside = set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in targets(node):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return path[::-1]
                if nxt in inside and nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    return None


def _rotated(path: list[str]) -> tuple[str, ...]:
    first = path.index(min(path))
    return tuple(path[first:] + path[:first])


def render(graph: ImportGraph) -> str:
    lines = [f"# Import graph of {', '.join(p for p in PRODUCT_PACKAGES if any(m.split('.')[0] == p for m in graph.modules))}"
             f": {len(graph.modules)} modules, {len(graph.edges)} imports", "", "## Packages"]
    lines += [f"{a} -> {b}" for a, b in graph.package_edges()]
    lines += ["", "## Modules"]
    for module in sorted(graph.modules):
        lines.append(f"{module} -> {', '.join(graph.targets(module)) or '(none)'}")
    cycles = graph.cycles()
    lines += ["", f"## Cycles: {len(cycles)}"]
    lines += [graph.describe_cycle(c) for c in cycles]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(build()))
