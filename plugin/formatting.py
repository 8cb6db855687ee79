"""Plain-text tables for reports: what the command line and the benchmarks print.

A neutral module under both: ``affect_memory.cli`` and ``affect_memory.bench`` import it, so a
benchmark needs nothing of the command line (the command line imports the benchmarks, never
the reverse).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["format_table"]


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
            return f"{value:.3g}"
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Align ``rows`` under ``headers``: text left, numbers right, with a rule below the header."""
    cells = [[_cell(value) for value in row] for row in rows]
    numeric = [
        all(isinstance(row[i], int | float) and not isinstance(row[i], bool) for row in rows)
        for i in range(len(headers))
    ]
    widths = [
        max([len(header)] + [len(row[i]) for row in cells]) for i, header in enumerate(headers)
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.rjust(width) if right else value.ljust(width)
            for value, width, right in zip(values, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(list(headers)), rule, *(line(row) for row in cells)])
