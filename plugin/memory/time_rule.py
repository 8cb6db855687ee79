"""Which time rule a query gets, and the age each memory is scored at under it.

Four rules, chosen from the query's own words (``plugin.memory.time_cues``):

* **named period** ("in May 2022", "last week", "3 days ago"): a memory's age is the days
  between it and that period, 0 inside it; relevance is fused (lexical and dense);
* **former state of the user** ("Where did I live before Berlin?", "What did I use to do?",
  "my previous job"): a first- or second-person question with a pointer to an earlier state.
  Relevance is fused, and a memory's age is the days it was written *after* the oldest of the
  query's closest memories, so the superseded fact outranks its update;
* **current state of the user**: an explicit state word (now, currently, still, these days,
  lately, no longer, ...), or a first- or second-person question with no past or history cue.
  Relevance is ``(cosine' + TOPIC_WEIGHT x topic agreement) x (1 + CHANGE_GAIN if the memory
  reports a change)``, at most 1, where ``cosine'`` blends in the memory's cosine with the
  query's closest memory (``plugin.memory.feedback``: an update resembles the fact it
  replaces): word overlap is ignored (what shares the question's words is
  mostly the old canonical statement, or someone else's news, while an update paraphrases);
  the topic agreement (``plugin.memory.life_topics``) says how surely the memory is about the
  same part of life as the question, which an update is even when it shares no words with
  it; and an update says what changed (``plugin.memory.change_cues``), the fact it replaces
  does not. A memory's age is counted back from the newest of the query's closest memories
  (never after ``now``), not from the clock or the user's latest chatter: a user who comes
  back after a year gets the same order, and small talk written since the update does not
  age it;
* **anything else** (third-person questions, past or history cues: did, was, when, how many
  times, ever, before, ..., or a simple-past verb without have/has: "Who taught me chess?"):
  time-neutral, age 0, fused relevance. The tenseless cues (before, when, how often, how long)
  count only outside a present-tense question about the user: "What do I drink before work?"
  and "When is my wedding?" ask about the current state.

"The query's closest memories" are the ``ANCHOR_MEMBERS`` pool members of highest relevance.
Under both state rules ages count at ``STATE_AGE_SCALE`` (half): with the recall's 120-day
horizon a fact is floored once it is 240 days older than the anchor, and a loosely related
memory written last week cannot outrank an update written two months ago on recency alone.
The kernel then scores ``clamp(1 - age / horizon, floor, 1)`` with the recall's weights
(horizon 120 days, floor 0.10 by default). Every hit carries its rule's one-line reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import numpy.typing as npt

from kernel.retrieval import SECONDS_PER_DAY
from plugin.memory import feedback
from plugin.memory.time_cues import (
    FORMER_CUE,
    PAST_AUX,
    PAST_CUE,
    PAST_VERB,
    PERFECT_CUE,
    PERSON_CUE,
    PRESENT_AUX,
    STATE_CUE,
    TENSE_NEUTRAL,
    days_from_period,
    named_period,
)

__all__ = [
    "ANCHOR_MEMBERS",
    "CHANGE_GAIN",
    "STATE_AGE_SCALE",
    "TOPIC_WEIGHT",
    "QueryTime",
    "TimeRuleKind",
    "classify_query",
    "rule_ages",
    "rule_anchor",
    "rule_reasons",
    "state_reference",
    "state_similarity",
]

FloatArray = npt.NDArray[np.float64]
TimeRuleKind = Literal["period", "state", "former", "event"]

ANCHOR_MEMBERS = 3
"""How many of a pool's most relevant members the state rules take their anchor date from.

Three, not five: in a small store the five closest often hold unrelated newer small talk,
whose date then ages a current fact (blind stale-versus-current sets, README "Retrieval")."""
STATE_AGE_SCALE = 0.5
"""The share of its days a memory is aged at under the state rules (half: a 240-day horizon)."""
CHANGE_GAIN = 0.2
"""A current-state query's relevance of a memory that reports a change is 1.2 times what it
is otherwise, (cosine + ``TOPIC_WEIGHT`` x topic agreement) x 1.2, at most 1: chosen on five
blind stale-versus-current sets and checked on a sixth (README)."""
TOPIC_WEIGHT = 0.3
"""A current-state query's relevance of a memory is its cosine plus 0.3 times their topic
agreement (in [0, 1]), before the change gain multiplies the sum: chosen on six
stale-versus-current sets, checked on three written after under a rule declared before
scoring (README)."""


@dataclass(frozen=True, slots=True)
class QueryTime:
    """The rule a query gets, the cue that chose it, and the period it names (if any)."""

    kind: TimeRuleKind
    reason: str
    period: tuple[float, float] | None = None

    @property
    def uses_lexical(self) -> bool:
        """Whether relevance fuses word overlap in (every rule but the current state's)."""
        return self.kind != "state"


def classify_query(query: str, now: datetime) -> QueryTime:
    """The time rule of ``query`` at ``now``: named period, current state, or time-neutral."""
    period = named_period(query, now)
    if period is not None:
        return QueryTime("period", "names a period", period)
    person = PERSON_CUE.search(query)
    # "What do I drink before work?": a tenseless cue in a present question about the user
    present = (
        person is not None
        and PRESENT_AUX.search(query) is not None
        and PAST_AUX.search(query) is None
    )
    found = _first_cue(FORMER_CUE, query, skip_neutral=present)
    if found is not None and person is not None:
        return QueryTime("former", f"earlier state of the user ({found!r})")
    state = STATE_CUE.search(query)
    if state is not None:
        return QueryTime("state", f"state word {_cue(state.group(0))!r}")
    found = _first_cue(PAST_CUE, query, skip_neutral=present)
    if found is not None:
        return QueryTime("event", f"past or history cue {found!r}")
    verb = PAST_VERB.search(query)
    if verb is not None and PERFECT_CUE.search(query) is None:
        return QueryTime("event", f"past-tense verb {_cue(verb.group(0))!r}")
    if person is not None:
        return QueryTime("state", f"about the user ({_cue(person.group(0))!r}), present tense")
    return QueryTime("event", "third person, no state word")


def _cue(word: str) -> str:
    return " ".join(word.lower().split())


def _first_cue(pattern: re.Pattern[str], query: str, *, skip_neutral: bool) -> str | None:
    """The first cue ``pattern`` finds in ``query`` (normalised), passing over the
    tense-neutral ones (``TENSE_NEUTRAL``) when ``skip_neutral``."""
    for match in pattern.finditer(query):
        cue = _cue(match.group(0))
        if not (skip_neutral and cue in TENSE_NEUTRAL):
            return cue
    return None


def state_reference(now: datetime, newest_epoch: float | None) -> float:
    """The instant a current-state query ages memories from: its anchor (by default the
    user's newest memory), but never after ``now``."""
    now_epoch = now.timestamp()
    return now_epoch if newest_epoch is None else min(now_epoch, newest_epoch)


def rule_anchor(
    rule: QueryTime, epochs: FloatArray, relevance: FloatArray, newest_epoch: float | None
) -> float | None:
    """The date a state rule ages the pool from: the newest (current state) or the oldest
    (former state) of its ``ANCHOR_MEMBERS`` most relevant members with a usable timestamp.

    Other rules, and a pool without one usable timestamp, keep ``newest_epoch``.
    """
    if rule.kind not in ("state", "former"):
        return newest_epoch
    usable = ~np.isnan(epochs)
    if not usable.any():
        return newest_epoch
    candidates = np.flatnonzero(usable)
    # most relevant first; ties keep pool order
    chosen = candidates[np.argsort(-relevance[candidates], kind="stable")[:ANCHOR_MEMBERS]]
    dates = epochs[chosen]
    return float(dates.max() if rule.kind == "state" else dates.min())


def rule_ages(
    rule: QueryTime, epochs: FloatArray, now: datetime, newest_epoch: float | None
) -> FloatArray:
    """The age in days each memory (by its epoch) is scored at under ``rule``.

    ``newest_epoch`` is the state rules' anchor (``rule_anchor``): the current state ages what
    is older than it, the former state what is newer. NaN epochs (no usable timestamp) stay
    NaN, so the kernel gives them its fallback recency.
    """
    if rule.kind == "period":
        assert rule.period is not None
        return days_from_period(epochs, rule.period)
    if rule.kind == "event":
        return np.where(np.isnan(epochs), np.nan, 0.0)
    if rule.kind == "former":
        if newest_epoch is None:
            return np.where(np.isnan(epochs), np.nan, 0.0)
        later: FloatArray = np.maximum(0.0, epochs - newest_epoch) / SECONDS_PER_DAY
        return later * STATE_AGE_SCALE
    reference = state_reference(now, newest_epoch)
    ages: FloatArray = np.maximum(0.0, reference - epochs) / SECONDS_PER_DAY
    return ages * STATE_AGE_SCALE


def state_similarity(
    cosines: FloatArray, changes: npt.NDArray[np.bool_], topics: FloatArray | None = None
) -> FloatArray:
    """A current-state query's relevance: the cosine (blended with the closest memory's,
    ``plugin.memory.feedback``) clipped to [0, 1] plus ``TOPIC_WEIGHT``
    times the topic agreement (``topics``; none: 0), times ``1 + CHANGE_GAIN`` where the memory
    reports a change (``changes``), at most 1."""
    base = np.clip(cosines, 0.0, 1.0)
    if topics is not None:
        base = base + TOPIC_WEIGHT * topics
    gained: FloatArray = np.minimum(1.0, base * np.where(changes, 1.0 + CHANGE_GAIN, 1.0))
    return gained


def rule_reasons(
    rule: QueryTime,
    ages: FloatArray,
    cosines: FloatArray,
    changes: Sequence[str | None] | None = None,
    topics: tuple[FloatArray, str] | None = None,
    closest: FloatArray | None = None,
) -> list[str]:
    """One line per memory saying why it is scored at its age (and, for the state rule, which
    relevance: ``changes`` holds each memory's change cue, None where it reports none;
    ``topics`` each memory's topic agreement and the query's likeliest topic; ``closest``
    each memory's cosine with the query's closest memory, ``plugin.memory.feedback``)."""
    if rule.kind == "period":
        assert rule.period is not None
        start, end = (
            datetime.fromtimestamp(edge, UTC).date().isoformat() for edge in rule.period
        )
        return [
            f"{_days(age)} from {start}..{end}, the period the query names" for age in ages.tolist()
        ]
    if rule.kind == "event":
        return [f"time-neutral (age 0): {rule.reason}"] * len(ages)
    real = ages / STATE_AGE_SCALE
    if rule.kind == "former":
        return [
            f"former-state query ({rule.reason}): {_days(days)} newer than the oldest of the "
            f"query's {ANCHOR_MEMBERS} closest memories, aged at {STATE_AGE_SCALE:g}"
            for days in real.tolist()
        ]
    words = list(changes) if changes is not None else [None] * len(ages)
    agreements: list[float | None] = [None] * len(ages)
    topic = ""
    if topics is not None:
        agreements, topic = list(topics[0].tolist()), topics[1]
    resemblances: list[float | None] = [None] * len(ages)
    if closest is not None:
        resemblances = list(closest.tolist())
    return [
        f"current-state query ({rule.reason}): similarity = "
        f"{_similarity_text(cosine, resembles, agreed, topic)}"
        f"{_gain(word)}, word overlap ignored; {_days(days)} older than the newest of the "
        f"query's {ANCHOR_MEMBERS} closest memories, aged at {STATE_AGE_SCALE:g}"
        for days, cosine, word, agreed, resembles in zip(
            real.tolist(), cosines.tolist(), words, agreements, resemblances, strict=True
        )
    ]


def _similarity_text(
    cosine: float, resembles: float | None, agreed: float | None, topic: str
) -> str:
    parts = [f"cosine {cosine:.2f}"]
    if resembles is not None:
        weight = feedback.FEEDBACK_WEIGHT
        parts = [
            f"{1 - weight:g} x {parts[0]}",
            f"{weight:g} x {resembles:.2f} with the closest memory",
        ]
    if agreed is not None:
        parts.append(f"{TOPIC_WEIGHT:g} x topic agreement {agreed:.2f} on {topic!r}")
    return parts[0] if len(parts) == 1 else f"({' + '.join(parts)})"


def _gain(word: str | None) -> str:
    return "" if word is None else f" x {1 + CHANGE_GAIN:g} (reports a change: {word!r})"


def _days(age: float) -> str:
    if age != age:  # NaN: no usable timestamp (a stored row always has one)
        return "unknown days"
    return "1 day" if f"{age:.0f}" == "1" else f"{age:.0f} days"
