"""A conformance run's outcome: passes and failures per category, as text or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CaseFailure", "CategoryReport", "ConformanceReport", "format_report"]


@dataclass(frozen=True)
class CaseFailure:
    """One case whose actual output differs from the expected one."""

    source: str
    index: int
    expected: Any
    actual: Any


@dataclass
class CategoryReport:
    """Pass and fail counts of one category (a kernel function or one trace)."""

    name: str
    passed: int = 0
    failures: list[CaseFailure] = field(default_factory=list)

    @property
    def failed(self) -> int:
        """How many cases failed."""
        return len(self.failures)


@dataclass
class ConformanceReport:
    """Every category's outcome and the totals."""

    categories: list[CategoryReport]

    @property
    def passed(self) -> int:
        """Cases and trace steps that matched."""
        return sum(category.passed for category in self.categories)

    @property
    def failed(self) -> int:
        """Cases and trace steps that did not match."""
        return sum(category.failed for category in self.categories)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON-ready data."""
        return {
            "categories": [
                {
                    "name": category.name,
                    "passed": category.passed,
                    "failed": category.failed,
                    "failures": [
                        {
                            "file": failure.source,
                            "case": failure.index,
                            "expected": failure.expected,
                            "actual": failure.actual,
                        }
                        for failure in category.failures
                    ],
                }
                for category in self.categories
            ],
            "passed": self.passed,
            "failed": self.failed,
        }


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
