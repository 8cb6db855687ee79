"""The validated memory record the plugin writes, its field checks and its Chroma metadata.

A record is checked whole when it is built: every timestamp is normalized to canonical UTC
ISO (see ``affect_memory.memory.timestamps``) and custom metadata is limited to scalars under
``extra``, where no key may shadow a field the plugin relies on (``user_id`` above all). Everything
Chroma would refuse later is refused here first, so a batch is accepted or refused whole:
lone surrogates anywhere (Chroma cannot encode them as UTF-8), NUL in ids, metadata keys
starting with ``$`` or ``#`` (Chroma's operators and ``#document``/``#embedding``), and numbers
that would not read back as written (``recall_count`` above 2**53 - 1, ints beyond int64).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, field_validator

from affect_memory.kernel.bounds import NonNegativeInt, SignedUnit, UnitInterval
from affect_memory.kernel.errors import shown
from affect_memory.kernel.models import MAX_TEXT_CHARS, FrozenModel
from affect_memory.memory.timestamps import normalize_timestamp

__all__ = [
    "DEFAULT_SIGNIFICANCE",
    "MAX_EXTRA_KEYS",
    "MAX_EXTRA_KEY_CHARS",
    "MAX_EXTRA_STRING_CHARS",
    "MAX_ID_CHARS",
    "MAX_RECALL_COUNT",
    "RESERVED_KEYS",
    "ExtraValue",
    "MemoryRecord",
    "check_identifier",
    "check_text",
]

DEFAULT_SIGNIFICANCE = 0.5
"""Significance of a record that gives none: the middle of [0, 1], neither minor nor vital."""

MAX_ID_CHARS = 512
"""Longest memory or user id accepted; ids are keys, not content."""

MAX_RECALL_COUNT = 2**53 - 1
"""Largest ``recall_count``: exact as an int64 in Chroma, as a float64 and in every JSON reader.

Turn writes stop counting there, so a count can never grow into one Chroma turns into a float.
"""

MAX_EXTRA_KEYS = 32
"""Most custom metadata keys per record (``extra``); metadata is for filtering, not payload."""

MAX_EXTRA_KEY_CHARS = 64
"""Longest custom metadata key."""

MAX_EXTRA_STRING_CHARS = MAX_TEXT_CHARS
"""Longest custom metadata string value (as long as a memory's text, 4,096 characters)."""

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

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_text(value: str) -> str:
    """``value`` unless it holds a lone surrogate, which no UTF-8 store can hold."""
    if _has_lone_surrogate(value):
        raise ValueError(
            f"must be valid Unicode text (it holds a lone surrogate, which cannot be stored as "
            f"UTF-8), got {shown(value)}"
        )
    return value


def check_identifier(value: object, field: str | None = None) -> str:
    """A non-empty id or user id of at most 512 characters, without NUL or lone surrogates.

    The ``ValueError`` starts with ``field`` when given (pydantic validators pass none: the
    error's location names the field).
    """
    label = f"{field} " if field else ""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{label}must be a non-empty string, got {shown(value)}")
    if len(value) > MAX_ID_CHARS:
        raise ValueError(f"{label}must be at most {MAX_ID_CHARS} characters, got {shown(value)}")
    if "\x00" in value:
        raise ValueError(f"{label}must not contain NUL characters, got {shown(value)}")
    if _has_lone_surrogate(value):
        raise ValueError(
            f"{label}must be valid Unicode (it holds a lone surrogate), got {shown(value)}"
        )
    return value


def _identifier_rules(value: str) -> str:
    if "\x00" in value:
        raise ValueError(f"must not contain NUL characters, got {shown(value)}")
    return value


def _unicode_first(value: object) -> object:
    """Name a lone surrogate before pydantic's strict string check reports it as raw data."""
    if isinstance(value, str):
        check_text(value)
    return value


def _canonical(field: str) -> BeforeValidator:
    return BeforeValidator(lambda value: normalize_timestamp(value, field=field).iso)


def _bounded_count(value: int) -> int:
    if value > MAX_RECALL_COUNT:
        raise ValueError(
            f"must be at most {MAX_RECALL_COUNT:,} (2**53 - 1, the largest count that reads "
            f"back exactly everywhere), got {shown(value)}"
        )
    return value


Identifier = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=MAX_ID_CHARS),
    AfterValidator(_identifier_rules),
    BeforeValidator(_unicode_first),
]
CanonicalTimestamp = Annotated[str, _canonical("timestamp")]
CanonicalRecalledAt = Annotated[str, _canonical("last_recalled_at")]
RecallCount = Annotated[NonNegativeInt, AfterValidator(_bounded_count)]


def _check_extra_value(key: str, value: object) -> ExtraValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > MAX_EXTRA_STRING_CHARS:
            raise ValueError(
                f"key {key!r} must be at most {MAX_EXTRA_STRING_CHARS:,} characters, "
                f"got {shown(value)}"
            )
        if _has_lone_surrogate(value):
            raise ValueError(f"key {key!r} holds a lone surrogate, got {shown(value)}")
        return value
    if type(value) is int:
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise ValueError(f"key {key!r} must fit in 64 bits, got {shown(value)}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"key {key!r} must be finite, got {shown(value)}")
        return float(value)  # a numpy float64 is a float subclass; Chroma wants a plain one
    raise ValueError(f"key {key!r} must be a str, int, float or bool, got {shown(value)}")


def _check_extra_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_EXTRA_KEY_CHARS:
        raise ValueError(
            f"keys must be 1-{MAX_EXTRA_KEY_CHARS} character strings, got {shown(key)}"
        )
    if key in RESERVED_KEYS or key.startswith("chroma:"):
        raise ValueError(
            f"key {key!r} is reserved by affect-memory and cannot be overridden "
            "(set the record's own field instead)"
        )
    if key[0] in "$#":
        raise ValueError(
            f"key {key!r} starts with {key[0]!r}, which Chroma reserves for its operators "
            "and fields ($and, #document, ...)"
        )
    if "\x00" in key or _has_lone_surrogate(key):
        raise ValueError(f"key {shown(key)} must be text without NUL or lone surrogates")
    return key


def _check_extra(value: object) -> dict[str, ExtraValue]:
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a mapping of scalar metadata, got {shown(value)}")
    if len(value) > MAX_EXTRA_KEYS:
        raise ValueError(f"may hold at most {MAX_EXTRA_KEYS} keys, got {len(value):,}")
    checked: dict[str, ExtraValue] = {}
    for key, item in value.items():
        checked[_check_extra_key(key)] = _check_extra_value(key, item)
    return checked


class MemoryRecord(FrozenModel):
    """One memory to store: its text, owner, time, affect features and scalar metadata."""

    id: Identifier
    text: Annotated[
        str,
        StringConstraints(strict=True, max_length=MAX_TEXT_CHARS),
        BeforeValidator(_unicode_first),
    ]
    user_id: Identifier
    timestamp: CanonicalTimestamp
    significance: UnitInterval = DEFAULT_SIGNIFICANCE
    episode: bool = Field(default=False, strict=True)
    emotional_valence: SignedUnit = 0.0
    recall_count: RecallCount = 0
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
            raise ValueError(f"must not be empty or blank, got {shown(value)}")
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
