"""Strict, bounded JSON and JSON Lines reading for user input: duplicate keys, NaN, deep
nesting and huge numbers are refused with one-line ``ValueError``s.

JSON parsers silently keep the last of a repeated key, which would let
``{"user_id": "a", ..., "user_id": "b"}`` file a memory under another user. Python's parser
also raises ``RecursionError`` (not ``ValueError``) about 1,000 levels deep, and refuses an
integer of more than 4,300 digits with a message about ``sys.set_int_max_str_digits``; the
bounds below refuse both, and far sooner, in words a user can act on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from affect_memory.errors import RecordError
from affect_memory.kernel.errors import AffectMemoryError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_DIGITS",
    "DuplicateKeyError",
    "JsonBoundsError",
    "loads_strict",
    "read_jsonl",
]

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (an arbitrary bounded choice).

Every document this package reads is a few levels deep; 64 leaves room for any real one and
stays far below both Python's recursion limit and the MCP SDK's parser (pydantic's jiter
refuses 200 levels, dropping the message without a reply).
"""

MAX_NUMBER_DIGITS = 100
"""Longest number accepted, in characters (an arbitrary bounded choice: a 64-bit integer has
20 digits, a double needs 17 significant ones); far below Python's 4,300-digit limit."""


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key (``key`` names it)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears twice")
        self.key = key


class JsonBoundsError(ValueError):
    """A JSON document nests too deep or holds a number too long."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _long(token: str) -> None:
    if len(token) > MAX_NUMBER_DIGITS:
        raise JsonBoundsError(
            f"a number of {len(token)} characters is longer than the limit of {MAX_NUMBER_DIGITS}"
        )


def _bounded_int(token: str) -> int:
    _long(token)
    return int(token)


def _bounded_float(token: str) -> float:
    _long(token)
    return float(token)


def _too_deep() -> JsonBoundsError:
    return JsonBoundsError(f"nested deeper than {MAX_JSON_DEPTH} levels")


def _check_depth(value: Any) -> None:
    """Refuse ``value`` when it nests deeper than ``MAX_JSON_DEPTH`` (a loop, no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _too_deep()
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def loads_strict(text: str | bytes, *, non_finite: bool = False, unique_keys: bool = True) -> Any:
    """``json.loads`` that refuses repeated keys (``DuplicateKeyError``) unless not
    ``unique_keys`` (then the last wins), NaN/Infinity unless ``non_finite``, and
    (``JsonBoundsError``) nesting deeper than ``MAX_JSON_DEPTH`` or a number longer than
    ``MAX_NUMBER_DIGITS``; every refusal is a one-line ``ValueError``."""
    options: dict[str, Any] = {} if non_finite else {"parse_constant": _refuse_constant}
    if unique_keys:
        options["object_pairs_hook"] = _unique_keys
    try:
        value = json.loads(
            text,
            parse_int=_bounded_int,
            parse_float=_bounded_float,
            **options,
        )
    except RecursionError:
        raise _too_deep() from None
    _check_depth(value)
    return value


class _NotUtf8(ValueError):
    """A line of a JSON Lines file that is not UTF-8 text."""


def _decoded(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text, or ``_NotUtf8`` naming ``where``, the byte and its column."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:
        raise _NotUtf8(f"{where}: UTF-16 text (or NUL bytes), not UTF-8; save the file as UTF-8")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as problem:
        raise _NotUtf8(
            f"{where}: not UTF-8 text (byte 0x{raw[problem.start]:02x} at byte "
            f"{problem.start + 1} of the line: {problem.reason}); save the file as UTF-8"
        ) from None


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
    try:  # bytes, decoded line by line, so an encoding problem names its line
        handle: Any = (
            getattr(sys.stdin, "buffer", sys.stdin) if str(path) == "-" else path.open("rb")
        )
    except OSError as problem:
        raise error(f"cannot read {path}: {problem.strerror or problem}") from None
    with handle:
        try:
            for number, raw in enumerate(handle, start=1):
                line = raw if isinstance(raw, str) else _decoded(raw, f"{path} line {number}")
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
        except _NotUtf8 as problem:
            raise error(str(problem)) from None
