"""An adopted collection as the recall pipeline reads a user's memories.

``AdoptedReads`` is both of what ``affect_memory.memory.recall.pipeline.HybridRecall`` reads:
the user's collection (``UserCollectionReads``) and the memory index (``MemoryIndexReads``).
Its ``query`` asks the adopted collection for the user's nearest rows with their documents and
metadata, maps each with the adoption defaults (``affect_memory.memory.admin.adopt``) and
returns the ids and distances of those that can be memories, listing the others in
``left_out``; its ``rehearsal`` then serves the mapped rows' fields as an index serves a
memory's, so ranking reads nothing more of Chroma. One reader serves one recall.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from affect_memory.errors import StoreError
from affect_memory.memory.filters import MemoryFilter
from affect_memory.memory.recall.pool import FilteredMembers, PooledSearch

__all__ = ["AdoptedReads", "MappedRow"]

MappedRow = tuple[str, Mapping[str, Any]]
"""A row's text and its metadata as adoption maps it (user, timestamp, epoch, affect)."""


class _AdoptedFields:
    """The mapped rows' ranked fields, as a memory index serves them (``IndexedFields``)."""

    def __init__(self, rows: Sequence[MappedRow]) -> None:
        """Columns of ``rows``, every field known."""
        self.known = np.ones(len(rows), dtype=np.bool_)
        self.texts: list[str | None] = [text for text, _ in rows]
        self.timestamps: list[str | None] = [meta["timestamp"] for _, meta in rows]
        self.significance = np.array([m["significance"] for _, m in rows], dtype=np.float64)
        self.emotional_valence = np.array(
            [m["emotional_valence"] for _, m in rows], dtype=np.float64
        )
        self.episodes = np.array([bool(m["episode"]) for _, m in rows], dtype=np.bool_)
        self.embeddings: list[bytes | None] | None = None


class _AdoptedRehearsal:
    """The mapped rows' recall counts and timestamps (``Rehearsal``): the rows' own counts,
    and never recalled as far as affect-memory knows (it keeps no counts of adopted rows)."""

    def __init__(self, rows: Sequence[MappedRow]) -> None:
        """Columns of ``rows``."""
        self.recall_counts = np.array([int(m["recall_count"]) for _, m in rows], dtype=np.int64)
        self.last_recalled = np.full(len(rows), np.nan)
        self.epochs = np.array([m["timestamp_epoch"] for _, m in rows], dtype=np.float64)
        self.ranked: _AdoptedFields | None = _AdoptedFields(rows)


class AdoptedReads:
    """One recall's reads of one user's rows of an adopted collection, for the pipeline."""

    def __init__(
        self,
        user_id: str,
        *,
        query: Callable[[Any, int], Mapping[str, Any]],
        mapped: Callable[[str, object, Mapping[str, Any] | None], tuple[Any, str]],
        backend: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        """Read ``user_id``'s rows: ``query(vectors, n)`` is the collection's query of the
        user's nearest ``n`` rows (documents, metadata and distances), ``mapped`` maps a row as
        adoption does (None and why when it cannot be a memory), ``backend(action)`` guards a
        call to the store."""
        self._user_id = user_id
        self._query = query
        self._mapped = mapped
        self._backend = backend
        self._rows: dict[str, MappedRow] = {}
        self.left_out: list[str] = []
        """Ids of the rows the queries found that cannot be memories, in Chroma's order."""

    def of(self, user_id: str, *, create: bool) -> AdoptedReads | None:
        """This reader, for its own user only."""
        return self if user_id == self._user_id else None

    def backend(self, action: str) -> AbstractContextManager[None]:
        """The store's failures within as ``StoreError``s naming the collection."""
        return self._backend(action)

    def query(
        self,
        *,
        query_embeddings: Any,
        n_results: int,
        include: Sequence[str],
        where: Mapping[str, Any] | None = None,
    ) -> dict[str, list[list[Any]]]:
        """The user's nearest ``n_results`` rows for each vector: the ids and distances of
        those that can be memories (the pipeline passes no ``where`` to an adopted reader)."""
        got = self._query(query_embeddings, n_results)
        found: dict[str, list[list[Any]]] = {"ids": [], "distances": []}
        for ids, texts, metas, distances in zip(
            got["ids"], got["documents"], got["metadatas"], got["distances"], strict=True
        ):
            kept: list[str] = []
            near: list[Any] = []
            for ident, text, meta, distance in zip(ids, texts, metas, distances, strict=True):
                mapped, _why = self._mapped(ident, text, meta)
                if mapped is None:
                    self.left_out.append(ident)
                    continue
                self._rows[ident] = (text, mapped)
                kept.append(ident)
                near.append(distance)
            found["ids"].append(kept)
            found["distances"].append(near)
        return found

    def get(self, *, ids: Sequence[str], include: Sequence[str]) -> dict[str, list[Any]]:
        """The mapped rows of ``ids`` the queries found (the pipeline reads none: the
        rehearsal already serves every field)."""
        held = [ident for ident in ids if ident in self._rows]
        return {
            "ids": held,
            "documents": [self._rows[ident][0] for ident in held],
            "metadatas": [self._rows[ident][1] for ident in held],
            "embeddings": [None] * len(held),
        }

    def rehearsal(
        self, user_id: str, ids: Sequence[str], *, fields: bool = False, embeddings: bool = False
    ) -> _AdoptedRehearsal:
        """The found rows' counts, timestamps and ranked fields, aligned with ``ids``."""
        return _AdoptedRehearsal([self._rows[ident] for ident in ids])

    def pool_search(
        self,
        user_id: str,
        query: str,
        limit: int,
        *,
        known: Sequence[str],
        k1: float = 1.2,
        b: float = 0.75,
        where: MemoryFilter | None = None,
        embeddings: bool = False,
        candidate_rows: bool = True,
    ) -> PooledSearch:
        """Refused: an adopted collection has no lexical index (it is recalled dense)."""
        raise StoreError("an adopted collection has no lexical index: import it to search words")

    def filtered_members(
        self, user_id: str, where: MemoryFilter, known: Collection[str]
    ) -> FilteredMembers:
        """Refused: an adopted collection is recalled without a filter."""
        raise StoreError("an adopted collection is recalled without a filter")

    def newest_epoch(self, user_id: str) -> float | None:
        """Refused: only a planned (hybrid) recall asks, and an adopted one is dense."""
        raise StoreError("an adopted collection is recalled dense, without a plan")

    def memory_count(self, user_id: str) -> int:
        """Refused: only a planned (hybrid) recall asks, and an adopted one is dense."""
        raise StoreError("an adopted collection is recalled dense, without a plan")
