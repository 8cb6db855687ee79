"""Labelled queries from recall's own pools: what weight fitting learns from.

Each ``PoolQuery`` names the memories that answer it (one or several). ``label_pools`` asks
the store for the query's whole recall pool, prepared as recall scores it (the relevance as
the kernel's distance, the time rule's age, the index's recall count), and keeps the pool as
a ``LabelledQuery`` with the positions of the answers it holds. Answers the pool missed are
counted: no weight can rank a memory recall never sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np
from tqdm import tqdm

from affect_memory.experiments.data import LabelledQuery
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, RecallSettings

__all__ = ["LabelledPools", "PoolQuery", "PoolSource", "label_pools", "labelled_pool"]


class PoolSource(Protocol):
    """What pools come from: ``ChromaMemory.candidates``."""

    def candidates(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        candidates: int | None = None,
        settings: RecallSettings | None = None,
    ) -> tuple[MemoryCandidate, ...]:
        """Every member of the query's recall pool, prepared for the kernel."""
        ...


@dataclass(frozen=True, slots=True)
class PoolQuery:
    """A query, whose memories it searches, and the ids of the memories that answer it."""

    query: str
    user_id: str
    relevant_ids: tuple[str, ...]
    mood_valence: float = 0.0

    def __post_init__(self) -> None:
        """Refuse a query without answers: it could not be labelled."""
        if isinstance(self.relevant_ids, str) or not self.relevant_ids:
            raise InvalidInputError(
                f"PoolQuery.relevant_ids must name at least one memory id, got "
                f"{self.relevant_ids!r}"
            )
        object.__setattr__(self, "relevant_ids", tuple(dict.fromkeys(self.relevant_ids)))


@dataclass(frozen=True, slots=True)
class LabelledPools:
    """The labelled pools of many queries, and what their pools missed."""

    queries: tuple[LabelledQuery, ...]
    settings: RecallSettings
    """The recall settings the pools were built with."""
    dropped: int = 0
    """Queries none of whose answers were in the pool (left out: nothing to learn from)."""
    dropped_labels: int = 0
    """The answers of those queries."""

    @property
    def labels_outside(self) -> int:
        """Answers, over every query, that were not in their query's pool."""
        return sum(query.outside for query in self.queries) + self.dropped_labels

    @property
    def labels(self) -> int:
        """Answers over every query."""
        return sum(len(query.targets) for query in self.queries) + self.labels_outside

    @property
    def coverage(self) -> float:
        """The share of answers that were in their query's pool."""
        return 1.0 - self.labels_outside / self.labels if self.labels else 0.0


def labelled_pool(
    pool: Sequence[MemoryCandidate], query: PoolQuery
) -> tuple[LabelledQuery | None, int]:
    """One prepared pool as a ``LabelledQuery`` and how many answers it missed (None when it
    holds none of them)."""
    position = {candidate.id: index for index, candidate in enumerate(pool)}
    found = [position[ident] for ident in query.relevant_ids if ident in position]
    outside = len(query.relevant_ids) - len(found)
    if not found:
        return None, outside
    for candidate in pool:
        if candidate.age_days is None:
            raise InvalidInputError(
                f"candidate {candidate.id!r} carries no age_days: pools must come from "
                "ChromaMemory.candidates"
            )
    labelled = LabelledQuery(
        distances=np.array([c.distance for c in pool], dtype=np.float64),
        ages_days=np.array([c.age_days for c in pool], dtype=np.float64),
        significance=np.array([c.significance for c in pool], dtype=np.float64),
        recall_counts=np.array([c.recall_count for c in pool], dtype=np.int64),
        episodes=np.array([c.episode for c in pool], dtype=np.bool_),
        memory_valences=np.array([c.emotional_valence for c in pool], dtype=np.float64),
        relevant=found[0],
        mood_valence=query.mood_valence,
        also_relevant=tuple(found[1:]),
        user_id=query.user_id,
        outside=outside,
    )
    return labelled, outside


def label_pools(
    source: PoolSource,
    queries: Iterable[PoolQuery],
    *,
    now: str | datetime | float,
    settings: RecallSettings = DEFAULT_RECALL_SETTINGS,
    progress: bool = False,
) -> LabelledPools:
    """Every query's recall pool at ``now``, labelled with the answers it holds."""
    labelled: list[LabelledQuery] = []
    dropped = dropped_labels = 0
    items = list(queries)
    for query in tqdm(items, desc="pools", unit="query", disable=not progress):
        if not isinstance(query, PoolQuery):
            raise InvalidInputError(f"expected PoolQuery, got {type(query).__name__}")
        pool = source.candidates(
            query.query,
            query.user_id,
            mood_valence=query.mood_valence,
            now=now,
            settings=settings,
        )
        result, outside = labelled_pool(pool, query)
        if result is None:
            dropped += 1
            dropped_labels += outside
        else:
            labelled.append(result)
    return LabelledPools(tuple(labelled), settings, dropped, dropped_labels)
