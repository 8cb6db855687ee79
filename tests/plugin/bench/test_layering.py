"""The command line imports the benchmarks and the experiments, never the reverse: no module
under ``bench/`` or ``experiments/`` imports ``affect_memory.cli`` (tables come from the
neutral ``affect_memory.formatting``, metrics from ``affect_memory.metrics``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[3] / "plugin"
MODULES = sorted([*(PLUGIN / "bench").glob("*.py"), *(PLUGIN / "experiments").glob("*.py")])


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda path: f"{path.parent.name}/{path.stem}")
def test_a_benchmark_or_experiment_never_imports_the_command_line(path: Path) -> None:
    imported = _imported(path)
    cli = sorted(name for name in imported if name.split(".")[:2] == ["affect_memory", "cli"])
    assert cli == [], f"{path.name} imports {cli}"


def test_the_walk_sees_the_modules() -> None:
    assert len(MODULES) > 20 and _imported(PLUGIN / "bench" / "recall_report.py") >= {
        "affect_memory.formatting"
    }
