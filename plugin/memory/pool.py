"""A query's candidate pool: Chroma's nearest memories and the lexical index's best matches.

Dense candidates come from one Chroma query per user (every query vector at once) that
returns ids and distances only: documents and metadata are fetched later, and only for the
members that can reach the top (``plugin.memory.pruning``). Lexical candidates come from the
memory's index (``lexical_search``, BM25 over the user's own memories). Members the index
found but Chroma did not are read from Chroma by id, embeddings only, for their cosine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from kernel.batch import DISTANCE_TOLERANCE
from plugin.errors import StoreError

__all__ = [
    "IndexedFields",
    "LexicalHits",
    "MemoryIndexReads",
    "QueryPool",
    "Rehearsal",
    "dense_pools",
    "with_lexical",
]

FloatArray = npt.NDArray[np.float64]

class LexicalHits(Protocol):
    """What a lexical search returns: ids best first and their BM25 scores."""

    @property
    def ids(self) -> Sequence[str]:
        """Memory ids, best match first."""
        ...

    @property
    def scores(self) -> npt.NDArray[np.float64]:
        """BM25 scores aligned with ``ids`` (higher is better)."""
        ...


class Rehearsal(Protocol):
    """How often, and when last, each memory was recalled: the counts ranking reads."""

    @property
    def recall_counts(self) -> npt.NDArray[np.int64]:
        """Times each memory was surfaced by a committed turn."""
        ...

    @property
    def last_recalled(self) -> npt.NDArray[np.float64]:
        """Epoch seconds of each memory's last recall, NaN when never."""
        ...

    @property
    def epochs(self) -> npt.NDArray[np.float64]:
        """Epoch seconds of each memory's timestamp, NaN when unknown."""
        ...

    @property
    def ranked(self) -> IndexedFields | None:
        """Each memory's text, timestamp, significance, valence and episode flag as the index
        holds them, when they were asked for."""
        ...


class IndexedFields(Protocol):
    """What ranking reads of each memory's Chroma row, as its index holds it, aligned."""

    @property
    def known(self) -> npt.NDArray[np.bool_]:
        """Whether the index holds all of a memory's fields (else Chroma's row is read)."""
        ...

    @property
    def texts(self) -> Sequence[str | None]:
        """The memories' texts."""
        ...

    @property
    def timestamps(self) -> Sequence[str | None]:
        """Their ISO timestamps, as Chroma's metadata holds them."""
        ...

    @property
    def significance(self) -> npt.NDArray[np.float64]:
        """Their significance in [0, 1]."""
        ...

    @property
    def emotional_valence(self) -> npt.NDArray[np.float64]:
        """Their valence in [-1, 1]."""
        ...

    @property
    def episodes(self) -> npt.NDArray[np.bool_]:
        """Whether each is an episode."""
        ...


class MemoryIndexReads(Protocol):
    """The reads recall makes of a memory's index (``ChromaMemory.index``)."""

    def lexical_search(self, user_id: str, query: str, limit: int) -> LexicalHits:
        """The user's best ``limit`` BM25 matches for ``query``, best first."""
        ...

    def rehearsal(self, user_id: str, ids: Sequence[str], *, fields: bool = False) -> Rehearsal:
        """The recall counts and last recall times of ``ids``, aligned with them (with
        ``fields``, their ranked fields too)."""
        ...

    def newest_epoch(self, user_id: str) -> float | None:
        """Epoch seconds of the user's newest memory, or None when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class QueryPool:
    """One query's candidates: ids with their cosine distance and BM25.

    Chroma's nearest come first, in its order, then the members only the index found.
    """

    ids: list[str]
    distances: FloatArray
    """Cosine distance ``1 - cos`` in [0, 2]: Chroma's own for its nearest, computed from the
    stored embedding for the others."""
    bm25: FloatArray | None = None
    """BM25 of each member (0 for those the lexical search did not return); None when the
    pool had no lexical search."""

    def __len__(self) -> int:
        """How many members the pool has."""
        return len(self.ids)


def _distances(values: Sequence[float], where: str) -> FloatArray:
    raw = np.asarray(values, dtype=np.float64)
    low, high = -DISTANCE_TOLERANCE, 2 + DISTANCE_TOLERANCE
    if raw.size and (not np.isfinite(raw).all() or raw.min() < low or raw.max() > high):
        bad = next(d for d in raw.tolist() if not low <= d <= high)
        raise StoreError(
            f"Chroma returned a distance of {bad!r} outside the cosine range [0, 2] for "
            f"{where}; is the collection really cosine?"
        )
    clipped: FloatArray = np.clip(raw, 0.0, 2.0)
    return clipped


def dense_pools(result: Mapping[str, Any], where: str) -> list[QueryPool]:
    """A Chroma ``query`` result (ids and distances, one list per vector) as pools."""
    pools: list[QueryPool] = []
    for ids, distances in zip(result["ids"], result["distances"], strict=True):
        if len(ids) != len(distances):
            raise StoreError(
                f"Chroma returned {len(ids)} ids but {len(distances)} distances for {where}"
            )
        pools.append(QueryPool(list(ids), _distances(distances, where)))
    return pools


def with_lexical(
    pool: QueryPool,
    hits: LexicalHits,
    vector: FloatArray,
    read_missing: Callable[[list[str]], Mapping[str, Any]],
) -> QueryPool:
    """``pool`` joined with the lexical hits: members only the index found are read by
    ``read_missing(ids)`` (a Chroma ``get`` of their embeddings) and get their cosine with the
    query ``vector``; ids Chroma no longer has drop out."""
    scores = np.asarray(hits.scores, dtype=np.float64)
    by_id = dict(zip(hits.ids, scores.tolist(), strict=True))
    have = set(pool.ids)
    missing = [ident for ident in hits.ids if ident not in have]
    ids, distances = list(pool.ids), pool.distances
    if missing:
        got = read_missing(missing)
        found = list(got["ids"])
        if found:
            vectors = np.asarray(got["embeddings"], dtype=np.float64)
            query = np.asarray(vector, dtype=np.float64)
            norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(query))
            cos = np.clip((vectors @ query) / np.where(norms > 0, norms, 1.0), -1.0, 1.0)
            ids += found
            distances = np.concatenate([distances, 1.0 - cos])
    bm25 = np.array([by_id.get(ident, 0.0) for ident in ids], dtype=np.float64)
    return QueryPool(ids, distances, bm25)
