"""Strict JSON and JSON Lines reading for user files: duplicate keys and NaN are refused.

JSON parsers silently keep the last of a repeated key, which would let
``{"user_id": "a", ..., "user_id": "b"}`` file a memory under another user.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from affect_memory.errors import RecordError
from affect_memory.kernel.errors import AffectMemoryError

__all__ = ["loads_strict", "read_jsonl"]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses repeated keys and NaN/Infinity (raises ValueError)."""
    return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)


def read_jsonl(
    path: Path | str,
    *,
    error: type[AffectMemoryError] = RecordError,
    problems: list[str] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line; ``-`` reads standard input.

    A bad line raises ``error`` naming the file and the line number; when ``problems`` is
    given, it is appended there instead and reading goes on, so one error can list them all.
    An unreadable or non-UTF-8 file always raises.
    """

    def bad(message: str) -> None:
        if problems is None:
            raise error(message)
        problems.append(message)

    path = Path(path)
    try:
        handle = sys.stdin if str(path) == "-" else path.open(encoding="utf-8")
    except OSError as problem:
        raise error(f"cannot read {path}: {problem.strerror or problem}") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = loads_strict(line)
                except ValueError as problem:
                    bad(f"{path} line {number}: invalid JSON: {problem}")
                    continue
                if not isinstance(value, dict):
                    bad(f"{path} line {number}: expected a JSON object, got {type(value).__name__}")
                    continue
                yield number, value
        except UnicodeDecodeError as problem:
            raise error(f"{path}: not UTF-8 text ({problem.reason})") from None
