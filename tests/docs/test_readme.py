"""The README stays short and gets a reader to a working recall early; its links lead to pages
that exist; the kernel pages keep their ten-line example, provenance table and parity notes.

That every block runs and prints what the page shows is ``test_snippets``'s job.
"""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from affect_memory.kernel import AffectControls, AffectDynamics, RetrievalWeights
from tests.docs.pages import DOCS, ROOT, blocks

README = ROOT / "README.md"
MOST_LINES = 300
RECALL_WITHIN = 60
"""A first-time reader has run a recall by this line."""


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MOST_LINES, f"README.md has {len(lines)} lines; move depth to docs/"


def test_the_first_python_block_stores_and_recalls_and_shows_its_output_early() -> None:
    first = next(block for block in blocks(README) if block.language == "python")
    end = first.line + len(first.code.splitlines()) + 1
    assert end <= RECALL_WITHIN, f"the first recall ends on line {end}"
    assert "ChromaMemory(" in first.code and ".add(" in first.code and ".recall(" in first.code
    assert first.output, "the page shows what the first recall prints"
    assert len(first.code.strip().splitlines()) <= 10


def test_every_link_of_the_readme_leads_to_a_file_in_the_checkout() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local)
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_the_readme_quickstart_is_remember_then_a_turn_then_mcp_and_langchain() -> None:
    text = README.read_text(encoding="utf-8")
    quickstart = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^### (.+)$", quickstart, re.M)[:3] == [
        "Remember and recall",
        "One agent turn",
        "MCP and LangChain",
    ]


# -- the kernel pages -----------------------------------------------------------------------------

KERNEL = DOCS / "kernel"


def test_the_kernel_in_ten_lines_is_ten_lines_with_its_output() -> None:
    code = [block for block in blocks(KERNEL / "index.md") if block.language == "python"]
    assert len(code) == 1
    assert len(code[0].code.rstrip("\n").splitlines()) <= 10
    assert code[0].output, "the page shows what the ten lines print"


def _provenance_names() -> set[str]:
    table = (KERNEL / "constants.md").read_text(encoding="utf-8")
    return {cell.split(".", 1)[-1] for cell in re.findall(r"`([^`]+)`", table)}


@pytest.mark.parametrize("model", [AffectControls, AffectDynamics, RetrievalWeights])
def test_the_provenance_table_names_every_tunable_constant(model: type[BaseModel]) -> None:
    names = _provenance_names()
    for field in model.model_fields:
        covered = field in names or any(
            name.endswith("*") and field.startswith(name[:-1]) for name in names
        )
        assert covered, f"{model.__name__}.{field} is missing from docs/kernel/constants.md"


def test_the_parity_page_explains_each_intended_difference() -> None:
    page = (KERNEL / "parity.md").read_text(encoding="utf-8")
    bullets = page.split("\n- ")[1:]
    for needle in ("max_history", "skip_history_echoes", "whitespace", "max_retrieval_candidates"):
        matching = [bullet for bullet in bullets if needle in bullet]
        assert matching, f"the parity page does not cover {needle}"
        # each difference says what the reference does and why ours differs
        assert "reference" in matching[0] and "Why:" in matching[0], needle
