"""The README and the documentation pages as the docs tests read them: their fenced blocks,
the marker that skips a block, and the output a page shows for a block.

A block is a fence at the start of a line, three backticks and a language. A ``text`` or
``output`` block right after a Python or shell block (nothing but blank lines between) is the
output that block prints; a ``console`` block holds its own (``$ command`` lines, each followed
by what it prints). ``<!-- snippet: skip (reason) -->`` on the line before a block keeps the
docs test from running it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

PYTHON = frozenset({"python"})
SHELL = frozenset({"bash", "sh", "shell"})
CONSOLE = frozenset({"console"})
RUNNABLE = PYTHON | SHELL | CONSOLE
SHOWN_OUTPUT = frozenset({"text", "output"})
"""Languages of a block that, right after a runnable one, is what that block prints."""

SKIP = re.compile(r"<!-- snippet: skip \((?P<reason>[^)]+)\) -->")
SERVER = re.compile(r"^<!-- snippet: server \((?P<reason>[^)]+)\) -->$", re.MULTILINE)
"""A page whose shell blocks call ``affect-memory serve``: the docs test serves a store of the
page's own for them and names it in ``$AFFECT_MEMORY_URL``."""
FENCE = re.compile(r"^```(?P<language>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with its skip reason and the output shown for it."""

    page: Path
    line: int
    """The 1-based line of the opening fence."""
    language: str
    code: str
    skip: str | None = None
    output: str | None = None
    """What the page shows the block prints, when it shows it."""

    @property
    def where(self) -> str:
        """``page:line`` for messages."""
        return f"{page_id(self.page)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def serves(page: Path) -> bool:
    """Whether ``page`` carries the server marker (``SERVER``)."""
    return SERVER.search(page.read_text("utf-8")) is not None


def page_id(page: Path) -> str:
    """A page's path from the repository root (as a test id), or as given outside it."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


@dataclass(frozen=True)
class _Fence:
    line: int
    language: str
    code: str
    before: str
    """The last non-blank line before the opening fence ("" at the top of the page)."""
    follows_fence: bool
    """Whether only blank lines separate this fence from the previous block's closing one."""


def _fences(page: Path) -> list[_Fence]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[_Fence] = []
    before, last_closing, index = "", -2, 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            if lines[index].strip():
                before = lines[index]
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"{page_id(page)}:{index + 1}: a block is never closed")
        between = lines[last_closing + 1 : index]
        found.append(
            _Fence(
                line=index + 1,
                language=opening["language"],
                code="\n".join(lines[index + 1 : end]) + "\n",
                before=before,
                follows_fence=last_closing >= 0 and not any(line.strip() for line in between),
            )
        )
        before, last_closing, index = "```", end, end + 1
    return found


def blocks(page: Path) -> list[Block]:
    """Every block of ``page`` in order, output blocks folded into the block they follow.

    A skip marker counts only before a runnable block (another block is never run anyway).
    Raises ValueError for a block without a language, a malformed marker, and an ``output``
    block that follows no runnable block.
    """
    result: list[Block] = []
    for fence in _fences(page):
        where = f"{page_id(page)}:{fence.line}"
        if not fence.language:
            raise ValueError(f"{where}: a block without a language (```python, ```text, ...)")
        marker = SKIP.search(fence.before)
        if "snippet:" in fence.before and marker is None:
            raise ValueError(f"{where}: write the marker as <!-- snippet: skip (reason) -->")
        previous = result[-1] if result else None
        shows_output = (
            fence.language in SHOWN_OUTPUT
            and fence.follows_fence
            and previous is not None
            and previous.language in PYTHON | SHELL
            and previous.output is None
        )
        if shows_output and previous is not None:
            result[-1] = Block(previous.page, previous.line, previous.language, previous.code,
                               previous.skip, fence.code)  # fmt: skip
            continue
        if fence.language == "output":
            raise ValueError(f"{where}: an output block must follow a Python or shell block")
        skip = marker["reason"] if marker and fence.language in RUNNABLE else None
        result.append(Block(page, fence.line, fence.language, fence.code, skip))
    return result


def console_steps(block: Block) -> list[tuple[str, str]]:
    """A ``console`` block's commands, each with the output shown under it.

    A command is a ``$ `` line, continued on the next line while it ends in a backslash.
    """
    steps: list[tuple[str, list[str]]] = []
    lines = block.code.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = [line[2:]]
            while command[-1].endswith("\\") and index + 1 < len(lines):
                index += 1
                command.append(lines[index])
            steps.append(("\n".join(command), []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"{block.where}: a console block must start with a '$ ' command")
        index += 1
    return [(command, "\n".join(shown) + "\n" if shown else "") for command, shown in steps]


def normalized(text: str) -> list[str]:
    """``text``'s lines without trailing whitespace, and without blank lines at the end."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
