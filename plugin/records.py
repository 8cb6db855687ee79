"""The validated memory record the plugin writes, and its mapping to Chroma metadata.

A record is checked whole when it is built: every timestamp is normalized to canonical UTC
ISO (see ``plugin.timestamps``) and custom metadata is limited to scalars under ``extra``,
where no key may shadow a field the plugin relies on (``user_id`` above all).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StringConstraints, ValidationError, field_validator

from kernel.bounds import NonNegativeInt, SignedUnit, UnitInterval
from kernel.models import MAX_TEXT_CHARS, FrozenModel
from plugin.errors import RecordError, TimestampError
from plugin.timestamps import normalize_timestamp

__all__ = [
    "DEFAULT_SIGNIFICANCE",
    "MAX_ID_CHARS",
    "RESERVED_KEYS",
    "ExtraValue",
    "MemoryRecord",
    "parse_record",
    "validate_records",
]

DEFAULT_SIGNIFICANCE = 0.5
"""Significance of a record that gives none: the middle of [0, 1], neither minor nor vital."""

MAX_ID_CHARS = 512
"""Longest memory id accepted; ids are keys, not content."""

RESERVED_KEYS = frozenset(
    {
        "id",
        "text",
        "user_id",
        "agent_id",
        "conversation_id",
        "timestamp",
        "timestamp_epoch",
        "significance",
        "episode",
        "emotional_valence",
        "recall_count",
        "last_recalled_at",
        "last_recalled_epoch",
        "recall_turns",
    }
)
"""Metadata keys the plugin owns; ``extra`` may not use them (nor Chroma's ``chroma:`` prefix)."""

ExtraValue = str | int | float | bool
"""A custom metadata value: one scalar (Chroma also refuses None, dicts and numpy scalars)."""

_INT64 = 2**63


def _canonical(field: str) -> BeforeValidator:
    return BeforeValidator(lambda value: normalize_timestamp(value, field=field).iso)


Identifier = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_ID_CHARS)]
CanonicalTimestamp = Annotated[str, _canonical("timestamp")]
CanonicalRecalledAt = Annotated[str, _canonical("last_recalled_at")]


def _check_extra_value(key: str, value: object) -> ExtraValue:
    if isinstance(value, bool | str):
        return value
    if type(value) is int:
        if not -_INT64 <= value < _INT64:
            raise ValueError(f"key {key!r} must fit in 64 bits, got {value!r}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"key {key!r} must be finite, got {value!r}")
        return float(value)  # a numpy float64 is a float subclass; Chroma wants a plain one
    raise ValueError(f"key {key!r} must be a str, int, float or bool, got {value!r}")


def _check_extra(value: object) -> dict[str, ExtraValue]:
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping of scalar metadata, got {value!r}")
    checked: dict[str, ExtraValue] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 128:
            raise ValueError(f"keys must be 1-128 character strings, got {key!r}")
        if key in RESERVED_KEYS or key.startswith("chroma:"):
            raise ValueError(
                f"key {key!r} is reserved by affect-memory and cannot be overridden "
                "(set the record's own field instead)"
            )
        checked[key] = _check_extra_value(key, item)
    return checked


class MemoryRecord(FrozenModel):
    """One memory to store: its text, owner, time, affect features and scalar metadata."""

    id: Identifier
    text: Annotated[str, StringConstraints(strict=True, max_length=MAX_TEXT_CHARS)]
    user_id: Identifier
    timestamp: CanonicalTimestamp
    significance: UnitInterval = DEFAULT_SIGNIFICANCE
    episode: bool = Field(default=False, strict=True)
    emotional_valence: SignedUnit = 0.0
    recall_count: NonNegativeInt = 0
    agent_id: Identifier | None = None
    conversation_id: Identifier | None = None
    last_recalled_at: CanonicalRecalledAt | None = None
    extra: Annotated[dict[str, ExtraValue], BeforeValidator(_check_extra)] = Field(
        default_factory=dict
    )

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"must not be empty or blank, got {value!r}")
        return value

    @property
    def timestamp_epoch(self) -> float:
        """The timestamp in epoch seconds (stored beside the ISO text for range filters)."""
        return normalize_timestamp(self.timestamp).epoch

    def to_metadata(self) -> dict[str, ExtraValue]:
        """Chroma metadata: plain Python scalars only, no None values."""
        metadata: dict[str, ExtraValue] = dict(self.extra)
        metadata.update(
            user_id=self.user_id,
            timestamp=self.timestamp,
            timestamp_epoch=self.timestamp_epoch,
            significance=float(self.significance),
            episode=bool(self.episode),
            emotional_valence=float(self.emotional_valence),
            recall_count=int(self.recall_count),
        )
        if self.agent_id is not None:
            metadata["agent_id"] = self.agent_id
        if self.conversation_id is not None:
            metadata["conversation_id"] = self.conversation_id
        if self.last_recalled_at is not None:
            metadata["last_recalled_at"] = self.last_recalled_at
            metadata["last_recalled_epoch"] = normalize_timestamp(self.last_recalled_at).epoch
        return metadata

    @classmethod
    def from_stored(cls, id: str, text: str, metadata: Mapping[str, Any]) -> MemoryRecord:
        """Rebuild a record from a stored row; plugin bookkeeping keys are dropped."""
        fields = {
            key: metadata[key]
            for key in (
                "user_id",
                "timestamp",
                "significance",
                "episode",
                "emotional_valence",
                "recall_count",
                "agent_id",
                "conversation_id",
                "last_recalled_at",
            )
            if key in metadata
        }
        extra = {
            key: value
            for key, value in metadata.items()
            if key not in RESERVED_KEYS and not key.startswith("chroma:")
        }
        return cls.model_validate({"id": id, "text": text, **fields, "extra": extra})


def _explain(error: Mapping[str, Any]) -> tuple[str, bool]:
    """One line for one pydantic error, and whether it is a timestamp error."""
    loc = ".".join(str(part) for part in error.get("loc", ())) or "record"
    cause = (error.get("ctx") or {}).get("error")
    shown = repr(error.get("input"))
    if len(shown) > 120:
        shown = shown[:117] + "..."
    if isinstance(cause, TimestampError):
        return str(cause), True
    if isinstance(cause, Exception):
        return f"{loc} {cause}", False
    kind = error.get("type")
    if kind == "missing":
        return f"{loc} is required", False
    if kind == "extra_forbidden":
        return (
            f"{loc} is not a MemoryRecord field (custom metadata goes under 'extra'), got {shown}",
            False,
        )
    message = str(error.get("msg", "is invalid"))
    return f"{loc}: {message[:1].lower()}{message[1:]}, got {shown}", False


def parse_record(value: object, *, where: str = "record") -> MemoryRecord:
    """A ``MemoryRecord`` from a record or a mapping; errors name ``where``, the field and value."""
    if isinstance(value, MemoryRecord):
        return value
    if not isinstance(value, Mapping):
        raise RecordError(f"{where}: expected a MemoryRecord or a mapping, got {value!r}")
    try:
        return MemoryRecord.model_validate(value)
    except ValidationError as error:
        ident = value.get("id")
        label = f"{where} (id {ident!r})" if isinstance(ident, str) and ident else where
        message, is_timestamp = _explain(error.errors()[0])
        more = len(error.errors()) - 1
        suffix = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
        kind = TimestampError if is_timestamp else RecordError
        raise kind(f"{label}: {message}{suffix}") from None


def validate_records(
    items: Iterable[object], *, label: str = "record", first: int = 0
) -> tuple[MemoryRecord, ...]:
    """Validate a whole batch before anything is written; the first bad one is named by index.

    Ids must be unique within the batch (Chroma refuses a batch that repeats one).
    """
    records: list[MemoryRecord] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items, start=first):
        record = parse_record(item, where=f"{label} {index}")
        if record.id in seen:
            raise RecordError(
                f"{label} {index}: id {record.id!r} repeats {label} {seen[record.id]}"
            )
        seen[record.id] = index
        records.append(record)
    return tuple(records)
