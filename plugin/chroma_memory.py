"""``ChromaMemory``: one Chroma collection as an agent's long-term memory, scoped per user.

Distance convention: collections are cosine, so Chroma returns ``1 - cos`` in [0, 2]; the
kernel turns that into ``similarity = 1 - distance / 2`` and owns every scoring decision.
This module only stores, filters, over-fetches and maps rows into ``MemoryCandidate``s.

HNSW parameters (``DEFAULT_HNSW``), measured with ``python -m plugin.bench.hnsw_sweep``: 20,000
memories over 10 users, 300 queries, mean recall@64 against exact cosine search (filtered =
``where user_id``, exact search over that user's rows). Real = all-MiniLM-L6-v2 over
templated memories; random = unit vectors, the worst case. Chroma 1.5.9, 2 cores:

================================  =============  ===============  ===============
ef_construction / ef_search / M   real filtered  random filtered  random unfilt.
================================  =============  ===============  ===============
100 / 100 / 16 (Chroma default)   0.9986         0.880            0.310
200 / 200 / 16                    0.9999         0.982            0.514
200 / 200 / 32                    0.9999         0.9997           0.749
200 / 500 / 32 (chosen)           1.0000         1.0000           0.951
================================  =============  ===============  ===============

Real embeddings unfiltered: 0.998 at the default, 1.0 for the rest. The chosen setting
costs a slower build (about 2-3x) and a filtered median query of 23 ms versus 14 ms at the
default (20,000 memories, idle machine); it is the only one robust on the worst case.

Reproduced with the chosen setting by ``affect-memory bench recall --real 20000`` (its own
corpus of 20,000 sentences, 200 held-out queries, 10 users): recall@64 1.0000 filtered and
unfiltered; random vectors with the filter 1.000 at 10,000 and 0.995 at 100,000 memories.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any

import numpy as np
from pydantic import StringConstraints, ValidationError

from kernel.batch import rank_batch, score_batch
from kernel.bounds import PositiveInt, SignedUnit, check_int
from kernel.errors import AffectMemoryError, InvalidInputError
from kernel.models import MAX_TEXT_CHARS, FrozenModel, MemoryCandidate
from kernel.protocols import RetrievalInput
from kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from plugin.chroma_client import PathLock, StoreLocation, open_client, parse_location
from plugin.embeddings import Embedder, SentenceTransformerEmbedder, check_embeddings
from plugin.errors import (
    IsolationError,
    StoreError,
    StoreUnavailableError,
    WrongSpaceError,
)
from plugin.records import MemoryRecord, validate_records
from plugin.timestamps import normalize_timestamp

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_COLLECTION",
    "DEFAULT_HNSW",
    "DISTANCE_NOISE",
    "MAX_CANDIDATES",
    "RECALL_TURNS_KEPT",
    "ChromaMemory",
    "HnswParams",
    "MemoryStats",
    "RecallHit",
    "RecallQuery",
    "RecallResult",
    "TurnWriteReport",
    "UserRetriever",
    "WriteReport",
    "parse_recall_query",
]

DEFAULT_COLLECTION = "memories"
"""Collection used when none is named."""

DEFAULT_CANDIDATES = 32
"""Rows fetched from Chroma per query before kernel reranking."""

MAX_CANDIDATES = 64
"""Most rows fetched per query; reranking more would mostly reorder noise."""

DISTANCE_NOISE = 1e-6
"""Cosine distances this far outside [0, 2] are float noise and clamped (-2.4e-7 was seen)."""

RECALL_TURNS_KEPT = 32
"""Applied turn ids remembered per memory, so replaying any recent turn is harmless."""

PROGRESS_MIN = 200
"""Smallest write that shows a progress bar."""

_WRITE_CHUNK = 512
_CHROMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")

UserId = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=512)]


class HnswParams(FrozenModel):
    """HNSW build and search parameters a new collection is created with (fixed for life)."""

    ef_construction: PositiveInt = 200
    ef_search: PositiveInt = 500
    max_neighbors: PositiveInt = 32


DEFAULT_HNSW = HnswParams()
"""Measured for recall@64 >= 0.98 with a per-user filter at 20,000 memories (see above)."""


class RecallQuery(FrozenModel):
    """One query of a batch recall: the text, whose memories, and the current mood valence."""

    query: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_TEXT_CHARS)]
    user_id: UserId
    mood_valence: SignedUnit = 0.0


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One ranked memory with every factor of its score."""

    id: str
    text: str
    score: float
    distance: float
    similarity: float
    recency: float
    salience: float
    congruence: float
    episode: float
    """The episode bonus added to the score (0 for a non-episode)."""
    timestamp: str | None
    significance: float
    recall_count: int
    emotional_valence: float

    def to_json(self) -> dict[str, Any]:
        """The hit as a JSON object, in the documented key order."""
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "distance": self.distance,
            "similarity": self.similarity,
            "recency": self.recency,
            "salience": self.salience,
            "congruence": self.congruence,
            "episode": self.episode,
            "timestamp": self.timestamp,
            "significance": self.significance,
            "recall_count": self.recall_count,
            "emotional_valence": self.emotional_valence,
        }


@dataclass(frozen=True, slots=True)
class RecallResult:
    """The ranked memories for one query at one instant."""

    query: str
    user_id: str
    now: str
    results: tuple[RecallHit, ...]

    def to_json(self) -> dict[str, Any]:
        """``{"query", "user_id", "now", "results": [...]}`` in rank order."""
        return {
            "query": self.query,
            "user_id": self.user_id,
            "now": self.now,
            "results": [hit.to_json() for hit in self.results],
        }


@dataclass(frozen=True, slots=True)
class WriteReport:
    """What a write did: how many rows were written and which existing ids were left alone."""

    written: int
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnWriteReport:
    """What ``apply_turn_writes`` did for one turn; a replay reports everything as applied."""

    incremented: tuple[str, ...]
    already_applied: tuple[str, ...]
    missing: tuple[str, ...]
    stored_new: bool


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Counts and configuration of one memory collection."""

    location: str
    collection: str
    space: str
    hnsw: dict[str, Any]
    embedder: str | None
    count: int
    users: dict[str, int] = field(default_factory=dict)
    size_bytes: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The stats as a JSON object."""
        return {
            "location": self.location,
            "collection": self.collection,
            "space": self.space,
            "hnsw": self.hnsw,
            "embedder": self.embedder,
            "count": self.count,
            "users": self.users,
            "size_bytes": self.size_bytes,
        }


def _check_user(user_id: object) -> str:
    if not isinstance(user_id, str) or not user_id:
        raise InvalidInputError(
            f"user_id must be a non-empty string (every query is scoped to one user), "
            f"got {user_id!r}"
        )
    return user_id


def _check_ids(ids: Iterable[object], what: str = "ids") -> list[str]:
    if isinstance(ids, str):
        raise InvalidInputError(f"{what} must be a sequence of ids, not one string: {ids!r}")
    checked: list[str] = []
    seen: set[str] = set()
    for index, ident in enumerate(ids):
        if not isinstance(ident, str) or not ident:
            raise InvalidInputError(f"{what}[{index}] must be a non-empty string, got {ident!r}")
        if ident not in seen:
            seen.add(ident)
            checked.append(ident)
    return checked


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, slots=True)
class _Rows:
    """One query's rows, checked, as columns: what both candidates and recall are built from."""

    ids: list[str]
    texts: list[str]
    timestamps: list[str]
    distances: np.ndarray
    epochs: np.ndarray
    significance: np.ndarray
    valences: np.ndarray
    recall_counts: np.ndarray
    episodes: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def candidates(self) -> list[MemoryCandidate]:
        """The rows as kernel candidates, without re-validating them.

        ``model_construct`` skips pydantic on the hot path: every field was validated by
        ``MemoryRecord`` when it was written, and ``_to_rows`` re-checked the columns.
        """
        construct = MemoryCandidate.model_construct
        distances = self.distances.tolist()
        significance = self.significance.tolist()
        valences = self.valences.tolist()
        counts = self.recall_counts.tolist()
        episodes = self.episodes.tolist()
        return [
            construct(
                id=self.ids[i],
                text=self.texts[i],
                distance=distances[i],
                timestamp=self.timestamps[i],
                significance=significance[i],
                recall_count=counts[i],
                episode=episodes[i],
                emotional_valence=valences[i],
            )
            for i in range(len(self.ids))
        ]


_EMPTY = np.zeros(0, dtype=np.float64)


def _to_rows(
    ids: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    distances: Sequence[float],
    user_id: str,
) -> _Rows:
    """The one mapper from one query's columnar Chroma result, checked column by column.

    Rows were validated whole when written (``MemoryRecord``); these cheap checks still refuse
    a row of another user (``IsolationError``), distances outside [0, 2] beyond float noise,
    and rows some other writer left without or with malformed affect metadata. Timestamps
    are not parsed: the epoch float stored at write time feeds the scorer.
    """
    count = len(ids)
    if not len(documents) == len(metadatas) == len(distances) == count:
        raise StoreError(
            f"Chroma returned ragged columns: {count} ids, {len(documents)} documents, "
            f"{len(metadatas)} metadatas, {len(distances)} distances"
        )
    if count == 0:
        empty_ints = np.zeros(0, dtype=np.int64)
        return _Rows([], [], [], _EMPTY, _EMPTY, _EMPTY, _EMPTY, empty_ints, _EMPTY.astype(bool))
    raw = np.asarray(distances, dtype=np.float64)
    if not np.isfinite(raw).all() or raw.min() < -DISTANCE_NOISE or raw.max() > 2 + DISTANCE_NOISE:
        bad = next(d for d in raw.tolist() if not -DISTANCE_NOISE <= d <= 2 + DISTANCE_NOISE)
        raise StoreError(
            f"Chroma returned a distance of {bad!r} outside the cosine range [0, 2]; "
            "is the collection really cosine?"
        )
    try:
        owners = [meta["user_id"] for meta in metadatas]  # type: ignore[index]
        significance = [meta["significance"] for meta in metadatas]  # type: ignore[index]
        valence = [meta["emotional_valence"] for meta in metadatas]  # type: ignore[index]
        recalls = [meta["recall_count"] for meta in metadatas]  # type: ignore[index]
        episodes = [meta["episode"] for meta in metadatas]  # type: ignore[index]
        stamps = [meta["timestamp"] for meta in metadatas]  # type: ignore[index]
        epochs = [meta["timestamp_epoch"] for meta in metadatas]  # type: ignore[index]
    except (KeyError, TypeError) as error:
        raise StoreError(
            f"a memory lacks the affect-memory metadata key {error}; was the collection "
            "written by another tool? (use a collection that only affect-memory writes)"
        ) from None
    if any(owner != user_id for owner in owners):
        intruder = next(i for i, owner in enumerate(owners) if owner != user_id)
        raise IsolationError(
            f"Chroma returned memory {ids[intruder]!r} of another user for a query scoped to "
            f"{user_id!r}; nothing was returned"
        )
    try:
        sig = np.asarray(significance, dtype=np.float64)
        val = np.asarray(valence, dtype=np.float64)
        moments = np.asarray(epochs, dtype=np.float64)
    except (TypeError, ValueError):
        sig = val = moments = np.full(count, np.nan)
    if (
        not all(type(n) is int and n >= 0 for n in recalls)
        or not all(type(flag) is bool for flag in episodes)
        or not all(type(stamp) is str for stamp in stamps)
        or not all(type(text) is str and len(text) <= MAX_TEXT_CHARS for text in documents)
        or not (np.isfinite(sig).all() and sig.min() >= 0.0 and sig.max() <= 1.0)
        or not (np.isfinite(val).all() and val.min() >= -1.0 and val.max() <= 1.0)
        or not np.isfinite(moments).all()
    ):
        raise StoreError(
            "a stored memory has malformed affect metadata (recall_count, episode, timestamp, "
            "text, significance, emotional_valence or timestamp_epoch); re-ingest it through "
            "affect-memory"
        )
    return _Rows(
        ids=list(ids),
        texts=list(documents),  # type: ignore[arg-type]
        timestamps=stamps,
        distances=np.clip(raw, 0.0, 2.0),
        epochs=moments,
        significance=sig,
        valences=val,
        recall_counts=np.asarray(recalls, dtype=np.int64),
        episodes=np.asarray(episodes, dtype=bool),
    )


def _directory_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
    return total


def _rank(
    rows: _Rows,
    now: datetime,
    mood_valence: float,
    limit: int,
    congruence_on: bool,
    weights: RetrievalWeights,
) -> tuple[RecallHit, ...]:
    """Score the rows with the kernel's columnar scorer (stored epochs, no ISO parsing) and cut.

    ``kernel.batch`` reproduces ``rank_candidates`` (same order, same tie rule); ages come
    from epoch floats here, so a score may differ from the scalar path in the last bits.
    """
    if not len(rows):
        return ()
    scores = score_batch(
        rows.distances,
        timestamps=rows.epochs,
        now=now,
        significance=rows.significance,
        recall_counts=rows.recall_counts,
        episodes=rows.episodes,
        memory_valences=rows.valences,
        mood_valence=mood_valence,
        congruence_on=congruence_on,
        weights=weights,
    )
    order = rank_batch(rows.ids, scores.score, limit).tolist()
    columns = (
        scores.score.tolist(),
        rows.distances.tolist(),
        scores.similarity.tolist(),
        scores.recency.tolist(),
        scores.salience.tolist(),
        scores.congruence.tolist(),
        scores.episode_bonus.tolist(),
        rows.significance.tolist(),
        rows.recall_counts.tolist(),
        rows.valences.tolist(),
    )
    score, distance, similarity, recency, salience, congruence, bonus, sig, counts, val = columns
    return tuple(
        RecallHit(
            id=rows.ids[i],
            text=rows.texts[i],
            score=score[i],
            distance=distance[i],
            similarity=similarity[i],
            recency=recency[i],
            salience=salience[i],
            congruence=congruence[i],
            episode=bonus[i],
            timestamp=rows.timestamps[i],
            significance=sig[i],
            recall_count=counts[i],
            emotional_valence=val[i],
        )
        for i in order
    )


class UserRetriever:
    """A ``MemoryRetriever`` bound to one user of a ``ChromaMemory``, for the engine."""

    def __init__(
        self, memory: ChromaMemory, user_id: str, *, candidates: int = DEFAULT_CANDIDATES
    ) -> None:
        self._memory = memory
        self._user_id = _check_user(user_id)
        self._candidates = memory._check_candidates(candidates)

    @property
    def user_id(self) -> str:
        """The user every retrieval is scoped to."""
        return self._user_id

    async def retrieve(self, request: RetrievalInput) -> tuple[MemoryCandidate, ...]:
        """Unranked candidates for the request, from this user's memories only."""
        return await self._memory.retrieve(
            request, user_id=self._user_id, candidates=self._candidates
        )


class ChromaMemory:
    """One Chroma collection of memories: validated writes, user-scoped retrieval, recall.

    ``location`` is a directory (embedded, one process at a time), ``":memory:"`` (in-process,
    shared by every in-memory client of the process while one is open) or ``http://host:port``
    (a ``chroma run`` server, for several processes).
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        hnsw: HnswParams = DEFAULT_HNSW,
        create: bool = True,
        progress: bool | None = None,
    ) -> None:
        if not isinstance(collection, str) or not _CHROMA_NAME.match(collection):
            raise StoreError(
                "collection name must be 3-512 characters from [A-Za-z0-9._-], starting and "
                f"ending with a letter or digit, got {collection!r}"
            )
        if not isinstance(hnsw, HnswParams):
            raise StoreError(f"hnsw must be HnswParams, got {hnsw!r}")
        self._location: StoreLocation = parse_location(location)
        self._name = collection
        self._embedder: Embedder = (
            embedder if embedder is not None else SentenceTransformerEmbedder()
        )
        self._hnsw = hnsw
        self._progress = progress
        self._lock: PathLock | None = None
        self._closed = False
        self._client, self._lock = open_client(self._location, create=create)
        try:
            self._collection = self._open_collection(create)
            self._max_batch = max(1, int(self._client.get_max_batch_size()))
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ opening

    def _open_collection(self, create: bool) -> Any:
        from chromadb.errors import ChromaError, NotFoundError

        where = self._location.describe()
        with self._backend("open the collection"):
            try:
                collection = self._client.get_collection(self._name, embedding_function=None)
            except NotFoundError:
                if not create:
                    present = sorted(c.name for c in self._client.list_collections())
                    raise StoreError(
                        f"no collection {self._name!r} at {where} (present: "
                        f"{', '.join(present) or 'none'}); ingest memories first or pass "
                        "--collection"
                    ) from None
                configuration = {"hnsw": {"space": "cosine", **self._hnsw.model_dump()}}
                try:
                    collection = self._client.create_collection(
                        self._name,
                        configuration=configuration,
                        metadata={"embedder": self._embedder.name},
                        embedding_function=None,
                    )
                except ChromaError:
                    # Another process created it between our get and create: use theirs.
                    collection = self._client.get_collection(self._name, embedding_function=None)
        hnsw = (collection.configuration or {}).get("hnsw") or {}
        space = hnsw.get("space") or ((collection.configuration or {}).get("spann") or {}).get(
            "space"
        )
        if space != "cosine":
            raise WrongSpaceError(
                f"collection {self._name!r} at {where} uses the {space!r} distance space, but "
                "affect-memory scores cosine distances in [0, 2] and would misrank anything "
                "else; Chroma cannot change the space of an existing collection, so ingest "
                "into a new one (--collection NAME) or delete this one"
            )
        recorded = (collection.metadata or {}).get("embedder")
        if recorded is not None and recorded != self._embedder.name:
            raise StoreError(
                f"collection {self._name!r} at {where} was filled with embedder {recorded!r} "
                f"but this memory embeds with {self._embedder.name!r}; vectors of different "
                "models are not comparable - use the same model or another collection"
            )
        return collection

    @contextmanager
    def _backend(self, action: str) -> Iterator[None]:
        """Translate backend failures into ``StoreError``s that say what failed and where."""
        if self._closed:
            raise StoreError(f"cannot {action}: this ChromaMemory is closed")
        try:
            yield
        except AffectMemoryError:
            raise
        except Exception as error:
            hint = ""
            if self._location.kind == "http":
                hint = " (is the Chroma server still running?)"
            kind = StoreUnavailableError if "connect" in str(error).lower() else StoreError
            raise kind(
                f"cannot {action} in {self._location.describe()}: "
                f"{type(error).__name__}: {error}{hint}"
            ) from error

    # ------------------------------------------------------------------ properties

    @property
    def location(self) -> str:
        """The store location as given (path, ``:memory:`` or URL)."""
        return self._location.describe()

    @property
    def collection_name(self) -> str:
        """The Chroma collection this memory wraps."""
        return self._name

    @property
    def embedder(self) -> Embedder:
        """The embedder every document and query goes through."""
        return self._embedder

    # ------------------------------------------------------------------ writes

    def add(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store new records; ids already stored are left untouched and reported as skipped.

        The batch is validated whole first: one bad record rejects the call, naming its index.
        """
        batch = validate_records(records)
        existing = self._existing([record.id for record in batch])
        todo = [record for record in batch if record.id not in existing]
        self._write(todo, replace=False, progress=progress)
        return WriteReport(
            written=len(todo), skipped=tuple(r.id for r in batch if r.id in existing)
        )

    def upsert(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store records, replacing any stored under the same ids (validated whole first)."""
        batch = validate_records(records)
        self._write(list(batch), replace=True, progress=progress)
        return WriteReport(written=len(batch))

    def _existing(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._backend("look up ids"):
            for chunk in _chunks(ids, self._max_batch):
                found.update(self._collection.get(ids=list(chunk), include=[])["ids"])
        return found

    def _show_progress(self, total: int, asked: bool | None) -> bool:
        wanted = asked if asked is not None else self._progress
        if wanted is None:
            wanted = sys.stderr.isatty()
        return bool(wanted) and total >= PROGRESS_MIN

    def _write(
        self, records: Sequence[MemoryRecord], *, replace: bool, progress: bool | None
    ) -> None:
        if not records:
            return
        from tqdm import tqdm

        chunk_size = min(self._max_batch, _WRITE_CHUNK)
        bar = tqdm(
            total=len(records),
            unit="memory",
            desc="ingest",
            disable=not self._show_progress(len(records), progress),
            file=sys.stderr,
        )
        with bar:
            for chunk in _chunks(records, chunk_size):
                texts = [record.text for record in chunk]
                vectors = check_embeddings(self._embedder.embed_documents(texts), len(texts))
                write = self._collection.upsert if replace else self._collection.add
                with self._backend("write memories"):
                    write(
                        ids=[record.id for record in chunk],
                        embeddings=vectors,
                        documents=texts,
                        metadatas=[record.to_metadata() for record in chunk],
                    )
                bar.update(len(chunk))

    # ------------------------------------------------------------------ retrieval

    def _check_candidates(self, candidates: object) -> int:
        try:
            n = check_int(candidates, 1)
        except ValueError as error:
            raise InvalidInputError(f"candidates {error}") from None
        if n > MAX_CANDIDATES:
            raise InvalidInputError(
                f"candidates must be between 1 and {MAX_CANDIDATES}, got {candidates!r}"
            )
        return n

    def _embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return check_embeddings(self._embedder.embed_documents(list(queries)), len(queries))

    def _query(self, vectors: np.ndarray, user_id: str, n: int) -> list[_Rows]:
        """The one query path: nearest ``n`` of ``user_id``'s memories for each vector."""
        user_id = _check_user(user_id)
        with self._backend("query memories"):
            result = self._collection.query(
                query_embeddings=vectors,
                n_results=n,
                where={"user_id": user_id},
                include=["documents", "metadatas", "distances"],
            )
        columns = zip(
            result["ids"],
            result["documents"],
            result["metadatas"],
            result["distances"],
            strict=True,
        )
        return [_to_rows(*column, user_id) for column in columns]

    def candidates(
        self, query: str, user_id: str, *, candidates: int = DEFAULT_CANDIDATES
    ) -> tuple[MemoryCandidate, ...]:
        """The unranked nearest memories of one user, in Chroma distance order."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInputError(f"query must be a non-empty string, got {query!r}")
        user_id = _check_user(user_id)
        n = self._check_candidates(candidates)
        return tuple(self._query(self._embed_queries([query]), user_id, n)[0].candidates())

    async def retrieve(
        self,
        request: RetrievalInput,
        *,
        user_id: str | None = None,
        candidates: int = DEFAULT_CANDIDATES,
    ) -> tuple[MemoryCandidate, ...]:
        """Candidates for an engine request from ``user_id``'s memories; unscoped is refused.

        Fetches ``max(candidates, request.limit)`` rows, at most 64; embedding and the query
        run in a worker thread so the event loop keeps serving other conversations.
        """
        if user_id is None:
            raise InvalidInputError(
                "retrieve needs a user scope: pass user_id=..., or hand the engine "
                "memory.retriever_for(user_id)"
            )
        user_id = _check_user(user_id)
        n = min(MAX_CANDIDATES, max(self._check_candidates(candidates), request.limit))
        return await asyncio.to_thread(self.candidates, request.query, user_id, candidates=n)

    def retriever_for(self, user_id: str, *, candidates: int = DEFAULT_CANDIDATES) -> UserRetriever:
        """A ``MemoryRetriever`` that only ever reads ``user_id``'s memories."""
        return UserRetriever(self, user_id, candidates=candidates)

    def recall(
        self,
        query: str,
        user_id: str,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int = DEFAULT_CANDIDATES,
        *,
        congruence_on: bool = True,
        weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    ) -> RecallResult:
        """Retrieve and rerank with the kernel; every hit keeps its score breakdown. Read-only."""
        return self.recall_many(
            [{"query": query, "user_id": user_id, "mood_valence": mood_valence}],
            now=now,
            top_k=top_k,
            candidates=candidates,
            congruence_on=congruence_on,
            weights=weights,
        )[0]

    def recall_many(
        self,
        queries: Sequence[RecallQuery | Mapping[str, Any]],
        *,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int = DEFAULT_CANDIDATES,
        congruence_on: bool = True,
        weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    ) -> list[RecallResult]:
        """Recall for many queries: one embedding batch, one Chroma query per user. Read-only."""
        checked = [
            parse_recall_query(query, where=f"query {index}") for index, query in enumerate(queries)
        ]
        moment = datetime.now(UTC) if now is None else normalize_timestamp(now, field="now").moment
        try:
            top_k = check_int(top_k, 1)
        except ValueError as error:
            raise InvalidInputError(f"top_k {error}") from None
        if top_k > MAX_CANDIDATES:
            raise InvalidInputError(f"top_k must be <= {MAX_CANDIDATES}, got {top_k}")
        n = max(self._check_candidates(candidates), top_k)
        if not checked:
            return []
        vectors = self._embed_queries([query.query for query in checked])
        by_user: dict[str, list[int]] = {}
        for index, query in enumerate(checked):
            by_user.setdefault(query.user_id, []).append(index)
        found: dict[int, _Rows] = {}
        for user_id, indices in by_user.items():
            for index, rows in zip(indices, self._query(vectors[indices], user_id, n), strict=True):
                found[index] = rows
        stamp = moment.astimezone(UTC).isoformat(timespec="microseconds")
        return [
            RecallResult(
                query.query,
                query.user_id,
                stamp,
                _rank(found[index], moment, query.mood_valence, top_k, congruence_on, weights),
            )
            for index, query in enumerate(checked)
        ]

    # ------------------------------------------------------------------ reads and deletes

    def get(self, ids: Iterable[str]) -> tuple[MemoryRecord, ...]:
        """The stored records for ``ids``, in the order asked; unknown ids are left out."""
        wanted = _check_ids(ids)
        rows: dict[str, MemoryRecord] = {}
        with self._backend("read memories"):
            for chunk in _chunks(wanted, self._max_batch):
                got = self._collection.get(ids=list(chunk), include=["documents", "metadatas"])
                for ident, text, meta in zip(
                    got["ids"], got["documents"], got["metadatas"], strict=True
                ):
                    rows[ident] = MemoryRecord.from_stored(ident, text, meta or {})
        return tuple(rows[ident] for ident in wanted if ident in rows)

    def forget(self, ids: Iterable[str], *, user_id: str | None = None) -> tuple[str, ...]:
        """Delete memories by id (only ``user_id``'s when given); returns the ids removed."""
        wanted = _check_ids(ids)
        owner = None if user_id is None else _check_user(user_id)
        present: list[str] = []
        with self._backend("forget memories"):
            for chunk in _chunks(wanted, self._max_batch):
                got = self._collection.get(ids=list(chunk), include=["metadatas"])
                owners = dict(zip(got["ids"], got["metadatas"], strict=True))
                present.extend(
                    ident
                    for ident in chunk
                    if ident in owners
                    and (owner is None or (owners[ident] or {}).get("user_id") == owner)
                )
            for chunk in _chunks(present, self._max_batch):
                self._collection.delete(ids=list(chunk))
        return tuple(present)

    def _scan(self, where: dict[str, Any] | None, include: list[str]) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            with self._backend("scan memories"):
                page = self._collection.get(
                    where=where, include=include, limit=self._max_batch, offset=offset
                )
            if not page["ids"]:
                return
            yield page
            offset += len(page["ids"])

    def count(self, user_id: str | None = None) -> int:
        """How many memories are stored, in total or for one user."""
        if user_id is None:
            with self._backend("count memories"):
                return int(self._collection.count())
        owner = _check_user(user_id)
        return sum(len(page["ids"]) for page in self._scan({"user_id": owner}, []))

    def stats(self) -> MemoryStats:
        """Memories per user, the collection's space and HNSW settings, and size on disk."""
        users: dict[str, int] = {}
        for page in self._scan(None, ["metadatas"]):
            for meta in page["metadatas"]:
                owner = str((meta or {}).get("user_id", "?"))
                users[owner] = users.get(owner, 0) + 1
        hnsw = dict((self._collection.configuration or {}).get("hnsw") or {})
        size = None
        if self._location.kind == "path" and self._location.path is not None:
            size = _directory_size(self._location.path)
        return MemoryStats(
            location=self.location,
            collection=self._name,
            space=str(hnsw.get("space")),
            hnsw={key: hnsw[key] for key in HnswParams.model_fields if key in hnsw},
            embedder=(self._collection.metadata or {}).get("embedder"),
            count=sum(users.values()),
            users=dict(sorted(users.items())),
            size_bytes=size,
        )

    # ------------------------------------------------------------------ turn writes

    def apply_turn_writes(
        self,
        turn_id: str,
        *,
        recalled_ids: Sequence[str] = (),
        recalled_at: str | datetime | float | None = None,
        new_record: MemoryRecord | Mapping[str, Any] | None = None,
        replace_new: bool = False,
    ) -> TurnWriteReport:
        """Apply one committed turn's memory writes; applying the same turn again changes nothing.

        Each surfaced memory gets ``recall_count + 1`` and ``last_recalled_at`` once: the turn
        id is appended to the memory's ``recall_turns`` (the last 32 kept) and rows already
        carrying it are skipped. ``new_record`` (the user message, with a deterministic id) is
        inserted if absent, so a late replay cannot reset counts later turns added; pass
        ``replace_new=True`` to overwrite instead. Not atomic across processes: two writers
        recalling the same memory at once through one server can lose an increment.
        """
        if not isinstance(turn_id, str) or not 1 <= len(turn_id) <= 256:
            raise InvalidInputError(f"turn_id must be a 1-256 character string, got {turn_id!r}")
        ids = _check_ids(recalled_ids, "recalled_ids")
        record = None
        if new_record is not None:
            record = validate_records([new_record], label="new_record")[0]
        incremented: list[str] = []
        applied: list[str] = []
        missing: list[str] = []
        if ids:
            if recalled_at is None:
                raise InvalidInputError("recalled_at is required when recalled_ids are given")
            when = normalize_timestamp(recalled_at, field="recalled_at")
            updates: list[tuple[str, dict[str, Any]]] = []
            with self._backend("update recalled memories"):
                stored: dict[str, Mapping[str, Any]] = {}
                for chunk in _chunks(ids, self._max_batch):
                    got = self._collection.get(ids=list(chunk), include=["metadatas"])
                    stored.update(zip(got["ids"], (m or {} for m in got["metadatas"]), strict=True))
                for ident in ids:
                    meta = stored.get(ident)
                    if meta is None:
                        missing.append(ident)
                        continue
                    turns = list(meta.get("recall_turns") or [])
                    if turn_id in turns:
                        applied.append(ident)
                        continue
                    count = meta.get("recall_count", 0)
                    updates.append(
                        (
                            ident,
                            {
                                "recall_count": (count if type(count) is int else 0) + 1,
                                "last_recalled_at": when.iso,
                                "last_recalled_epoch": when.epoch,
                                "recall_turns": [*turns, turn_id][-RECALL_TURNS_KEPT:],
                            },
                        )
                    )
                for part in _chunks(updates, self._max_batch):
                    self._collection.update(
                        ids=[ident for ident, _ in part], metadatas=[meta for _, meta in part]
                    )
                incremented = [ident for ident, _ in updates]
        stored_new = False
        if record is not None:
            if replace_new:
                self.upsert([record], progress=False)
                stored_new = True
            else:
                stored_new = self.add([record], progress=False).written == 1
        return TurnWriteReport(tuple(incremented), tuple(applied), tuple(missing), stored_new)

    # ------------------------------------------------------------------ lifetime

    def _release(self) -> None:
        client, self._client = getattr(self, "_client", None), None
        if client is not None and hasattr(client, "close"):
            with suppress(Exception):  # closing must not mask the error that made us close
                client.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def close(self) -> None:
        """Release the Chroma client and the embedded store's lock; safe to call twice."""
        if not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> ChromaMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ChromaMemory({self.location!r}, collection={self._name!r})"


def parse_recall_query(value: object, *, where: str = "query") -> RecallQuery:
    """A ``RecallQuery`` from a query or a mapping; errors name ``where``, the field and value."""
    if isinstance(value, RecallQuery):
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where} must be a mapping, got {value!r}")
    try:
        return RecallQuery.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(part) for part in first["loc"]) or "query"
        cause = (first.get("ctx") or {}).get("error")
        detail = str(cause) if cause is not None else first["msg"].lower()
        raise InvalidInputError(f"{where}: {loc} {detail}, got {first.get('input')!r}") from None
