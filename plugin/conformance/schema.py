"""The shapes a fixture file may take: a small language for JSON values, and the specs built in it.

A spec is a function ``(value, path)`` that raises ``FixtureError`` naming the path and the
problem; the fixture runner checks every input and expected output against one before any
case runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from affect_memory.kernel.errors import FixtureError

__all__ = [
    "COGNITION_IN",
    "EMOTIONS",
    "GOALS",
    "OCEAN",
    "PAD",
    "PRESENCE_OUT",
    "STATE_FIELDS",
    "TURN_OUT",
    "Spec",
    "anything",
    "boolean",
    "either",
    "fail",
    "integer",
    "list_of",
    "mapping_of",
    "nullable",
    "number",
    "object_of",
    "show",
    "string",
]

Spec = Callable[[Any, str], None]
"""Checks one JSON value found at a path; raises ``FixtureError`` when it does not fit."""


def fail(path: str, problem: str) -> FixtureError:
    """The error for ``problem`` at ``path``, e.g. ``retrieval.recency_weight[0].in: ...``."""
    return FixtureError(f"{path}: {problem}")


def number(value: Any, path: str) -> None:
    """A finite JSON number (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(path, f"expected a number, got {show(value)}")
    if not math.isfinite(value):
        raise fail(path, f"expected a finite number, got {value!r}")


def integer(value: Any, path: str) -> None:
    """A JSON integer (not a boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, f"expected an integer, got {show(value)}")


def boolean(value: Any, path: str) -> None:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise fail(path, f"expected true or false, got {show(value)}")


def string(value: Any, path: str) -> None:
    """A JSON string."""
    if not isinstance(value, str):
        raise fail(path, f"expected a string, got {show(value)}")


def anything(value: Any, path: str) -> None:
    """Any JSON value (the case itself says what it means)."""
    return None


def nullable(spec: Spec) -> Spec:
    """``spec`` or ``null``."""

    def check(value: Any, path: str) -> None:
        if value is not None:
            spec(value, path)

    return check


def mapping_of(spec: Spec) -> Spec:
    """An object whose every value matches ``spec``."""

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise fail(path, f"expected an object, got {show(value)}")
        for key, item in value.items():
            spec(item, f"{path}.{key}")

    return check


def list_of(spec: Spec) -> Spec:
    """A list whose every item matches ``spec``."""

    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise fail(path, f"expected a list, got {show(value)}")
        for index, item in enumerate(value):
            spec(item, f"{path}[{index}]")

    return check


def object_of(required: Mapping[str, Spec], optional: Mapping[str, Spec] | None = None) -> Spec:
    """An object with exactly the ``required`` keys and any of the ``optional`` ones."""
    optional = optional or {}

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise fail(path, f"expected an object, got {show(value)}")
        unknown = sorted(set(value) - set(required) - set(optional))
        if unknown:
            raise fail(path, f"unknown field {unknown[0]!r}")
        missing = sorted(set(required) - set(value))
        if missing:
            raise fail(path, f"missing field {missing[0]!r}")
        for key, item in value.items():
            (required.get(key) or optional[key])(item, f"{path}.{key}")

    return check


def either(*variants: tuple[frozenset[str], Spec]) -> Spec:
    """The first variant whose marker keys the object holds."""

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise fail(path, f"expected an object, got {show(value)}")
        for marker, spec in variants:
            if marker & set(value):
                spec(value, path)
                return
        names = " or ".join(sorted(next(iter(marker)) for marker, _ in variants))
        raise fail(path, f"missing field: one of {names}")

    return check


def show(value: Any) -> str:
    """A value with its JSON kind, cut at 120 characters, for an error message."""
    kind = {bool: "boolean", str: "string", list: "list", dict: "object", type(None): "null"}
    return f"{kind.get(type(value), type(value).__name__)} {value!r}"[:120]


PAD = {"valence": number, "arousal": number, "dominance": number}
"""The three PAD axes of a mood."""
OCEAN = {"O": number, "C": number, "E": number, "A": number, "N": number}
"""The five OCEAN traits, by initial."""
GOALS = {
    "rapport": number,
    "intellectual": number,
    "autonomy": number,
    "respect": number,
    "honesty": number,
}
"""The five appraisal goals."""
EMOTIONS = mapping_of(number)
"""An emotion map: names to intensities."""
STATE_FIELDS: dict[str, Spec] = {
    **PAD,
    **OCEAN,
    **GOALS,
    "stage_int": integer,
    "stage": string,
    "baseline_valence": number,
    "longing": number,
    "comfort": number,
    "trust_score": number,
    "carried_thought": nullable(string),
}
"""The flat affect-state fields a kernel case may give."""
COGNITION_IN = object_of(
    {
        "reflection_pending": boolean,
        "due_intention": boolean,
        "open_thread": boolean,
        "intentionality": boolean,
        "curiosity": boolean,
    },
    {"carried_thought": boolean},
)
"""The cognition flags a presence case takes."""
PRESENCE_OUT = object_of(
    {
        "trust": number,
        "valence": number,
        "arousal": number,
        "longing": number,
        "awaiting": boolean,
        "mode": string,
        "line": string,
        "affect": object_of(PAD),
        "relationship": object_of(
            {"stage": string, "trust": number, "longing": number, "comfort": number}
        ),
        "cognition": object_of(
            {
                "reflection_pending": boolean,
                "carried_thought": boolean,
                "due_intention": boolean,
                "open_thread": boolean,
                "intentionality": boolean,
                "curiosity": boolean,
            }
        ),
        "source": string,
    }
)
"""The presence payload a presence case expects."""
TURN_OUT = object_of(
    {
        "mood": object_of(PAD),
        "baseline_valence": number,
        "active_emotions": EMOTIONS,
        "occ_carry": EMOTIONS,
    }
)
"""What an appraised turn reports: mood, baseline, active emotions and carry."""
