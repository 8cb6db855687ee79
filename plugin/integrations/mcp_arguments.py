"""Strict MCP tool arguments: names, JSON types, finite numbers, visible text, clean ids.

The SDK validates leniently (``"0.5"`` becomes 0.5, ``"yes"`` True, an unknown name is dropped);
a caller's typo must be an error naming the tool, the field and the value, not a default.
"""

from __future__ import annotations

import difflib
import math
import unicodedata
from typing import Any

from pydantic import ValidationError

from affect_memory.kernel.bounds import MAX_CONVERSATION_ID_CHARS, check_conversation_id
from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "check_arguments",
    "conversation_argument",
    "explain_validation",
    "lone_surrogate",
    "number_argument",
    "one_prefix",
    "text_argument",
]

_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})
"""Unicode categories that show nothing by themselves: controls, format marks such as U+200B
and the BOM, spaces, and combining marks with nothing to combine with."""



def lone_surrogate(text: str) -> int | None:
    """The 1-based position of the first lone surrogate in ``text``, or None."""
    for position, character in enumerate(text, start=1):
        if "\ud800" <= character <= "\udfff":
            return position
    return None


def text_argument(value: object, name: str, *, identifier: bool = False) -> str:
    """``value`` when it is Unicode text with a visible character; ids take no control chars."""
    position = lone_surrogate(value) if isinstance(value, str) else None
    if position is not None:
        raise InvalidInputError(
            f"{name} has a lone surrogate at position {position}, which is not Unicode text"
        )
    if not isinstance(value, str) or not any(
        unicodedata.category(character) not in _INVISIBLE for character in value
    ):
        raise InvalidInputError(
            f"{name} must be a non-empty string with a visible character, got {shown(value)}"
        )
    if identifier:
        for position, character in enumerate(value, start=1):
            if unicodedata.category(character) == "Cc":
                raise InvalidInputError(
                    f"{name} must not contain control characters, got U+{ord(character):04X} "
                    f"at position {position}"
                )
    return value


def conversation_argument(value: object) -> str:
    """A conversation id: an identifier of at most 256 characters."""
    if isinstance(value, str) and len(value) > MAX_CONVERSATION_ID_CHARS:
        raise InvalidInputError(
            f"conversation_id must be at most {MAX_CONVERSATION_ID_CHARS} characters, "
            f"got {shown(value)}"
        )
    return check_conversation_id(text_argument(value, "conversation_id", identifier=True))


def number_argument(value: object, name: str) -> float:
    """A finite JSON number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInputError(f"{name} must be a number, got {shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    return value  # as given, so an error downstream shows 2 rather than 2.0



def explain_validation(error: ValidationError) -> str:
    """One line for the first argument the SDK's schema validation refused."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "missing":
        return f"{field} is required"
    message = first["msg"]
    return f"{field}: {message[:1].lower()}{message[1:]}, got {shown(first.get('input'))}"


_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _json_types(schema: dict[str, Any]) -> list[str]:
    """The JSON types a property's schema admits (``anyOf`` of plain types included)."""
    if "type" in schema:
        kind = schema["type"]
        return list(kind) if isinstance(kind, list) else [kind]
    return [kind for option in schema.get("anyOf", ()) for kind in _json_types(option)]


def _is_json_type(value: object, kind: str) -> bool:
    """Whether ``value`` is of JSON type ``kind``, strictly: no bool for a number."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return kind == "null" and value is None


def _check_value(name: str, value: object, schema: dict[str, Any]) -> None:
    """Refuse a value of another JSON type than the schema's, a non-finite number or a
    string holding a lone surrogate."""
    kinds = _json_types(schema)
    if kinds and not any(_is_json_type(value, kind) for kind in kinds):
        named = [kind for kind in kinds if kind != "null"] or kinds  # null means "the default"
        expected = " or ".join(_JSON_TYPES.get(kind, kind) for kind in named)
        if kinds[0] == "array" and "type" in schema.get("items", {}):
            expected = f"a list of {schema['items']['type']}s"
        raise InvalidInputError(f"{name} must be {expected}, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    if isinstance(value, str):
        position = lone_surrogate(value)
        if position is not None:
            raise InvalidInputError(
                f"{name} has a lone surrogate at position {position}, which is not Unicode text"
            )
    if isinstance(value, list):
        items: dict[str, Any] = schema.get("items") or next(
            (option.get("items", {}) for option in schema.get("anyOf", ()) if "items" in option),
            {},
        )
        for index, item in enumerate(value):
            _check_value(f"{name}[{index}]", item, items)


def check_arguments(name: str, arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse unknown argument names and values the tool's input schema does not admit.

    The SDK validates leniently (``"0.5"`` becomes 0.5, ``"yes"`` True, an unknown name is
    dropped); a caller's typo must be an error, not a default.
    """
    properties: dict[str, Any] = schema.get("properties", {})
    for key in arguments:
        if key not in properties:
            close = difflib.get_close_matches(key, list(properties), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InvalidInputError(
                f"unknown argument {shown(key)}{hint} (the arguments are {', '.join(properties)})"
            )
    for key, value in arguments.items():
        _check_value(key, value, properties[key])


def one_prefix(name: str, message: str) -> str:
    """``message`` prefixed with the tool's name exactly once."""
    for prefix in (f"Error executing tool {name}: ", f"{name}: "):
        message = message.removeprefix(prefix)
    return f"{name}: {message}"

