"""What the command line prints for a failed command: one line (tables are
``affect_memory.formatting``'s)."""

from __future__ import annotations

__all__ = ["MAX_ERROR_CHARS", "error_line"]

MAX_ERROR_CHARS = 1000
"""Longest error line the CLI prints; a longer one is cut (values are cut at 200 already)."""


def error_line(command: str, error: BaseException) -> str:
    """The one line printed for a failed command: whitespace runs joined, cut when too long."""
    text = " ".join(f"affect-memory {command}: {error}".split())
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}… (line cut; {len(text):,} characters)"
