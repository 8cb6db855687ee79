"""The wall clock, read only by default arguments: every kernel function takes its instant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "utc_now"]

Clock = Callable[[], datetime]
"""A source of zoned instants; engines and stores take one so tests can fix time."""


def utc_now() -> datetime:
    """The current instant, zoned UTC: the default clock of engines and stores."""
    return datetime.now(UTC)
