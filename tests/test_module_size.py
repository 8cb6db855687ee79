"""Every module over about 400 lines says at its top why it is one module.

A long module is sometimes right (a facade users read in one place, one table that must be
read whole); the reason is then written where a reader meets the length, in the module
docstring, as a sentence of the form "The module is about N lines because ...", and N stays
true of the file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 420
"""Lines a module may have without a stated reason ("about 400")."""

STATED = re.compile(r"about ([\d,]+) lines because")
TOLERANCE = 0.2
"""How far the stated length may be from the file's before the sentence counts as stale."""


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


_LONG = sorted(
    path for folder in ("plugin", "kernel") for path in (ROOT / folder).rglob("*.py")
    if _lines(path) > LIMIT
)


@pytest.mark.parametrize("path", _LONG, ids=lambda path: str(path.relative_to(ROOT)))
def test_a_long_module_states_why(path: Path) -> None:
    """A module over the limit says why, and about how long it is, in its docstring."""
    docstring = " ".join((ast.get_docstring(ast.parse(path.read_text("utf-8"))) or "").split())
    found = STATED.search(docstring)
    shown = path.relative_to(ROOT)
    assert found, (
        f"{shown} has {_lines(path)} lines (over {LIMIT}): split it, or say at its top why it "
        "is one module ('The module is about N lines because ...')"
    )
    stated, actual = int(found[1].replace(",", "")), _lines(path)
    assert abs(stated - actual) <= TOLERANCE * actual, (
        f"{shown} says it is about {stated} lines but has {actual}"
    )


def test_the_scan_reads_the_source_tree() -> None:
    """The scan sees the real tree, so an empty parametrisation cannot pass by a wrong root."""
    assert _lines(ROOT / "kernel" / "engine.py") > 100
