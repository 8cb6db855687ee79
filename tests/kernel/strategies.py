"""Hypothesis strategies for kernel values, and the modest settings every property test uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from affect_memory.kernel import (
    BUILTIN_INTENTS,
    AffectState,
    AttachmentState,
    EmotionMap,
    Goals,
    MemoryCandidate,
    Mood,
    Personality,
    RelationshipState,
)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Small enough that the whole kernel suite stays well under a minute."""

STAGES = ("stranger", "acquaintance", "friend", "close", "intimate")
EMOTION_NAMES = (
    "joy",
    "distress",
    "admiration",
    "reproach",
    "gratitude",
    "relief",
    "surprise",
    "fear",
    "hope",
    "unease",
    "fatigue",
    "longing",
    "disappointment",
    "satisfaction",
)
NOW = datetime(2026, 1, 31, tzinfo=UTC)


def signed() -> st.SearchStrategy[float]:
    """Floats in [-1, 1], with the interesting edges made likely."""
    return st.one_of(
        st.sampled_from([-1.0, -0.3, -0.2, -0.15, 0.0, 0.15, 0.2, 0.3, 1.0]),
        st.floats(-1.0, 1.0, allow_nan=False),
    )


def unit() -> st.SearchStrategy[float]:
    """Floats in [0, 1], with the interesting edges made likely."""
    return st.one_of(
        st.sampled_from([0.0, 0.05, 0.15, 0.3, 0.5, 1.0]),
        st.floats(0.0, 1.0, allow_nan=False),
    )


def moods() -> st.SearchStrategy[Mood]:
    """Any valid PAD mood."""
    return st.builds(Mood, valence=signed(), arousal=signed(), dominance=signed())


def personalities() -> st.SearchStrategy[Personality]:
    """Any valid OCEAN personality."""
    return st.builds(
        Personality,
        openness=unit(),
        conscientiousness=unit(),
        extraversion=unit(),
        agreeableness=unit(),
        neuroticism=unit(),
    )


def goals() -> st.SearchStrategy[Goals]:
    """Any valid set of appraisal goals."""
    return st.builds(
        Goals, rapport=unit(), intellectual=unit(), autonomy=unit(), respect=unit(), honesty=unit()
    )


def emotion_dicts() -> st.SearchStrategy[dict[str, float]]:
    """Plain emotion dicts with known and unknown names."""
    names = st.one_of(st.sampled_from(EMOTION_NAMES), st.text(min_size=1, max_size=8))
    return st.dictionaries(names, unit(), max_size=8)


def emotion_maps() -> st.SearchStrategy[EmotionMap]:
    """Valid immutable emotion maps."""
    return emotion_dicts().map(EmotionMap)


def stage_labels() -> st.SearchStrategy[str]:
    """Ladder labels and a few unknown ones."""
    return st.one_of(st.sampled_from(STAGES), st.sampled_from(["mystery", "Friend", "x" * 64]))


def short_text(max_size: int = 80) -> st.SearchStrategy[str]:
    """Text with spaces, punctuation, quotes and odd whitespace."""
    alphabet = st.one_of(
        st.sampled_from(list(' \t\n".,;:!?—-…\u3000\u0085\u001c\ufeff\u00a0')),
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
    )
    return st.text(alphabet, max_size=max_size)


def affect_states() -> st.SearchStrategy[AffectState]:
    """Any valid affect state."""
    return st.builds(
        AffectState,
        mood=moods(),
        personality=personalities(),
        goals=goals(),
        relationship=st.builds(
            RelationshipState, stage=stage_labels(), trust_score=unit(), comfort=unit()
        ),
        attachment=st.builds(AttachmentState, longing=unit()),
        baseline_valence=signed(),
        occ_carry=emotion_maps(),
        carried_thought=st.none() | short_text(),
        expectation=st.none() | st.sampled_from(["", "she was upset", "tell me later"]),
    )


def intents() -> st.SearchStrategy[str]:
    """Built-in intents and unknown ones (including wrong case)."""
    return st.one_of(st.sampled_from(BUILTIN_INTENTS), st.sampled_from(["casual", "GREETING", ""]))


def zoned_timestamps() -> st.SearchStrategy[str]:
    """Zoned ISO-8601 strings within a year either side of NOW, in assorted offsets."""
    offsets = st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), UTC, timezone(timedelta(hours=-8))]
    )
    moments = st.floats(-400.0, 400.0, allow_nan=False).map(lambda days: NOW - timedelta(days=days))
    return st.builds(lambda moment, zone: moment.astimezone(zone).isoformat(), moments, offsets)


def candidates(ids: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[MemoryCandidate]:
    """Valid memory candidates, with or without a timestamp."""
    return st.builds(
        MemoryCandidate,
        id=ids if ids is not None else st.sampled_from(["a", "b", "c", "B", "é", "a1", "z"]),
        text=st.text(max_size=20),
        distance=st.floats(0.0, 2.0, allow_nan=False),
        timestamp=st.none() | zoned_timestamps(),
        significance=unit(),
        recall_count=st.integers(0, 200),
        episode=st.booleans(),
        emotional_valence=signed(),
    )
