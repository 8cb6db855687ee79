"""The ``affect-memory conformance`` command: load fixture files, run them, print the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kernel.conformance import ConformanceReport, Fixture, parse_fixture, run_fixtures
from kernel.errors import FixtureError
from plugin.jsonl import loads_strict

__all__ = ["format_report", "load_fixture_file", "run_conformance"]


def load_fixture_file(path: Path) -> Fixture:
    """Read, parse and validate one fixture file; every problem becomes one FixtureError line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise FixtureError(f"{path}: cannot be read ({error})") from None
    try:
        payload = loads_strict(text)
    except json.JSONDecodeError as error:
        raise FixtureError(
            f"{path}: malformed JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    except ValueError as error:
        raise FixtureError(f"{path}: {error}") from None
    return parse_fixture(payload, source=str(path))


def run_conformance(paths: Sequence[Path]) -> ConformanceReport:
    """Validate every file first, then run them all; raises FixtureError before running anything."""
    fixtures = [load_fixture_file(path) for path in paths]
    return run_fixtures(fixtures)


def format_report(report: ConformanceReport) -> str:
    """One line per category, indented failure lines under it, and the summary line last."""
    width = max((len(category.name) for category in report.categories), default=10)
    lines: list[str] = []
    for category in report.categories:
        lines.append(
            f"{category.name:<{width}}  {category.passed:>4} passed  {category.failed:>3} failed"
        )
        for failure in category.failures:
            lines.append(
                f"    case {failure.index} ({failure.source}): expected "
                f"{json.dumps(failure.expected, ensure_ascii=False)}, got "
                f"{json.dumps(failure.actual, ensure_ascii=False, default=str)}"
            )
    lines.append(f"{report.passed} passed, {report.failed} failed")
    return "\n".join(lines)
