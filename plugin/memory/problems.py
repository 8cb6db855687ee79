"""Bad input as one line: a pydantic error as a phrase naming the field and the value, and many
problems joined into one message (the first 20, then how many more)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from affect_memory.errors import TimestampError
from affect_memory.kernel.errors import shown

__all__ = ["MAX_PROBLEMS_SHOWN", "MEMORY_FIELDS", "explain_error", "problems_message"]

MAX_PROBLEMS_SHOWN = 20
"""Problems one batch error lists before it says how many more there are."""


MEMORY_FIELDS = "MemoryRecord field (custom metadata goes under 'extra')"
"""What an unknown key of a memory record is not (``explain_error``'s default)."""


def explain_error(error: Mapping[str, Any], *, fields: str = MEMORY_FIELDS) -> tuple[str, bool]:
    """One phrase for one pydantic error (field, what is wrong, the value), and whether it is
    a timestamp error; an unknown key "is not a ``fields``"."""
    loc = ".".join(str(part) for part in error.get("loc", ())) or "record"
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, TimestampError):
        return str(cause), True
    if isinstance(cause, Exception):
        return f"{loc} {cause}", False
    kind = error.get("type")
    value = shown(error.get("input"))
    if kind == "missing":
        return f"{loc} is required", False
    if kind == "extra_forbidden":
        return (
            f"{loc} is not a {fields}, got {value}",
            False,
        )
    message = str(error.get("msg", "is invalid"))
    return f"{loc}: {message[:1].lower()}{message[1:]}, got {value}", False


def problems_message(problems: list[str]) -> str:
    """One line listing ``problems``: the first 20, then how many more, and the total."""
    if len(problems) == 1:
        return problems[0]
    listed = "; ".join(problems[:MAX_PROBLEMS_SHOWN])
    more = len(problems) - MAX_PROBLEMS_SHOWN
    if more > 0:
        return f"{listed}; and {more:,} more ({len(problems):,} problems)"
    return f"{listed} ({len(problems)} problems)"
