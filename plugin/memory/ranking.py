"""Recall's ranking: stored rows through the kernel's one ranking path, out as ``RecallHit``s.

The rows' columns go to ``kernel.batch.rank_columns`` as they are, the path an engine turn's
candidates take too (ages from the epoch stored beside each timestamp), so a recall and a turn
over the same memories give the same bits.
"""

from __future__ import annotations

from datetime import datetime

from kernel.batch import rank_columns
from kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from plugin.memory.results import RecallHit
from plugin.memory.rows import StoredRows

__all__ = ["rank_rows"]


def rank_rows(
    rows: StoredRows,
    now: datetime,
    *,
    mood_valence: float = 0.0,
    limit: int = 6,
    congruence_on: bool = True,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> tuple[RecallHit, ...]:
    """The best ``limit`` of ``rows`` at ``now`` under a mood, each with its score breakdown."""
    if not len(rows):
        return ()
    columns = rows.columns
    ranked = rank_columns(
        columns,
        now,
        mood_valence=mood_valence,
        limit=limit,
        congruence_on=congruence_on,
        weights=weights,
    )
    scores = ranked.scores
    score, similarity = scores.score.tolist(), scores.similarity.tolist()
    recency, salience = scores.recency.tolist(), scores.salience.tolist()
    congruence, bonus = scores.congruence.tolist(), scores.episode_bonus.tolist()
    distance, significance = columns.distances.tolist(), columns.significance.tolist()
    counts, valences = columns.recall_counts.tolist(), columns.valences.tolist()
    return tuple(
        RecallHit(
            id=columns.ids[i],
            text=rows.texts[i],
            score=score[i],
            distance=distance[i],
            similarity=similarity[i],
            recency=recency[i],
            salience=salience[i],
            congruence=congruence[i],
            episode=bonus[i],
            timestamp=rows.timestamps[i],
            significance=significance[i],
            recall_count=counts[i],
            emotional_valence=valences[i],
        )
        for i in ranked.order
    )
