"""The README's "Use it as your agent's memory" example runs as printed."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from affect_memory.models.embeddings import SentenceTransformerEmbedder

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Use it as your agent's memory"


def _blocks() -> tuple[str, str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"\n{HEADING}\n" in readme, f"README has no {HEADING!r} section"
    section = readme.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    printed = re.search(r"prints\n\n```text\n(.*?)```", section, re.S)
    assert code and printed, "the section needs a python block followed by its printed output"
    return code.group(1), printed.group(1)


def test_the_memory_example_prints_what_the_readme_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder
) -> None:
    code, printed = _blocks()
    assert len(code.strip().splitlines()) <= 10
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert output.getvalue() == printed
    assert (tmp_path / ".affect-memory" / "chroma" / "chroma.sqlite3").exists()


def test_the_turn_example_runs_a_turn_over_the_memory_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder
) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    setup, turn = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    expected = re.search(r"prints `([^`]*)`", section)
    assert expected, "the turn example needs its printed line"
    monkeypatch.chdir(tmp_path)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(setup, "README.md", "exec"), {"__name__": "readme"})
        before = len(output.getvalue())
        exec(compile(turn, "README.md", "exec"), {"__name__": "readme"})
    assert output.getvalue()[before:] == expected.group(1) + "\n"
