"""Fixture JSON to kernel values and back: moods, traits, goals, flat states and turn results."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from affect_memory.conformance.schema import GOALS, PAD
from affect_memory.kernel.appraisal import DEFAULT_STAGE_LADDER
from affect_memory.kernel.bounds import check_number
from affect_memory.kernel.errors import FixtureError
from affect_memory.kernel.models import (
    AffectState,
    AttachmentState,
    EmotionMap,
    Goals,
    Mood,
    Personality,
    RelationshipState,
)

__all__ = [
    "flat_state",
    "goals",
    "mood",
    "pad_dict",
    "parse_now",
    "personality",
    "turn_dict",
    "unit",
]

_TRAITS = {
    "O": "openness",
    "C": "conscientiousness",
    "E": "extraversion",
    "A": "agreeableness",
    "N": "neuroticism",
}


def mood(data: Mapping[str, Any]) -> Mood:
    """A mood from ``{"valence", "arousal", "dominance"}``."""
    return Mood(valence=data["valence"], arousal=data["arousal"], dominance=data["dominance"])


def personality(data: Mapping[str, Any]) -> Personality:
    """Traits from OCEAN initials; absent ones keep their defaults."""
    return Personality(**{_TRAITS[key]: data[key] for key in _TRAITS if key in data})


def goals(data: Mapping[str, Any]) -> Goals:
    """Appraisal goals by name; absent ones keep their defaults."""
    return Goals(**{key: data[key] for key in GOALS if key in data})


def _stage_label(ordinal: int) -> str:
    # An ordinal off the ladder becomes an unknown label, which rests like the first stage:
    # exactly what baseline_weight gives (0.0) for an ordinal outside the ladder.
    if 1 <= ordinal <= len(DEFAULT_STAGE_LADDER.stages):
        return DEFAULT_STAGE_LADDER.stages[ordinal - 1]
    return f"unknown-stage-{ordinal}"


def flat_state(data: Mapping[str, Any]) -> AffectState:
    """An affect state from the flat fields of a kernel case (``STATE_FIELDS``)."""
    if "stage" in data and "stage_int" in data:
        raise FixtureError("give either 'stage' or 'stage_int', not both")
    if "stage" in data:
        stage = data["stage"]
    else:
        stage = _stage_label(data["stage_int"]) if "stage_int" in data else "stranger"
    return AffectState(
        mood=Mood(**{key: data[key] for key in PAD if key in data}),
        personality=personality(data),
        goals=goals(data),
        relationship=RelationshipState(
            stage=stage,
            trust_score=data.get("trust_score", 0.0),
            comfort=data.get("comfort", 0.0),
        ),
        attachment=AttachmentState(longing=data.get("longing", 0.0)),
        baseline_valence=data.get("baseline_valence", 0.0),
        carried_thought=data.get("carried_thought"),
    )


def pad_dict(value: Mood) -> dict[str, float]:
    """A mood as the fixture writes it."""
    return {"valence": value.valence, "arousal": value.arousal, "dominance": value.dominance}


def turn_dict(outcome_state: AffectState, active: EmotionMap) -> dict[str, Any]:
    """An appraised turn as the fixture writes it (``TURN_OUT``)."""
    return {
        "mood": pad_dict(outcome_state.mood),
        "baseline_valence": outcome_state.baseline_valence,
        "active_emotions": active.to_dict(),
        "occ_carry": outcome_state.occ_carry.to_dict(),
    }


def unit(value: Any, name: str, low: float = -1.0, high: float = 1.0) -> float:
    """A number within [low, high], or a ``FixtureError`` naming ``name``."""
    try:
        return check_number(value, low, high)
    except ValueError as error:
        raise FixtureError(f"{name} {error}") from None


def parse_now(text: str) -> datetime:
    """A case's own ``now``: zoned ISO-8601."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise FixtureError(f"now is not an ISO-8601 timestamp: {text!r}") from None
    if moment.tzinfo is None:
        raise FixtureError(f"now must carry a UTC offset: {text!r}")
    return moment
