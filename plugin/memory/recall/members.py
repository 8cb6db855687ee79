"""What the index says of each pool member, filled in as ranking reads it.

A query's pool is ranked by the pruned fetch (``affect_memory.memory.recall.pruning``): each
member's best possible score bounds it, and only members that can still reach the top ``k``
are read. Most rules age a memory by its date, so every member's row (date, recall count,
ranked fields) is read before the bounds are drawn. The event rule scores every dated memory
at age 0, so a member's bound needs no date: its count is taken at the most a count can add
and its unknown fields at their best, and its row is read once the ranking reaches it (or
with every other row, when the first batch does not settle the top). The rows a lexical
search read with its hits are known from the start either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from affect_memory.memory.recall.pool import Rehearsal
from affect_memory.memory.records import MAX_RECALL_COUNT

__all__ = ["MemberFacts"]

FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True)
class MemberFacts:
    """Each pool member's index row as read so far, aligned with the pool.

    A member not ``read`` yet has no date (NaN), count 0 and unknown fields, as one the index
    does not hold; ``ceiling_counts`` gives it the largest count instead."""

    read: npt.NDArray[np.bool_]
    recall_counts: npt.NDArray[np.int64]
    last_recalled: FloatArray
    """Epoch seconds of the last recall, NaN when never (or not read)."""
    epochs: FloatArray
    known: npt.NDArray[np.bool_]
    """Whether the index holds all of the member's ranked fields (else Chroma's row is read)."""
    texts: list[str | None]
    timestamps: list[str | None]
    significance: FloatArray
    valences: FloatArray
    episodes: npt.NDArray[np.bool_]
    embeddings: list[bytes | None] | None
    """The embeddings the index holds, when they were read (every member read)."""

    @classmethod
    def of(cls, rehearsal: Rehearsal) -> MemberFacts:
        """The facts ``rehearsal`` holds of the whole pool, every member read."""
        n = len(rehearsal.recall_counts)
        indexed = rehearsal.ranked
        held = indexed.embeddings if indexed is not None else None
        return cls(
            read=np.ones(n, dtype=bool),
            recall_counts=np.array(rehearsal.recall_counts, dtype=np.int64),
            last_recalled=np.array(rehearsal.last_recalled, dtype=np.float64),
            epochs=np.array(rehearsal.epochs, dtype=np.float64),
            known=np.zeros(n, dtype=bool) if indexed is None else indexed.known.copy(),
            texts=[None] * n if indexed is None else list(indexed.texts),
            timestamps=[None] * n if indexed is None else list(indexed.timestamps),
            significance=np.zeros(n) if indexed is None else indexed.significance.copy(),
            valences=np.zeros(n) if indexed is None else indexed.emotional_valence.copy(),
            episodes=np.zeros(n, dtype=bool) if indexed is None else indexed.episodes.copy(),
            embeddings=None if held is None else list(held),
        )

    @classmethod
    def none_read(cls, n: int) -> MemberFacts:
        """The facts of a pool of ``n`` members before any row is read."""
        return cls(
            read=np.zeros(n, dtype=bool),
            recall_counts=np.zeros(n, dtype=np.int64),
            last_recalled=np.full(n, np.nan),
            epochs=np.full(n, np.nan),
            known=np.zeros(n, dtype=bool),
            texts=[None] * n,
            timestamps=[None] * n,
            significance=np.zeros(n),
            valences=np.zeros(n),
            episodes=np.zeros(n, dtype=bool),
            embeddings=None,
        )

    def unread(self, at: Sequence[int]) -> list[int]:
        """The positions among ``at`` whose rows are not read yet."""
        read = self.read
        return [index for index in at if not read[index]]

    def fill(self, at: Sequence[int], rehearsal: Rehearsal) -> None:
        """Take the rows ``rehearsal`` read of the members at positions ``at`` (aligned)."""
        if not at:
            return
        where = np.asarray(at, dtype=np.intp)
        self.read[where] = True
        self.recall_counts[where] = np.asarray(rehearsal.recall_counts, dtype=np.int64)
        self.last_recalled[where] = np.asarray(rehearsal.last_recalled, dtype=np.float64)
        self.epochs[where] = np.asarray(rehearsal.epochs, dtype=np.float64)
        indexed = rehearsal.ranked
        if indexed is None:
            return
        self.known[where] = indexed.known
        self.significance[where] = indexed.significance
        self.valences[where] = indexed.emotional_valence
        self.episodes[where] = indexed.episodes
        for index, text, stamp in zip(at, indexed.texts, indexed.timestamps, strict=True):
            self.texts[index] = text
            self.timestamps[index] = stamp

    def ceiling_counts(self) -> npt.NDArray[np.int64]:
        """The recall counts the members' best scores assume: their own where read, the
        largest a count can be where not (a count only ever raises a score)."""
        if self.read.all():
            return self.recall_counts
        capped: npt.NDArray[np.int64] = np.where(self.read, self.recall_counts, MAX_RECALL_COUNT)
        return capped
