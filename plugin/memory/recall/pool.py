"""A query's candidate pool: Chroma's nearest memories and the lexical index's best matches.

Dense candidates come from one Chroma query per user (every query vector at once) that
returns ids and distances only: documents and metadata are fetched later, and only for the
members that can reach the top (``affect_memory.memory.recall.pruning``). Lexical candidates come
from the memory's index (``lexical_search``, BM25 over the user's own memories).

Members the index found but Chroma did not get their cosine from the embedding the index
holds of them, read in the lexical search's own snapshot. Only a member whose embedding the
index lacks (written before it kept them) or holds of another dimension than the query's, or
whose write or forget is in flight (a pending journal entry), is read from Chroma by id,
embeddings only. Either way the cosine is computed from the values Chroma's client returned
(``affect_memory.memory.index.consistency.documents.embedding_bytes``: an index written through an
embedded client and read through an HTTP one, or the reverse, differs from Chroma's values in their
last bits), in the index's document order, which is the order Chroma's ``get`` returns them
in (the index numbers memories as they are written, and a backfill in Chroma's own order; a
crash's reconcile, which goes by id, may differ, which only exact ties of score could show).
So the pool is the same bits as a Chroma read's. An id Chroma no longer holds drops out as
before: the index holds exactly Chroma's ids except while a forget is in flight, and such an
id is the one read from Chroma.

The module is about 440 lines because it also types what a pool is read from (the user's
collection, the memory index and what each returns), beside the pool those reads fill.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from affect_memory.errors import StoreError
from affect_memory.kernel.batch import DISTANCE_TOLERANCE
from affect_memory.memory.filters import MemoryFilter

__all__ = [
    "FilteredMembers",
    "IndexedFields",
    "LexicalHits",
    "MemoryIndexReads",
    "PooledSearch",
    "QueryPool",
    "Rehearsal",
    "UserCollectionReads",
    "chroma_vector",
    "dense_pools",
    "index_vector",
    "index_vectors",
    "with_filtered",
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

    @property
    def absent(self) -> Sequence[str] | None:
        """The hits the search's ``known`` ids lack, in Chroma's order; None: not asked."""
        ...

    @property
    def vectors(self) -> Sequence[bytes | None]:
        """The index's embedding of each ``absent`` hit (little-endian float32 bytes, or
        float64 where Chroma's client returned values float32 does not hold), None where it
        must be read from Chroma."""
        ...

    @property
    def idf_total(self) -> float:
        """The sum of the query's terms' idf: what scales BM25 to a share of the query."""
        ...


class PooledSearch(Protocol):
    """A lexical search read with its pool's rows (``MemoryIndexReads.pool_search``)."""

    @property
    def hits(self) -> LexicalHits:
        """The lexical search's hits."""
        ...

    def rehearsal(self, ids: Sequence[str]) -> Rehearsal | None:
        """The rehearsal of ``ids`` with their ranked fields (and embeddings, if asked for)
        from the rows read, or None when one of them was not read."""
        ...

    def held(self, ids: Sequence[str]) -> tuple[list[int], Rehearsal]:
        """The positions in ``ids`` of those whose rows were read, and their rehearsal."""
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

    @property
    def embeddings(self) -> Sequence[bytes | None] | None:
        """Their embeddings as the index keeps them (None each where not held), when asked."""
        ...


class FilteredMembers(Protocol):
    """The memories meeting a filter, as the index holds them (``filtered_members``)."""

    @property
    def count(self) -> int:
        """How many of the user's memories meet the filter."""
        ...

    @property
    def ids(self) -> Sequence[str]:
        """Those the caller lacks (empty unless more meet it than the caller holds)."""
        ...

    @property
    def vectors(self) -> Sequence[bytes | None]:
        """The index's embedding of each of ``ids`` (None: read it from Chroma)."""
        ...


class UserCollectionReads(Protocol):
    """Where recall finds each user's Chroma collection (``UserCollections``; an adopted
    collection's reader, ``affect_memory.memory.admin.adopt``, is one too)."""

    def of(self, user_id: str, *, create: bool) -> Any | None:
        """``user_id``'s collection (Chroma's ``query`` and ``get``), or None when they have
        none."""
        ...

    def backend(self, action: str) -> AbstractContextManager[None]:
        """Translate the backend's failures within into errors that say what failed."""
        ...


class MemoryIndexReads(Protocol):
    """The reads recall makes of a memory's index (``ChromaMemory.index``)."""

    def pool_search(
        self,
        user_id: str,
        query: str,
        limit: int,
        *,
        known: Sequence[str],
        k1: float = ...,
        b: float = ...,
        where: MemoryFilter | None = ...,
        embeddings: bool = ...,
        candidate_rows: bool = ...,
    ) -> PooledSearch:
        """The user's best ``limit`` BM25 matches (``k1``, ``b``) for ``query``, best first
        (with the index's embeddings of the hits the dense candidates ``known`` lack; with
        ``where``, among the memories meeting it only), and the rehearsal of the hits and
        (with ``candidate_rows``) the candidates, in one snapshot."""
        ...

    def filtered_members(
        self, user_id: str, where: MemoryFilter, known: Collection[str]
    ) -> FilteredMembers:
        """How many of the user's memories meet ``where``, and the others than ``known``
        when there are more."""
        ...

    def rehearsal(
        self, user_id: str, ids: Sequence[str], *, fields: bool = False, embeddings: bool = False
    ) -> Rehearsal:
        """The recall counts and last recall times of ``ids``, aligned with them (with
        ``fields``, their ranked fields too, and with ``embeddings`` their embeddings)."""
        ...

    def newest_epoch(self, user_id: str) -> float | None:
        """Epoch seconds of the user's newest memory, or None when there is none."""
        ...

    def memory_count(self, user_id: str) -> int:
        """How many memories the index holds of the user."""
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
    idf_total: float = 0.0
    """The lexical search's sum of the query's idf (0: none): ``bm25 / idf_total``, at most 1,
    is the share of the query a member matches (``lexical_share``)."""

    def __len__(self) -> int:
        """How many members the pool has."""
        return len(self.ids)

    def nearest(self, count: int) -> QueryPool:
        """The pool's first ``count`` members (Chroma's nearest come first)."""
        if count >= len(self.ids):
            return self
        bm25 = None if self.bm25 is None else self.bm25[:count]
        return QueryPool(self.ids[:count], self.distances[:count], bm25, self.idf_total)

    @property
    def searched(self) -> bool:
        """Whether a lexical search with at least one of the query's terms in the user's
        memories ran: without one, relevance is the cosine's alone."""
        return self.bm25 is not None and self.idf_total > 0

    def lexical_share(self) -> FloatArray:
        """Each member's BM25 as a share of the query matched, in [0, 1]: its BM25 over the
        query's total idf (what a memory of average length holding each term once scores);
        zeros without a lexical search."""
        if self.bm25 is None or self.idf_total <= 0:
            return np.zeros(len(self.ids), dtype=np.float64)
        share: FloatArray = np.clip(self.bm25 / self.idf_total, 0.0, 1.0)
        return share


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
    """``pool`` joined with the lexical hits: members only the index found get their cosine
    with the query ``vector`` from the index's embedding of them (``hits.vectors``), or, where
    it has none of the query's dimension, from ``read_missing(ids)`` (a Chroma ``get`` of
    their embeddings); ids Chroma no longer has drop out."""
    scores = np.asarray(hits.scores, dtype=np.float64)
    by_id = dict(zip(hits.ids, scores.tolist(), strict=True))
    have = set(pool.ids)
    missing = [ident for ident in hits.ids if ident not in have]
    ids, distances = list(pool.ids), pool.distances
    if missing:
        found, rows = _missing_vectors(missing, hits, len(vector), read_missing)
        if found:
            vectors = np.asarray(rows, dtype=np.float64)
            query = np.asarray(vector, dtype=np.float64)
            norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(query))
            cos = np.clip((vectors @ query) / np.where(norms > 0, norms, 1.0), -1.0, 1.0)
            ids += found
            distances = np.concatenate([distances, 1.0 - cos])
    bm25 = np.array([by_id.get(ident, 0.0) for ident in ids], dtype=np.float64)
    return QueryPool(ids, distances, bm25, float(hits.idf_total))


def with_filtered(
    pool: QueryPool,
    members: FilteredMembers,
    vector: FloatArray,
    read_missing: Callable[[list[str]], Mapping[str, Any]],
    size: int,
) -> QueryPool:
    """A filtered dense ``pool`` Chroma returned short of ``size`` topped up with the nearest
    other ``members`` meeting the filter (their cosine from the index's embeddings, Chroma's
    where it holds none), so a selective filter still yields ``size`` candidates when that
    many memories meet it."""
    wanted = size - len(pool)
    if wanted <= 0 or not members.ids:
        return pool
    held = {
        ident: found
        for ident, blob in zip(members.ids, members.vectors, strict=True)
        if (found := index_vector(blob, len(vector))) is not None
    }
    unread = [ident for ident in members.ids if ident not in held]
    if unread:
        got = read_missing(unread)
        for ident, value in zip(got["ids"], got["embeddings"], strict=True):
            found = chroma_vector(value, len(vector))
            if found is not None:
                held[ident] = found
    ids = [ident for ident in members.ids if ident in held]
    if not ids:
        return pool
    rows = np.asarray([held[ident] for ident in ids], dtype=np.float64)
    query = np.asarray(vector, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(query))
    cos = np.clip((rows @ query) / np.where(norms > 0, norms, 1.0), -1.0, 1.0)
    nearest = np.lexsort((np.arange(len(ids)), -cos))[:wanted]
    return QueryPool(
        [*pool.ids, *(ids[at] for at in nearest.tolist())],
        np.concatenate([pool.distances, 1.0 - cos[nearest]]),
        pool.bm25,
        pool.idf_total,
    )


def _missing_vectors(
    missing: list[str],
    hits: LexicalHits,
    dimension: int,
    read_missing: Callable[[list[str]], Mapping[str, Any]],
) -> tuple[list[str], Any]:
    """The ``missing`` members found and their embeddings, in Chroma's order: the index's
    where it holds one of the query's ``dimension``, Chroma's for the rest."""
    absent = hits.absent
    if absent is None or set(absent) != set(missing):  # the index was not asked: Chroma's
        got = read_missing(missing)
        return list(got["ids"]), got["embeddings"]
    matrix, present = index_vectors(hits.vectors, dimension, np.float64)
    if present.all():  # the usual case: the index holds every one
        return list(absent), matrix
    held = dict(zip(absent, present.tolist(), strict=True))
    unread = [ident for ident in absent if not held[ident]]
    got = read_missing(unread)
    chroma = dict(zip(got["ids"], got["embeddings"], strict=True))
    found = [ident for ident in absent if held[ident] or ident in chroma]
    at = {ident: row for row, ident in enumerate(absent)}
    rows = [matrix[at[ident]] if held[ident] else chroma[ident] for ident in found]
    return found, rows


def index_vectors(
    blobs: Sequence[bytes | None], dimension: int, dtype: type[np.floating[Any]] = np.float32
) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """Embeddings as the index keeps them, one row each of ``dtype`` (float32, what the topic
    product takes; float64 keeps every value exactly), zeros where there is none of
    ``dimension`` values, and which rows hold one."""
    if blobs and None not in blobs:  # the usual case: all of one width, read in one copy
        whole = cast(Sequence[bytes], blobs)
        joined = b"".join(whole)
        for width, kind in ((4 * dimension, "<f4"), (8 * dimension, "<f8")):
            # a total of n widths with none wider means every one is a width
            if len(joined) == len(whole) * width and max(map(len, whole)) == width:
                matrix = np.frombuffer(joined, dtype=kind).reshape(len(whole), dimension)
                return matrix.astype(dtype, copy=False), np.ones(len(whole), dtype=bool)
    rows = np.zeros((len(blobs), dimension), dtype=dtype)
    held = np.zeros(len(blobs), dtype=bool)
    for at, blob in enumerate(blobs):
        vector = index_vector(blob, dimension)
        if vector is not None:
            rows[at], held[at] = vector, True
    return rows, held


def index_vector(blob: bytes | None, dimension: int) -> FloatArray | None:
    """An embedding as the index keeps it (float32 bytes, or float64 from an HTTP client), or
    None when there is none of ``dimension`` values."""
    if not blob:
        return None
    if len(blob) == 4 * dimension:
        return np.frombuffer(blob, dtype="<f4").astype(np.float64)
    if len(blob) == 8 * dimension:
        return np.frombuffer(blob, dtype="<f8").astype(np.float64)
    return None


def chroma_vector(value: object, dimension: int) -> FloatArray | None:
    """An embedding from a Chroma ``get`` as floats, or None when absent or of another length."""
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64)
    return array if array.shape == (dimension,) else None
