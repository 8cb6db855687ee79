"""The fixture runner: read files, check them whole, run every case, report per category.

Nothing runs until every file is valid: a malformed file raises ``FixtureError`` naming the
file and the place. The clock is injected: it is read once per fixture, for the cases that
carry no ``now`` of their own, and defaults to the wall clock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from affect_memory.conformance.cases import FUNCTIONS, Case, parse_kernel_cases
from affect_memory.conformance.report import CaseFailure, CategoryReport, ConformanceReport
from affect_memory.conformance.schema import show
from affect_memory.conformance.traces import parse_trace_cases
from affect_memory.jsonl import loads_strict
from affect_memory.kernel.clock import Clock, utc_now
from affect_memory.kernel.errors import FixtureError

__all__ = [
    "FLOAT_TOLERANCE",
    "Fixture",
    "load_fixture_file",
    "matches",
    "parse_fixture",
    "run_conformance",
    "run_fixtures",
]

FLOAT_TOLERANCE = 1e-9
"""Absolute tolerance for fixture floats; strings, booleans, integers and key sets match exactly."""


@dataclass(frozen=True)
class Fixture:
    """A validated fixture file, ready to run: its source name, kind and cases in order."""

    source: str
    kind: str
    cases: tuple[Case, ...]


def parse_fixture(payload: Any, *, source: str, clock: Clock = utc_now) -> Fixture:
    """Validate a parsed fixture strictly and prepare every case; raise FixtureError if unusable.

    Nothing runs here: every input is checked against its schema and the kernel's models first.
    ``clock`` gives the instant of cases without a ``now`` of their own.
    """
    if not isinstance(payload, dict):
        raise FixtureError(f"{source}: the top level must be an object, got {show(payload)}")
    try:
        if "traces" in payload:
            return Fixture(source, "trace", parse_trace_cases(payload))
        if set(payload) & set(FUNCTIONS):
            return Fixture(source, "kernel", parse_kernel_cases(payload, clock()))
    except FixtureError as error:
        raise FixtureError(f"{source}: {error}") from None
    raise FixtureError(
        f"{source}: neither a kernel fixture (groups {', '.join(FUNCTIONS)}) nor a trace fixture"
    )


def load_fixture_file(path: Path, *, clock: Clock = utc_now) -> Fixture:
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
    return parse_fixture(payload, source=str(path), clock=clock)


def run_conformance(paths: Sequence[Path], *, clock: Clock = utc_now) -> ConformanceReport:
    """Validate every file first, then run them all; raises FixtureError before running anything."""
    fixtures = [load_fixture_file(path, clock=clock) for path in paths]
    return run_fixtures(fixtures)


def matches(expected: Any, actual: Any) -> bool:
    """Whether an actual output is the expected one: floats within 1e-9, all else exactly."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int) and isinstance(actual, int):
        return expected == actual
    if isinstance(expected, int | float):
        return (
            isinstance(actual, int | float)
            and math.isfinite(actual)
            and abs(expected - actual) <= FLOAT_TOLERANCE
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, Mapping)
            and set(expected) == set(actual)
            and all(matches(expected[key], actual[key]) for key in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, Sequence)
            and not isinstance(actual, str)
            and len(expected) == len(actual)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(type(expected) is type(actual) and expected == actual)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _jsonable(item) for key, item in value.items()}
    return value


def run_fixtures(fixtures: Sequence[Fixture]) -> ConformanceReport:
    """Run every prepared case; a case that raises counts as failed, with the error as actual."""
    categories: dict[str, CategoryReport] = {}
    for fixture in fixtures:
        for case in fixture.cases:
            report = categories.setdefault(case.category, CategoryReport(case.category))
            try:
                actual = _jsonable(case.run())
            except Exception as error:  # a kernel bug must be reported, not crash the run
                actual = f"raised {type(error).__name__}: {error}"
            if matches(case.expected, actual):
                report.passed += 1
            else:
                report.failures.append(
                    CaseFailure(fixture.source, case.index, case.expected, actual)
                )
    return ConformanceReport(list(categories.values()))
