"""The command line's help as docs/reference/cli.md shows it: every command, in ``--help`` order.

``python -m tests.docs.cli_help`` prints the page's command sections, to paste in when a
command changes; ``tests/docs/test_reference_pages.py`` fails until the page matches.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager

from affect_memory.cli.main import build_parser
from tests.docs.pages import ROOT

WIDTH = 100
"""The terminal width the page's help is wrapped at."""

BESIDE = str(ROOT.parent) + os.sep
"""Where the checkout lies: defaults beside it (the shared data sets) are shown as ``../``."""


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """``affect-memory`` and every sub-command under it, depth first, as ``(prog, parser)``."""
    found: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(parser: argparse.ArgumentParser) -> None:
        found.append((parser.prog, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return found


@contextmanager
def _columns(width: int) -> Iterator[None]:
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def help_text(parser: argparse.ArgumentParser) -> str:
    """``parser``'s help at the page's width, with paths beside the checkout as ``../``."""
    with _columns(WIDTH):
        return parser.format_help().replace(BESIDE, "../")


def comparable(text: str) -> str:
    """``text`` without any whitespace, paths beside the checkout as ``../``: help compares
    equal however it was wrapped (a long path may have been broken at a hyphen)."""
    return "".join(text.split()).replace("".join(BESIDE.split()), "../")


def sections() -> str:
    """The page's command sections: a heading and the help of each command."""
    parts = []
    for prog, parser in commands():
        depth = "##" if prog.count(" ") < 2 else "###"
        parts.append(f"{depth} {prog}\n\n```text\n{help_text(parser).rstrip()}\n```\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(sections(), end="")
