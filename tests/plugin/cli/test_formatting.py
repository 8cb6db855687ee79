"""An error is one line on stderr, cut to a bound when it is too long."""

from __future__ import annotations

from affect_memory.cli.formatting import MAX_ERROR_CHARS, error_line
from affect_memory.kernel.errors import InvalidInputError


def test_an_error_line_is_one_line_and_cut_when_too_long() -> None:
    error = InvalidInputError("query must be short:\n" + "x" * 100_000)
    line = error_line("recall", error)
    assert "\n" not in line
    assert line.startswith("affect-memory recall: query must be short: xxx")
    assert len(line) < MAX_ERROR_CHARS + 60
    assert line.endswith(f"(line cut; {100_000 + 43:,} characters)")
    assert error_line("recall", InvalidInputError("short")) == "affect-memory recall: short"


def test_a_line_of_exactly_the_bound_is_kept_whole() -> None:
    prefix = "affect-memory recall: "
    error = InvalidInputError("y" * (MAX_ERROR_CHARS - len(prefix)))
    assert error_line("recall", error) == prefix + "y" * (MAX_ERROR_CHARS - len(prefix))
    longer = error_line("recall", InvalidInputError("y" * (MAX_ERROR_CHARS - len(prefix) + 1)))
    assert longer.endswith(f"… (line cut; {MAX_ERROR_CHARS + 1:,} characters)")
