"""The age each memory is scored at under its query's plan, and the reason each hit prints.

A query's plan (``affect_memory.memory.recall.plan``) names one of four kinds:

* **period** ("in May 2022", "last week", "3 days ago"): a memory's age is the days between
  it and that period, 0 inside it; relevance is fused (lexical and dense);
* **former** state ("Where did I live before Berlin?", "the user's previous job"): relevance
  is fused, and a memory's age is the days it was written *after* the oldest of the query's
  closest memories, so the superseded fact outranks its update;
* **state**, the current state (a state word, or a question about the user or nobody in
  particular with no past cue, however the user is named): relevance is ``((1 - w) cosine' +
  w share + topic_weight x s x topic agreement) x (1 + change_gain x s if the memory reports
  a change)``, at most 1, where ``share`` is the share of the query's words the memory
  matches (BM25 over the query's total idf, ``QueryPool.lexical_share``), ``w`` the
  settings' ``state_lexical_weight`` (small: what shares the question's words is mostly the
  old canonical statement, but an update that repeats them should win on them), ``s`` the
  memory's ``cue_scales`` (1 up to ``state_cue_words`` words, less for a longer message), and
  ``cosine'`` blends in the memory's cosine with the query's closest memory (``feedback``: an
  update resembles the fact it replaces); the topic agreement (``life_topics``) says how
  surely the memory is about the same part of life as the question, and an update says what
  changed (``change_cues``). A memory's age is counted back from the newest of the query's
  closest memories (never after ``now``), not from the clock or the user's latest chatter: a
  user who comes back after a year gets the same order, and small talk written since the
  update does not age it;
* **event** (past tense, history cues, or a question about somebody else): time-neutral,
  age 0, fused relevance.

"The query's closest memories" are the ``anchor_members`` pool members of highest relevance.
Under both state rules ages count at ``state_age_scale`` (half): with the recall's 120-day
horizon a fact reaches the floor once it is 216 days older than the anchor, and a loosely related
memory written last week cannot outrank an update written two months ago on recency alone.
The kernel then scores ``clamp(1 - age / horizon, floor, 1)`` with the recall's weights
(horizon 120 days, floor 0.10 by default). Every hit carries its rule's one-line reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.retrieval import SECONDS_PER_DAY
from affect_memory.memory.recall.periods import days_from_period
from affect_memory.memory.recall.plan import QueryPlan
from affect_memory.memory.settings import RecallSettings

__all__ = [
    "ages_by_date",
    "cue_scales",
    "rule_ages",
    "rule_anchor",
    "rule_reasons",
    "state_reference",
    "state_similarity",
]

FloatArray = npt.NDArray[np.float64]


def ages_by_date(rule: QueryPlan | None) -> bool:
    """Whether ``rule`` (None: the dense ranking's calendar) ages a memory by its date: every
    rule but the event rule, which scores each dated memory at age 0."""
    return rule is None or rule.kind != "event"


def state_reference(now: datetime, newest_epoch: float | None) -> float:
    """The instant a current-state query ages memories from: its anchor (by default the
    user's newest memory), but never after ``now``."""
    now_epoch = now.timestamp()
    return now_epoch if newest_epoch is None else min(now_epoch, newest_epoch)


def rule_anchor(
    rule: QueryPlan,
    epochs: FloatArray,
    relevance: FloatArray,
    newest_epoch: float | None,
    settings: RecallSettings,
) -> float | None:
    """The date a state rule ages the pool from: the newest (current state) or the oldest
    (former state) of its ``settings.anchor_members`` most relevant members with a usable
    timestamp.

    Other rules, and a pool without one usable timestamp, keep ``newest_epoch``.
    """
    if rule.kind not in ("state", "former"):
        return newest_epoch
    usable = ~np.isnan(epochs)
    if not usable.any():
        return newest_epoch
    candidates = np.flatnonzero(usable)
    # most relevant first; ties keep pool order
    chosen = candidates[
        np.argsort(-relevance[candidates], kind="stable")[: settings.anchor_members]
    ]
    dates = epochs[chosen]
    return float(dates.max() if rule.kind == "state" else dates.min())


def rule_ages(
    rule: QueryPlan,
    epochs: FloatArray,
    now: datetime,
    newest_epoch: float | None,
    settings: RecallSettings,
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
        return later * settings.state_age_scale
    reference = state_reference(now, newest_epoch)
    ages: FloatArray = np.maximum(0.0, reference - epochs) / SECONDS_PER_DAY
    return ages * settings.state_age_scale


def cue_scales(texts: Sequence[str | None], settings: RecallSettings) -> FloatArray:
    """How much of each memory its topic and its change cue speak for: 1 for a statement of
    up to ``settings.state_cue_words`` words, that many over its words for a longer message
    (a "new" or "now" in a long chat turn says little of a change of state); 1 where the text
    is unknown (None), the most it can be."""
    limit = settings.state_cue_words
    counts = np.array([limit if text is None else len(text.split()) for text in texts], float)
    scales: FloatArray = np.minimum(1.0, limit / np.maximum(counts, 1.0))
    return scales


def state_similarity(
    cosines: FloatArray,
    changes: npt.NDArray[np.bool_],
    settings: RecallSettings,
    topics: FloatArray | None = None,
    shares: FloatArray | None = None,
    scales: FloatArray | None = None,
) -> FloatArray:
    """A current-state query's relevance: the cosine (blended with the closest memory's,
    ``affect_memory.memory.recall.feedback``) clipped to [0, 1] and the share of the query the
    memory matches (``shares``, ``QueryPool.lexical_share``; none: 0) weighted ``1 - w`` and ``w``
    (``state_lexical_weight``), plus ``topic_weight`` times the topic agreement (``topics``;
    none: 0), times ``1 + change_gain`` where the memory reports a change (``changes``), at
    most 1; the topic term and the gain count at each memory's ``cue_scales`` (none: 1)."""
    weight = settings.state_lexical_weight
    scale = np.ones(len(cosines)) if scales is None else scales
    base = (1.0 - weight) * np.clip(cosines, 0.0, 1.0)
    if shares is not None:
        base = base + weight * shares
    if topics is not None:
        base = base + settings.topic_weight * topics * scale
    gain = np.where(changes, 1.0 + settings.change_gain * scale, 1.0)
    gained: FloatArray = np.minimum(1.0, base * gain)
    return gained


def rule_reasons(
    rule: QueryPlan,
    ages: FloatArray,
    cosines: FloatArray,
    settings: RecallSettings,
    *,
    changes: Sequence[str | None] | None = None,
    topics: tuple[FloatArray, str] | None = None,
    closest: FloatArray | None = None,
    shares: FloatArray | None = None,
    scales: FloatArray | None = None,
) -> list[str]:
    """One line per memory saying why it is scored at its age (and, for the state rule, which
    relevance: ``changes`` holds each memory's change cue, None where it reports none;
    ``topics`` each memory's topic agreement and the query's likeliest topic; ``closest``
    each memory's cosine with the query's closest memory, ``affect_memory.memory.recall.feedback``;
    ``shares`` the share of the query each matches; ``scales`` each one's ``cue_scales``)."""
    if rule.kind == "period":
        assert rule.period is not None
        start, end = (datetime.fromtimestamp(edge, UTC).date().isoformat() for edge in rule.period)
        return [
            f"{_days(age)} from {start}..{end}, the period the query names" for age in ages.tolist()
        ]
    if rule.kind == "event":
        return [f"time-neutral (age 0): {rule.reason}"] * len(ages)
    scale, members = settings.state_age_scale, settings.anchor_members
    real = ages / scale
    if rule.kind == "former":
        return [
            f"former-state query ({rule.reason}): {_days(days)} newer than the oldest of the "
            f"query's {members} closest memories, aged at {scale:g}"
            for days in real.tolist()
        ]
    count = len(ages)
    words = list(changes) if changes is not None else [None] * count
    agreements: list[float | None] = [None] * count
    topic = ""
    if topics is not None:
        agreements, topic = list(topics[0].tolist()), topics[1]
    resemblances: list[float | None] = (
        list(closest.tolist()) if closest is not None else [None] * count
    )
    scaled = [1.0] * count if scales is None else list(scales.tolist())
    matched: list[float | None] = list(shares.tolist()) if shares is not None else [None] * count
    return [
        f"current-state query ({rule.reason}): similarity = "
        f"{_similarity_text(settings, cosine, resembles, share, agreed, topic, cue)}"
        f"{_gain(settings, word, cue)}; {_days(days)} older than the newest of the "
        f"query's {members} closest memories, aged at {scale:g}"
        for days, cosine, word, agreed, resembles, share, cue in zip(
            real.tolist(),
            cosines.tolist(),
            words,
            agreements,
            resemblances,
            matched,
            scaled,
            strict=True,
        )
    ]


def _similarity_text(
    settings: RecallSettings,
    cosine: float,
    resembles: float | None,
    share: float | None,
    agreed: float | None,
    topic: str,
    cue: float,
) -> str:
    dense = f"cosine {cosine:.2f}"
    if resembles is not None:
        weight = settings.feedback_weight
        dense = f"({1 - weight:g} x {dense} + {weight:g} x {resembles:.2f} with the closest memory)"
    lexical = settings.state_lexical_weight
    parts = [dense if lexical == 0 else f"{1 - lexical:g} x {dense}"]
    if lexical > 0:
        parts.append(f"{lexical:g} x words matched {share or 0.0:.2f}")
    if agreed is not None:
        topic_weight = f"{settings.topic_weight:g}" + (f" x {cue:.2f}" if cue < 1 else "")
        parts.append(f"{topic_weight} x topic agreement {agreed:.2f} on {topic!r}")
    return parts[0] if len(parts) == 1 else " + ".join(parts)


def _gain(settings: RecallSettings, word: str | None, cue: float) -> str:
    if word is None:
        return ""
    length = "" if cue >= 1 else f", at {cue:.2f} for its length"
    return f", x {1 + settings.change_gain * cue:.3g} (reports a change: {word!r}{length})"


def _days(age: float) -> str:
    if age != age:  # NaN: no usable timestamp (a stored row always has one)
        return "unknown days"
    return "1 day" if f"{age:.0f}" == "1" else f"{age:.0f} days"
