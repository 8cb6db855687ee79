"""Recall filters: parsing and checking a ``where``, and its forms for Chroma and the index.

A filter restricts recall to the memories whose fields match, *before* ranking, so ``top_k``
matching memories come back whenever that many exist. It is a mapping of fields to
conditions, every one of which must hold (an AND):

* fields: ``agent_id``, ``conversation_id`` and ``extra.KEY`` for the custom metadata key
  ``KEY`` (Chroma keeps ``extra`` flat in a row's metadata, so ``extra.project`` is the
  metadata key ``project``; the prefix keeps a misspelt field an error instead of a filter
  that silently matches nothing);
* conditions: a scalar (equality), ``{"$eq": scalar}`` or ``{"$in": [scalar, ...]}`` (1 to
  ``MAX_IN_VALUES`` values of one type). Scalars are as ``extra`` stores them (str, bool,
  finite float, 64-bit int; ``agent_id`` and ``conversation_id`` are strings). As in Chroma,
  ``1`` and ``1.0`` are equal and ``True`` is not ``1``.

``{"agent_id": "x", "extra.project": {"$in": ["p", "q"]}}`` keeps x's memories of either
project. An empty mapping (or None) filters nothing. Anything else (an unknown field, another
operator, a list or None as a value) is an ``InvalidInputError`` of one line naming the field
and the value.

The memory index holds each memory's filterable fields as ``(field, value_key)`` pairs
(``index_tags``, ``affect_memory.memory.index.storage.schema``): ``value_key`` is a digest of the
value's typed canonical form (numbers by value, so ``1`` and ``1.0`` share one), so equality and
``$in`` are plain ``IN`` lists on both SQLite and PostgreSQL.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.records import (
    MAX_EXTRA_KEY_CHARS,
    MAX_ID_CHARS,
    RESERVED_KEYS,
    ExtraValue,
)

__all__ = [
    "EXTRA_PREFIX",
    "FIELDS",
    "MAX_IN_VALUES",
    "FieldCondition",
    "MemoryFilter",
    "WhereInput",
    "index_condition",
    "metadata_tags",
    "parse_where",
    "value_key",
]

FIELDS = ("agent_id", "conversation_id")
"""The record fields a filter may name directly (every other is ``extra.KEY``)."""

EXTRA_PREFIX = "extra."
"""How a filter names a custom metadata key: ``extra.project`` is ``extra["project"]``."""

MAX_IN_VALUES = 256
"""Most values of one ``$in``: a filter selects groups, it is not a list of ids."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class FieldCondition:
    """One field's condition: its metadata key and the values it may equal (one: ``$eq``)."""

    name: str
    """The field as the filter wrote it (``agent_id``, ``extra.project``)."""
    key: str
    """The metadata key Chroma and the index hold it under (``agent_id``, ``project``)."""
    values: tuple[ExtraValue, ...]
    operator: str
    """``$eq`` or ``$in``."""

    def chroma(self) -> dict[str, Any]:
        """This condition as one Chroma ``where`` clause."""
        if self.operator == "$eq":
            return {self.key: {"$eq": self.values[0]}}
        return {self.key: {"$in": list(self.values)}}

    def value_keys(self) -> list[str]:
        """The index's keys of the values this condition accepts."""
        return list(dict.fromkeys(value_key(value) for value in self.values))

    def accepts(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a row with ``metadata`` meets this condition (Chroma's equality)."""
        if self.key not in metadata:
            return False
        held = value_key(metadata[self.key])
        return held in self.value_keys()


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """A checked filter: conditions that must all hold, in the order they were written."""

    conditions: tuple[FieldCondition, ...]

    def chroma_where(self) -> dict[str, Any]:
        """The filter as a Chroma ``where`` (one clause, or ``$and`` of several)."""
        clauses = [condition.chroma() for condition in self.conditions]
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def accepts(self, metadata: Mapping[str, Any] | None) -> bool:
        """Whether a row with ``metadata`` passes the filter."""
        return metadata is not None and all(c.accepts(metadata) for c in self.conditions)

    def describe(self) -> str:
        """The filter as one line (for errors and logs)."""
        return ", ".join(
            f"{c.name}={shown(c.values[0])}"
            if c.operator == "$eq"
            else f"{c.name} in {shown(list(c.values))}"
            for c in self.conditions
        )


WhereInput = Mapping[str, Any] | MemoryFilter | None
"""What recall's ``where=`` takes: a filter mapping, a checked filter, or None (no filter)."""


def value_key(value: object) -> str:
    """The index's key of a metadata value: a digest of its typed canonical form.

    Numbers are keyed by value (``1``, ``1.0`` and ``-0.0``/``0`` agree, as Chroma compares
    them), booleans apart from numbers, strings by their text.
    """
    if isinstance(value, bool):
        form = f"b:{int(value)}"
    elif isinstance(value, int):
        form = f"n:{value}"
    elif isinstance(value, float):
        whole = value.is_integer() and _INT64_MIN <= value <= _INT64_MAX
        form = f"n:{int(value)}" if whole else f"n:{value!r}"
    elif isinstance(value, str):
        form = f"s:{value}"
    else:
        form = f"x:{type(value).__name__}:{value!r}"  # matches no filter value
    digest = hashlib.blake2b(form.encode("utf-8", "surrogatepass"), digest_size=16)
    return digest.hexdigest()


def metadata_tags(metadata: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The ``(metadata key, value_key)`` pairs the index holds of a row: its ``agent_id``,
    ``conversation_id`` and every custom (``extra``) key with a scalar value."""
    tags: list[tuple[str, str]] = []
    for key, value in metadata.items():
        if not isinstance(key, str) or key.startswith("chroma:"):
            continue
        if key in RESERVED_KEYS and key not in FIELDS:
            continue
        if isinstance(value, str | bool | int | float):
            tags.append((key, value_key(value)))
    return tuple(sorted(tags))


def _field(name: object, value: object) -> tuple[str, str]:
    """``(name, metadata key)`` of a filter field, or the error naming it."""
    if not isinstance(name, str):
        raise InvalidInputError(f"where: field names must be strings, got {shown(name)}")
    if name in FIELDS:
        return name, name
    if name.startswith(EXTRA_PREFIX):
        key = name[len(EXTRA_PREFIX) :]
        if not 1 <= len(key) <= MAX_EXTRA_KEY_CHARS or key[0] in "$#" or "\x00" in key:
            raise InvalidInputError(
                f"where: {shown(name)} names no valid extra key (1-{MAX_EXTRA_KEY_CHARS} "
                f"characters, not starting with $ or #), got value {shown(value)}"
            )
        if key in RESERVED_KEYS or key.startswith("chroma:"):
            raise InvalidInputError(
                f"where: {shown(name)} names a reserved key, which extra never holds "
                f"(filter {' or '.join(FIELDS)} directly), got value {shown(value)}"
            )
        return name, key
    hint = ""
    if name == "extra":
        hint = "; write an extra key as 'extra.KEY' (e.g. {'extra.project': 'p'})"
    elif name.startswith("$"):
        hint = "; only $eq and $in, inside a field's condition"
    raise InvalidInputError(
        f"where: unknown field {shown(name)} = {shown(value)} (filterable: "
        f"{', '.join(FIELDS)}, {EXTRA_PREFIX}KEY){hint}"
    )


def _scalar(name: str, value: object, *, identifier: bool) -> ExtraValue:
    """``value`` if it is a scalar a ``name`` field can hold, else the error naming both."""
    if identifier:
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_ID_CHARS:
            raise InvalidInputError(
                f"where: {name} must be compared with a string of 1-{MAX_ID_CHARS} "
                f"characters, got {shown(value)}"
            )
        return value
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidInputError(f"where: {name} value must fit in 64 bits, got {shown(value)}")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"where: {name} value must be finite, got {shown(value)}")
        return float(value)
    raise InvalidInputError(
        f"where: {name} must be compared with a str, int, float or bool (or "
        f"{{'$in': [...]}}), got {shown(value)}"
    )


def _kind(value: ExtraValue) -> str:
    return "bool" if isinstance(value, bool) else type(value).__name__


def _condition(name: str, key: str, condition: object) -> FieldCondition:
    identifier = name in FIELDS
    if not isinstance(condition, Mapping):
        return FieldCondition(name, key, (_scalar(name, condition, identifier=identifier),), "$eq")
    if len(condition) != 1:
        raise InvalidInputError(
            f"where: {name} needs exactly one operator ($eq or $in), got {shown(condition)}"
        )
    [(operator, operand)] = condition.items()
    if operator == "$eq":
        return FieldCondition(name, key, (_scalar(name, operand, identifier=identifier),), "$eq")
    if operator != "$in":
        raise InvalidInputError(
            f"where: {name} has unknown operator {shown(operator)} (only $eq and $in), "
            f"got {shown(condition)}"
        )
    if isinstance(operand, str | bytes) or not isinstance(operand, Sequence):
        raise InvalidInputError(f"where: {name} $in takes a list, got {shown(operand)}")
    if not 1 <= len(operand) <= MAX_IN_VALUES:
        raise InvalidInputError(
            f"where: {name} $in takes 1-{MAX_IN_VALUES} values, got {len(operand):,}"
        )
    values = tuple(_scalar(name, item, identifier=identifier) for item in operand)
    kinds = {_kind(value) for value in values}
    if len(kinds) > 1:  # Chroma refuses a mixed list
        raise InvalidInputError(
            f"where: {name} $in values must all be of one type, got {shown(list(operand))}"
        )
    return FieldCondition(name, key, tuple(dict.fromkeys(values)), "$in")


def parse_where(where: WhereInput) -> MemoryFilter | None:
    """``where`` checked: a ``MemoryFilter``, or None when it filters nothing (None, ``{}``).

    Raises ``InvalidInputError`` (one line, naming the field and the value) for an unknown
    field, an operator other than ``$eq`` and ``$in``, or a value no memory field holds.
    """
    if where is None or isinstance(where, MemoryFilter):
        return where
    if not isinstance(where, Mapping):
        raise InvalidInputError(
            f"where must be a mapping of fields to values, like {{'agent_id': 'x'}}, "
            f"got {shown(where)}"
        )
    conditions = []
    for name, condition in where.items():
        field, key = _field(name, condition)
        conditions.append(_condition(field, key, condition))
    return MemoryFilter(tuple(conditions)) if conditions else None


def index_condition(where: MemoryFilter, alias: str = "d") -> tuple[str, list[Any]]:
    """The filter as SQL on ``index_docs`` (as ``alias``) and its parameters: tagged
    documents whose tags meet every condition (the same statement on SQLite and PostgreSQL)."""
    parts = [f"{alias}.tagged = 1"]
    params: list[Any] = []
    for condition in where.conditions:
        keys = condition.value_keys()
        parts.append(
            "EXISTS (SELECT 1 FROM index_tags t WHERE t.user_key = "
            f"{alias}.user_key AND t.doc_key = {alias}.doc_key AND t.field = ? "
            f"AND t.value IN ({', '.join('?' * len(keys))}))"
        )
        params.extend([condition.key, *keys])
    return " AND ".join(parts), params
