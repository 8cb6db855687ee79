"""Which time rule a query gets, and the age each memory is scored at under it.

Three rules, chosen from the query's own words (``plugin.memory.time_cues``):

* **named period** ("in May 2022", "last week", "3 days ago"): a memory's age is the days
  between it and that period, 0 inside it; relevance is fused (lexical and dense);
* **current state of the user**: an explicit state word (now, currently, still, these days,
  ...), or a first- or second-person question with no past or history cue. Relevance is the
  cosine itself (word overlap is ignored: what shares the question's words is mostly the old
  canonical statement, or someone else's news, while an update paraphrases), and a memory's
  age is counted from the user's newest memory rather than from the clock, so a user who comes
  back after a year gets the same order;
* **anything else** (third-person questions, past or history cues: did, was, when, how many
  times, ever, before, ...): time-neutral, age 0, fused relevance.

The kernel then scores ``clamp(1 - age / horizon, floor, 1)`` with the recall's weights
(horizon 120 days, floor 0.10 by default). Every hit carries its rule's one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import numpy as np
import numpy.typing as npt

from kernel.retrieval import SECONDS_PER_DAY
from plugin.memory.time_cues import (
    PAST_CUE,
    PERSON_CUE,
    STATE_CUE,
    days_from_period,
    named_period,
)

__all__ = [
    "QueryTime",
    "TimeRuleKind",
    "classify_query",
    "rule_ages",
    "rule_reasons",
    "state_reference",
]

FloatArray = npt.NDArray[np.float64]
TimeRuleKind = Literal["period", "state", "event"]


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
    found = STATE_CUE.search(query)
    if found is not None:
        return QueryTime("state", f"state word {_cue(found.group(0))!r}")
    found = PAST_CUE.search(query)
    if found is not None:
        return QueryTime("event", f"past or history cue {_cue(found.group(0))!r}")
    found = PERSON_CUE.search(query)
    if found is not None:
        return QueryTime("state", f"about the user ({_cue(found.group(0))!r}), present tense")
    return QueryTime("event", "third person, no state word")


def _cue(word: str) -> str:
    return " ".join(word.lower().split())


def state_reference(now: datetime, newest_epoch: float | None) -> float:
    """The instant a current-state query ages memories from: the user's newest memory, but
    never after ``now``."""
    now_epoch = now.timestamp()
    return now_epoch if newest_epoch is None else min(now_epoch, newest_epoch)


def rule_ages(
    rule: QueryTime, epochs: FloatArray, now: datetime, newest_epoch: float | None
) -> FloatArray:
    """The age in days each memory (by its epoch) is scored at under ``rule``.

    NaN epochs (no usable timestamp) stay NaN, so the kernel gives them its fallback recency.
    """
    if rule.kind == "period":
        assert rule.period is not None
        return days_from_period(epochs, rule.period)
    if rule.kind == "event":
        return np.where(np.isnan(epochs), np.nan, 0.0)
    reference = state_reference(now, newest_epoch)
    ages: FloatArray = np.maximum(0.0, reference - epochs) / SECONDS_PER_DAY
    return ages


def rule_reasons(rule: QueryTime, ages: FloatArray, cosines: FloatArray) -> list[str]:
    """One line per memory saying why it is scored at its age (and, for the state rule, which
    relevance)."""
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
    return [
        f"current-state query ({rule.reason}): similarity = cosine {cosine:.2f}, word overlap "
        f"ignored; {_days(age)} older than the user's newest memory"
        for age, cosine in zip(ages.tolist(), cosines.tolist(), strict=True)
    ]


def _days(age: float) -> str:
    if age != age:  # NaN: no usable timestamp (a stored row always has one)
        return "unknown days"
    return "1 day" if f"{age:.0f}" == "1" else f"{age:.0f} days"
