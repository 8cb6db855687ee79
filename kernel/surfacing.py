"""Presence surfacing: a pure transform from affect state to a small display payload."""

from __future__ import annotations

from typing import Any

from affect_memory.kernel.models import AffectState, CognitionState
from affect_memory.kernel.parameters import ParameterModel, Text

__all__ = [
    "DEFAULT_PRESENCE_LABELS",
    "PresenceLabels",
    "build_presence_vector",
    "clean_text",
    "presence_line",
]

CARRIED_THOUGHT_PREVIEW_CHARS = 300
_SENTENCE_ENDS = ".!?"
_TRAILING_PUNCTUATION = ",;:—-"


class PresenceLabels(ParameterModel):
    """The wording of presence lines and modes; replace it to localize or rebrand."""

    reflecting: Text = "still reflecting"
    follow_up: Text = "holding a follow-up"
    carrying: Text = "carrying a thread"
    pattern: Text = "holding a pattern"
    idle: Text = "here with you"
    mode_reflecting: Text = "reflecting"
    mode_quiet: Text = "quiet"
    source: Text = "affect_state"


DEFAULT_PRESENCE_LABELS = PresenceLabels()


def clean_text(value: object, max_len: int) -> str | None:
    """Trim, unquote and collapse whitespace; cut long text at a sentence end or a word.

    Non-strings and text that cleans to nothing give None; ``max_len <= 0`` means no limit.
    """
    if not isinstance(value, str):
        return None
    text = " ".join(value.strip().strip('"').split())
    if not text:
        return None
    if max_len <= 0 or len(text) <= max_len:
        return text
    window = text[:max_len]
    sentence_end = max(window.rfind(mark) for mark in _SENTENCE_ENDS)
    if sentence_end >= max_len * 0.5:
        return window[: sentence_end + 1].rstrip()
    space = window.rfind(" ")
    if space < 0:
        return window.rstrip()
    cut = window[:space].rstrip().rstrip(_TRAILING_PUNCTUATION)
    return cut + "…" if cut else window.rstrip()


def presence_line(
    reflection_pending: bool,
    due_intention: bool,
    carried_thought: bool,
    open_thread: bool,
    *,
    labels: PresenceLabels = DEFAULT_PRESENCE_LABELS,
) -> str:
    """The compact presence line, by fixed priority: reflection, intention, thought, thread."""
    if reflection_pending:
        return labels.reflecting
    if due_intention:
        return labels.follow_up
    if carried_thought:
        return labels.carrying
    if open_thread:
        return labels.pattern
    return labels.idle


def build_presence_vector(
    state: AffectState,
    cognition: CognitionState | None = None,
    *,
    labels: PresenceLabels = DEFAULT_PRESENCE_LABELS,
) -> dict[str, Any]:
    """The presence payload of a state; the carried-thought flag comes from the state itself."""
    cognition = cognition or CognitionState()
    carrying = clean_text(state.carried_thought, CARRIED_THOUGHT_PREVIEW_CHARS) is not None
    mood, relationship = state.mood, state.relationship
    trust = round(relationship.trust_score, 4)
    longing = round(state.attachment.longing, 4)
    return {
        "trust": trust,
        "valence": round(mood.valence, 4),
        "arousal": round(mood.arousal, 4),
        "longing": longing,
        "awaiting": cognition.reflection_pending,
        "mode": labels.mode_reflecting if cognition.reflection_pending else labels.mode_quiet,
        "line": presence_line(
            cognition.reflection_pending,
            cognition.due_intention,
            carrying,
            cognition.open_thread,
            labels=labels,
        ),
        "affect": {
            "valence": round(mood.valence, 4),
            "arousal": round(mood.arousal, 4),
            "dominance": round(mood.dominance, 4),
        },
        "relationship": {
            "stage": relationship.stage,
            "trust": trust,
            "longing": longing,
            "comfort": round(relationship.comfort, 4),
        },
        "cognition": {
            "reflection_pending": cognition.reflection_pending,
            "carried_thought": carrying,
            "due_intention": cognition.due_intention,
            "open_thread": cognition.open_thread,
            "intentionality": cognition.intentionality,
            "curiosity": cognition.curiosity,
        },
        "source": labels.source,
    }
