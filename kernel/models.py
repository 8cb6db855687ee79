"""The immutable, validated value types of the kernel: moods, traits, states, candidates."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, StringConstraints
from pydantic_core import core_schema

from affect_memory.kernel.bounds import (
    CosineDistance,
    NonNegativeFloat,
    NonNegativeInt,
    SignedUnit,
    UnitInterval,
    ZonedTimestamp,
    check_number,
)
from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "AffectState",
    "AttachmentState",
    "CognitionState",
    "DecodingParams",
    "EmotionMap",
    "FrozenModel",
    "Goals",
    "MemoryCandidate",
    "Mood",
    "Personality",
    "RelationshipState",
    "UntrustedContext",
    "as_emotion_map",
]

MAX_TEXT_CHARS = 4096
"""Longest memory text, carried thought or expectation the kernel accepts."""

EmotionName = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class FrozenModel(BaseModel):
    """Shared base of every kernel value: immutable, closed, finite, validated on defaults."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        validate_default=True,
        strict=False,
    )


class EmotionMap(Mapping[str, float]):
    """An immutable, hashable map from emotion name to an intensity in [0, 1]."""

    __slots__ = ("_values",)
    _values: dict[str, float]

    def __init__(self, values: Mapping[str, float] | None = None) -> None:
        checked: dict[str, float] = {}
        for name, value in (values or {}).items():
            if not isinstance(name, str) or not 1 <= len(name) <= 64:
                raise ValueError(f"emotion names must be 1-64 character strings, got {shown(name)}")
            try:
                checked[name] = check_number(value, 0.0, 1.0)
            except ValueError as error:
                raise ValueError(f"emotion {shown(name)} {error}") from None
        object.__setattr__(self, "_values", checked)

    def __getitem__(self, name: str) -> float:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._values) == dict(other)
        return NotImplemented

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EmotionMap is immutable")

    def __repr__(self) -> str:
        return f"EmotionMap({self._values!r})"

    def __reduce__(self) -> tuple[type[EmotionMap], tuple[dict[str, float]]]:
        return (EmotionMap, (dict(self._values),))

    def to_dict(self) -> dict[str, float]:
        """A plain, mutable copy."""
        return dict(self._values)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        values = handler.generate_schema(dict[EmotionName, UnitInterval])
        return core_schema.no_info_before_validator_function(
            _as_plain_mapping,
            core_schema.no_info_after_validator_function(cls, values),
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda value: dict(value), return_schema=core_schema.dict_schema()
            ),
        )


def _as_plain_mapping(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def as_emotion_map(value: object, argument: str) -> EmotionMap:
    """``value`` as a checked emotion map; None is an empty one, as in the reference.

    Anything else must map 1-64 character names to intensities in [0, 1]; otherwise
    ``InvalidInputError`` names ``argument`` and the bad entry.
    """
    if value is None:
        return EmotionMap()
    if isinstance(value, EmotionMap):
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"{argument} must be a mapping of emotion names to [0, 1] or None, got {shown(value)}"
        )
    try:
        return EmotionMap(value)
    except ValueError as error:
        raise InvalidInputError(f"{argument}: {error}") from None


class Mood(FrozenModel):
    """A PAD mood: pleasure (valence), arousal and dominance, each in [-1, 1]."""

    valence: SignedUnit = 0.0
    arousal: SignedUnit = 0.0
    dominance: SignedUnit = 0.0


class Personality(FrozenModel):
    """OCEAN traits in [0, 1]; only neuroticism and extraversion shape mood inertia today."""

    openness: UnitInterval = 0.8
    conscientiousness: UnitInterval = 0.72
    extraversion: UnitInterval = 0.45
    agreeableness: UnitInterval = 0.72
    neuroticism: UnitInterval = 0.15


class Goals(FrozenModel):
    """Appraisal goals in [0, 1]; each scales the fresh emotions an intent can raise."""

    rapport: UnitInterval = 0.8
    intellectual: UnitInterval = 0.8
    autonomy: UnitInterval = 0.7
    respect: UnitInterval = 0.85
    honesty: UnitInterval = 0.9


class RelationshipState(FrozenModel):
    """Where the relationship stands: a stage label, trust and comfort."""

    stage: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "stranger"
    trust_score: UnitInterval = 0.0
    comfort: UnitInterval = 0.0


class AttachmentState(FrozenModel):
    """Attachment values; longing above 0.3 surfaces as a state emotion."""

    longing: UnitInterval = 0.0


class AffectState(FrozenModel):
    """Everything the kernel carries from one turn to the next."""

    mood: Mood = Mood()
    personality: Personality = Personality()
    goals: Goals = Goals()
    relationship: RelationshipState = RelationshipState()
    attachment: AttachmentState = AttachmentState()
    baseline_valence: SignedUnit = 0.0
    occ_carry: EmotionMap = Field(default_factory=EmotionMap)
    carried_thought: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)] | None = None
    expectation: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)] | None = None


class CognitionState(FrozenModel):
    """Externally owned cognition flags that presence surfacing reads.

    ``carried_thought`` is accepted for callers' convenience but never trusted:
    presence derives it from the state's cleaned carried thought.
    """

    reflection_pending: bool = Field(default=False, strict=True)
    due_intention: bool = Field(default=False, strict=True)
    open_thread: bool = Field(default=False, strict=True)
    intentionality: bool = Field(default=False, strict=True)
    curiosity: bool = Field(default=False, strict=True)
    carried_thought: bool = Field(default=False, strict=True)


class DecodingParams(FrozenModel):
    """Sampling controls for generation; ``top_p`` is None when no mood is known."""

    temperature: NonNegativeFloat
    top_p: UnitInterval | None


class MemoryCandidate(FrozenModel):
    """One retrieved memory before scoring: its distance to the query and its features.

    ``text`` is required and ``significance`` defaults to a neutral 0.5, as in the reference.
    """

    id: Annotated[str, StringConstraints(min_length=1)]
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
    distance: CosineDistance
    timestamp: ZonedTimestamp | None = None
    significance: UnitInterval = 0.5
    recall_count: NonNegativeInt = 0
    episode: bool = Field(default=False, strict=True)
    emotional_valence: SignedUnit = 0.0
    age_days: NonNegativeFloat | None = None
    """The age recency is scored at, in days, when the retriever decided it (a time rule that
    ages memories by the question, not the calendar); None ages from ``timestamp`` to now.

    Not in the reference, which always ages from the timestamp; its fixtures never set it.
    """


class UntrustedContext(FrozenModel):
    """Lower-trust evidence for the model: memory texts and the carried thought, already bounded.

    Adapters must keep it out of the system prompt and mark it as data on the wire.
    """

    memory_texts: tuple[str, ...] = ()
    carried_thought: str | None = None

    def total_chars(self) -> int:
        """Characters across every evidence item."""
        return sum(map(len, self.memory_texts)) + len(self.carried_thought or "")
