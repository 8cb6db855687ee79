"""Every Python and shell block of the README and of docs/ runs, and prints what its page shows.

Each page runs in a fresh working directory of its own, holding links to the checkout's
``fixtures/`` and ``plugin/`` (pages name files such as ``plugin/cli/sample_memories.jsonl``
from a checkout's root), with ``$AFFECT_MEMORY_HOME`` at its ``.affect-memory``: the default
data directory of the command line, and the path the Python blocks open. A page's Python blocks
run in order in one namespace in this process, so the embedding model loads once for the
whole module; its shell blocks run in ``bash -e`` (``console`` blocks one ``$`` command at a
time), with the virtual environment's ``affect-memory`` first on the ``PATH``. Where the page
shows output, stdout must equal it (trailing whitespace aside). No block reaches the network:
``HF_HUB_OFFLINE=1``, and ``OPENAI_API_KEY`` is a placeholder. The few blocks that cannot run
here carry a skip marker with their reason, and there may be at most ``MAX_SKIPPED`` of them.
A page with the server marker (the HTTP guide) gets a real ``affect-memory serve`` of a store of
its own, its address in ``$AFFECT_MEMORY_URL``, stopped by its PID after the page.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromadb.api.client import Client

from affect_memory.memory.admin.adopt import AdoptedCollection
from affect_memory.memory.store import ChromaMemory
from affect_memory.state.sqlite import SQLiteStateStore
from tests.docs.pages import (
    CONSOLE,
    PYTHON,
    ROOT,
    SHELL,
    Block,
    blocks,
    console_steps,
    normalized,
    page_id,
    pages,
    serves,
)
from tests.plugin.http.serve_process import running_serve

MAX_SKIPPED = 12
"""Most runnable blocks that may carry a skip marker, over the README and all of docs/: each
one an install (make, pip), a server that serves until stopped, a block that needs Chroma,
PostgreSQL or MCP over HTTP, the TypeScript client (its own test compiles and runs it), a model
endpoint on the network, or benchmarks that take minutes. At least twice as many must run."""

SHELL_TIMEOUT = 120
"""Seconds one shell block may take before it counts as hung."""

LINKED = ("fixtures", "plugin")
"""Checkout folders a page's working directory links to."""


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh working directory with the page's environment, restored after the page."""
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AFFECT_MEMORY_HOME", str(tmp_path / ".affect-memory"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs-placeholder")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for name in ("AFFECT_MEMORY_STATE", "AFFECT_MEMORY_INDEX", "AFFECT_MEMORY_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    yield tmp_path


def _compare(block: Block, shown: str, printed: str, what: str = "") -> None:
    if normalized(printed) == normalized(shown):
        return
    diff = "\n".join(
        difflib.unified_diff(
            normalized(shown), normalized(printed), "shown on the page", "printed", lineterm=""
        )
    )
    pytest.fail(f"{block.where}: {what or 'the block'} printed something else:\n{diff}")


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.code, block.where, "exec"), namespace)
    if block.output is not None:
        _compare(block, block.output, printed.getvalue())


def _run_shell(block: Block, command: str, cwd: Path) -> str:
    completed = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT,
        check=False,
    )
    assert completed.returncode == 0, (
        f"{block.where}: exit {completed.returncode}\n{command}\n{completed.stderr[-3000:]}"
    )
    return completed.stdout


def _close_stores(namespace: dict[str, Any]) -> None:
    """Close what a page left open, so its store's lock and files go with its directory.

    Chroma keeps one client per path string in a process, and the pages' paths are relative:
    a client left open would be handed to the next page's same-named path in another folder.
    """
    for value in list(namespace.values()):
        if isinstance(value, ChromaMemory | AdoptedCollection | SQLiteStateStore | Client):
            value.close()


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_every_block_of_the_page_runs_and_prints_what_the_page_shows(
    page: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    with contextlib.ExitStack() as server:
        if serves(page):
            served = server.enter_context(running_serve(workdir / "served"))
            monkeypatch.setenv("AFFECT_MEMORY_URL", served.url)
        _run_page(page, workdir, namespace)


def _run_page(page: Path, workdir: Path, namespace: dict[str, Any]) -> None:
    try:
        for block in blocks(page):
            if block.skip is not None:
                continue
            if block.language in PYTHON:
                _run_python(block, namespace)
            elif block.language in SHELL:
                printed = _run_shell(block, block.code, workdir)
                if block.output is not None:
                    _compare(block, block.output, printed)
            elif block.language in CONSOLE:
                for command, shown in console_steps(block):
                    _compare(block, shown, _run_shell(block, command, workdir), f"$ {command}")
    finally:
        _close_stores(namespace)


def test_few_blocks_are_skipped_and_each_says_why() -> None:
    skipped = [block for page in pages() for block in blocks(page) if block.skip is not None]
    runnable = [
        block
        for page in pages()
        for block in blocks(page)
        if block.language in PYTHON | SHELL | CONSOLE
    ]
    listing = "\n".join(f"{block.where}: {block.skip}" for block in skipped)
    assert len(skipped) <= MAX_SKIPPED, f"{len(skipped)} blocks skipped:\n{listing}"
    assert len(runnable) - len(skipped) >= 2 * len(skipped), f"most must run:\n{listing}"
    for block in skipped:
        assert len(block.skip or "") >= 10, f"{block.where}: say why it cannot run"


def test_a_page_that_shows_output_for_a_block_is_read_that_way(tmp_path: Path) -> None:
    """The reader itself: output after a block is that block's, a marker skips, and an
    output block without a block before it, or a block without a language, is refused."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nprint(1)\n```\n\n```output\n1\n```\n\n"
        "<!-- snippet: skip (needs a server that serves until stopped) -->\n"
        "```sh\nserve\n```\n\nProse.\n\n```text\nnot output: prose came between\n```\n\n"
        "```console\n$ echo a \\\n  b\na b\n$ true\n```\n"
    )
    found = blocks(page)
    assert [(b.language, b.output, b.skip) for b in found] == [
        ("python", "1\n", None),
        ("sh", None, "needs a server that serves until stopped"),
        ("text", None, None),
        ("console", None, None),
    ]
    assert console_steps(found[3]) == [("echo a \\\n  b", "a b\n"), ("true", "")]
    page.write_text("Some prose.\n\n```output\n1\n```\n")
    with pytest.raises(ValueError, match="must follow a Python or shell block"):
        blocks(page)
    page.write_text("```\nplain\n```\n")
    with pytest.raises(ValueError, match="without a language"):
        blocks(page)
