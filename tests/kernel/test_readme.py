"""The README's kernel section runs as printed and its provenance table covers every constant."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from pydantic import BaseModel

from affect_memory.kernel import AffectControls, AffectDynamics, RetrievalWeights
from tests.kernel.fixture_tools import ROOT

HEADING = "## The kernel in ten lines"


def _section() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{HEADING}\n" in readme, f"README has no '{HEADING}' section"
    return readme.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), re.S)


def test_the_section_has_one_ten_line_python_example_and_its_output() -> None:
    code = _blocks("python")
    assert len(code) == 1
    assert len(code[0].rstrip("\n").splitlines()) <= 10
    assert len(_blocks("text")) == 1


def test_every_python_block_runs_and_prints_what_the_readme_shows() -> None:
    expected = _blocks("text")[0]
    for code in _blocks("python"):
        completed = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        assert completed.stdout == expected


def _table_names() -> set[str]:
    table = _section().split("### Constants and where they come from", 1)[1]
    names = set()
    for cell in re.findall(r"`([^`]+)`", table):
        names.add(cell.split(".", 1)[-1])
    return names


@pytest.mark.parametrize("model", [AffectControls, AffectDynamics, RetrievalWeights])
def test_the_provenance_table_names_every_tunable_constant(model: type[BaseModel]) -> None:
    names = _table_names()
    for field in model.model_fields:
        covered = field in names or any(
            name.endswith("*") and field.startswith(name[:-1]) for name in names
        )
        assert covered, f"{model.__name__}.{field} is missing from the README provenance table"


PARITY = "## Parity with the reference runtime"


def test_the_parity_section_explains_each_intended_difference() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{PARITY}\n" in readme, f"README has no '{PARITY}' section"
    section = readme.split(f"\n{PARITY}\n", 1)[1].split("\n## ", 1)[0]
    bullets = section.split("\n- ")[1:]
    for needle in ("max_history", "skip_history_echoes", "whitespace", "max_retrieval_candidates"):
        matching = [b for b in bullets if needle in b]
        assert matching, f"the parity section does not cover {needle}"
        # each difference says what the reference does and why ours differs
        assert "reference" in matching[0] and "Why:" in matching[0], needle
