"""The package's import graph, read from the source with ``ast``: imports flow one way.

Every ``import`` and ``from ... import`` in ``plugin/`` and ``kernel/`` counts, at module level
or inside a function, except those under ``if TYPE_CHECKING:`` (they never run). Files map to
``affect_memory.*`` names by pyproject's ``package-dir``. An import is an arrow to the deepest
module it names (``from affect_memory.memory import store`` points at
``affect_memory.memory.store``, ``from affect_memory.memory import ChromaMemory`` at the package);
the parent packages Python initialises on the way are not arrows. Modules imported by a name
computed at run time (``importlib.import_module``: the package's lazy exports, the CLI's and the
bench command's tables) are not seen.

The rules:

- no cycle among the modules;
- nothing under ``affect_memory.memory`` imports ``affect_memory.gate`` or ``affect_memory.state``
  (the memory layer sits below both; what they share lives in ``affect_memory.db`` or lower),
  and ``affect_memory.db`` imports neither ``state`` nor ``memory``;
- only ``affect_memory/__init__.py`` (its lazy exports) and ``affect_memory.cli`` import
  ``affect_memory.memory.admin`` (migrate and adopt are tools run from outside the library);
- only ``affect_memory.memory.chroma`` and ``affect_memory.bench`` import ``chromadb``. The admin
  tools open foreign and old-layout collections through ``UserCollections`` like everything
  else. The benches stay allowed because chromadb itself is part of what they measure: the
  HNSW sweep builds raw collections with settings of its own, the recall bench builds the
  old one-collection layout to compare against, and every report records the chromadb
  version it was measured on;
- ``affect_memory.kernel`` imports nothing of ``affect_memory`` outside itself.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"][
    "setuptools"
]["package-dir"]

CHROMADB_USERS = ("affect_memory.memory.chroma", "affect_memory.bench")


def _module_name(path: Path) -> str:
    """The ``affect_memory.*`` name of a source file, by the longest mapped folder holding it."""
    relative = path.relative_to(ROOT)
    for name, folder in sorted(PACKAGE_DIRS.items(), key=lambda item: -len(item[1])):
        if Path(folder) in relative.parents:
            parts = relative.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join((name, *parts))
    raise AssertionError(f"{relative} is under no folder of pyproject's package-dir")


@cache
def _sources() -> dict[str, Path]:
    """Every module of the package and its file."""
    folders = sorted(set(PACKAGE_DIRS.values()))
    files = (path for folder in folders for path in (ROOT / folder).rglob("*.py"))
    return {_module_name(path): path for path in files if "__pycache__" not in path.parts}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements under ``node`` that can run (not under ``if TYPE_CHECKING:``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _imports_of(other)
            continue
        yield from _imports_of(child)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def _targets(module: str, statement: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules an import statement in ``module`` names (deepest that exists)."""
    if isinstance(statement, ast.Import):
        yield from (alias.name for alias in statement.names)
        return
    base = statement.module or ""
    if statement.level:
        is_package = _sources()[module].name == "__init__.py"
        anchor = module.split(".")[: len(module.split(".")) - statement.level + is_package]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in statement.names:
        submodule = f"{base}.{alias.name}"
        yield submodule if submodule in _sources() else base


@cache
def _graph() -> dict[str, dict[str, int]]:
    """Each module's imports (any module, inside the package or not) and a line of each."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in _sources().items():
        arrows: dict[str, int] = {}
        for statement in _imports(ast.parse(path.read_text("utf-8"), str(path))):
            for target in _targets(module, statement):
                arrows.setdefault(target, statement.lineno)
        graph[module] = arrows
    return graph


def _within(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def _arrows(source: tuple[str, ...], target: tuple[str, ...]) -> list[str]:
    """``module:line -> imported`` for every import from ``source`` packages into ``target``."""
    return sorted(
        f"{module}:{line} -> {imported}"
        for module, arrows in _graph().items()
        if _within(module, *source)
        for imported, line in arrows.items()
        if _within(imported, *target)
    )


def _cycles() -> list[list[str]]:
    """One cycle path through each strongly connected group of modules (Tarjan)."""
    modules = _sources()
    edges = {
        module: sorted(target for target in arrows if target in modules and target != module)
        for module, arrows in _graph().items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return [_path_within(group, edges) for group in groups]


def _path_within(group: set[str], edges: dict[str, list[str]]) -> list[str]:
    """A shortest cycle through the group's first module, staying inside the group."""
    start = min(group)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in edges[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if child in group and child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def test_the_graph_covers_the_package() -> None:
    modules = _sources()
    assert "affect_memory" in modules and "affect_memory.kernel" in modules
    assert "affect_memory.memory.store" in modules and "affect_memory.db" in modules
    imported = _graph()["affect_memory.cli.store_options"]
    assert any(_within(module, "affect_memory.memory") for module in imported)


def test_no_module_imports_itself_back() -> None:
    cycles = _cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_memory_imports_neither_gate_nor_state() -> None:
    sideways = _arrows(("affect_memory.memory",), ("affect_memory.gate", "affect_memory.state"))
    assert not sideways, "\n".join(sideways)


def test_the_shared_database_plumbing_imports_neither_of_its_users() -> None:
    upward = _arrows(("affect_memory.db",), ("affect_memory.state", "affect_memory.memory"))
    assert not upward, "\n".join(upward)


def test_only_the_package_exports_and_the_cli_import_the_admin_tools() -> None:
    callers = [
        arrow
        for arrow in _arrows(("affect_memory",), ("affect_memory.memory.admin",))
        if arrow.partition(":")[0] != "affect_memory"
        and not _within(arrow.partition(":")[0], "affect_memory.cli", "affect_memory.memory.admin")
    ]
    assert not callers, "\n".join(callers)


def test_only_the_chroma_adapter_and_the_benches_import_chromadb() -> None:
    users = [
        arrow
        for arrow in _arrows(("affect_memory",), ("chromadb",))
        if not _within(arrow.partition(":")[0], *CHROMADB_USERS)
    ]
    assert not users, "\n".join(users)


def test_the_kernel_imports_nothing_of_the_plugin() -> None:
    outward = [
        arrow
        for arrow in _arrows(("affect_memory.kernel",), ("affect_memory",))
        if not _within(arrow.partition(" -> ")[2], "affect_memory.kernel")
    ]
    assert not outward, "\n".join(outward)
