"""Recall's hits: ranked rows out as ``RecallHit``s that explain their scores.

The pipeline (``affect_memory.memory.recall.pipeline``) ranks rows through the kernel's one
ranking path (``affect_memory.kernel.batch.rank_columns``), the path an engine turn's candidates
take too, so a recall and a turn over the same memories give the same bits; ``explained_hits``
turns that ranking, hybrid or dense, into hits that carry what each similarity was made of and
why each memory was aged as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.batch import RankedColumns
from affect_memory.memory.chroma.rows import StoredRows
from affect_memory.memory.recall.plan import PlanKind
from affect_memory.memory.results import RecallHit, Relevance

__all__ = ["CALENDAR_RULE", "Explanation", "explained_hits"]

FloatArray = npt.NDArray[np.float64]

CALENDAR_RULE = "calendar age: days from the memory to now (dense recall)"
"""The time rule line of the dense recall, which ages every memory by the calendar."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """Per ranked row (aligned with the rows): what its similarity and its age came from."""

    distances: FloatArray
    """Each row's cosine distance to the query, ``1 - cos`` (Chroma's for its nearest, computed
    from the stored embedding for a member only the lexical search added)."""
    ages: FloatArray
    calendar_ages: FloatArray
    reasons: list[str]
    last_recalled: FloatArray
    """Epoch seconds of each row's last recall, NaN when never."""
    dense: FloatArray | None = None
    bm25: FloatArray | None = None
    lexical: FloatArray | None = None
    fused: FloatArray | None = None
    topic: FloatArray | None = None
    closest: FloatArray | None = None
    share: FloatArray | None = None
    scale: FloatArray | None = None
    changes: list[str | None] | None = None
    """Each row's change cue (a current-state question's), None where it reports none."""
    plan: PlanKind | None = None
    """The query's plan kind (None: the dense recall)."""
    weights: dict[str, float] = field(default_factory=dict)
    """The weights the similarity was made with, by the part they weigh."""


def _part(values: FloatArray | None, index: int) -> float | None:
    return None if values is None else float(values[index])


def _moment(epoch: float) -> str | None:
    if math.isnan(epoch):
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="microseconds")


def explained_hits(
    rows: StoredRows, ranked: RankedColumns, explanation: Explanation
) -> tuple[RecallHit, ...]:
    """The ranked rows as hits, best first, each with its score breakdown and explanation."""
    columns, scores = rows.columns, ranked.scores
    return tuple(
        RecallHit(
            id=columns.ids[i],
            text=rows.texts[i],
            score=float(scores.score[i]),
            distance=float(explanation.distances[i]),
            similarity=float(scores.similarity[i]),
            recency=float(scores.recency[i]),
            salience=float(scores.salience[i]),
            congruence=float(scores.congruence[i]),
            episode=float(scores.episode_bonus[i]),
            timestamp=rows.timestamps[i],
            significance=float(columns.significance[i]),
            recall_count=int(columns.recall_counts[i]),
            emotional_valence=float(columns.valences[i]),
            relevance=Relevance(
                cosine=1.0 - float(explanation.distances[i]),
                dense=_part(explanation.dense, i),
                bm25=_part(explanation.bm25, i),
                lexical=_part(explanation.lexical, i),
                fused=_part(explanation.fused, i),
                topic=_part(explanation.topic, i),
                closest=_part(explanation.closest, i),
                share=_part(explanation.share, i),
                cue_scale=_part(explanation.scale, i),
                change=None if explanation.changes is None else explanation.changes[i],
                weights=explanation.weights,
            ),
            plan=explanation.plan,
            age_days=float(explanation.ages[i]),
            calendar_age_days=float(explanation.calendar_ages[i]),
            time_rule=explanation.reasons[i],
            last_recalled_at=_moment(float(explanation.last_recalled[i])),
        )
        for i in ranked.order
    )
