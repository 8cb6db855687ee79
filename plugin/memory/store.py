"""``ChromaMemory``: an agent's long-term memory in Chroma, one collection per user.

Layout (``plugin.memory.layout``): every user's memories live in a collection of their own, named
from the store's prefix (``collection=``, default ``memories``) and the user id, and created
cosine with ``DEFAULT_HNSW``. Memory ids are per user: the same id under two users is two
memories. Every read, write and delete names one user and touches only that user's
collection, so isolation is structural; the mapper still checks each returned row's
``user_id``. A store written by the old layout (every user in one collection named like the
prefix) is refused on open with a pointer to ``affect-memory migrate``.

Distance convention: collections are cosine, so Chroma returns ``1 - cos`` in [0, 2]; the
kernel turns that into ``similarity = 1 - distance / 2`` and owns every scoring decision.
This module only stores, over-fetches and maps rows into ``MemoryCandidate``s.

Writes are all or nothing within the process: a batch is validated whole first (everything
Chroma would refuse is refused before the first write), and if a write still fails part way
(Chroma refuses a chunk, the server times out), ``add`` deletes the ids it had newly stored
and ``upsert`` puts back the rows it had replaced, before the error is raised. A process
killed mid-write cannot undo: it leaves a prefix of the batch, which re-running the same call
completes (``add`` skips stored ids, ``upsert`` is idempotent).

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
import logging
import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, BeforeValidator, ValidationError

from kernel.batch import rank_batch, score_batch
from kernel.bounds import PositiveInt, SignedUnit, check_int
from kernel.errors import AffectMemoryError, InvalidInputError, shown
from kernel.models import MAX_TEXT_CHARS, FrozenModel, MemoryCandidate
from kernel.protocols import RetrievalInput
from kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from plugin.errors import (
    EmbeddingError,
    IsolationError,
    StoreError,
    StoreUnavailableError,
    WrongSpaceError,
)
from plugin.memory.layout import (
    LAYOUT_KEY,
    PREFIX_KEY,
    USER_KEY,
    LegacyLayoutError,
    check_prefix,
    check_user_collection,
    collection_metadata,
    is_user_collection,
    user_collection_name,
)
from plugin.memory.location import (
    DEFAULT_TIMEOUT,
    PathLock,
    StoreLocation,
    check_timeout,
    open_client,
    parse_location,
)
from plugin.memory.records import (
    MAX_RECALL_COUNT,
    MemoryRecord,
    check_identifier,
    check_text,
    explain_error,
    problems_message,
    validate_records,
)
from plugin.memory.timestamps import MAX_EPOCH, normalize_timestamp
from plugin.models.embeddings import Embedder, SentenceTransformerEmbedder, check_embeddings

__all__ = [
    "DEFAULT_CANDIDATES",
    "DEFAULT_COLLECTION",
    "DEFAULT_HNSW",
    "DEFAULT_TIMEOUT",
    "DISTANCE_NOISE",
    "MAX_CANDIDATES",
    "RECALL_MANY_TOLERANCE",
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
    "check_query",
    "parse_recall_query",
    "recall_query_problems",
]

logger = logging.getLogger(__name__)

DEFAULT_COLLECTION = "memories"
"""Prefix of the users' collections when none is named."""

DEFAULT_CANDIDATES = 32
"""Rows fetched from Chroma per query before kernel reranking."""

MAX_CANDIDATES = 64
"""Most rows fetched per query; reranking more would mostly reorder noise."""

DISTANCE_NOISE = 1e-6
"""Cosine distances this far outside [0, 2] are float noise and clamped (-2.4e-7 was seen)."""

RECALL_MANY_TOLERANCE = 1e-6
"""``recall_many`` scores agree with one ``recall`` per query within this (absolute).

The model embeds a query inside a batch slightly differently from alone, in the last bits,
and by how much depends on the CPU. Measured over the sample corpus and its probes (105
queries, batches of 2, 7 and all, top 64): at most 1.0e-7 on a score and 2.4e-7 on a distance
(float32 vectors); the bound is ten times that. Thread count made no difference here.
"""

RECALL_TURNS_KEPT = 32
"""Applied turn ids remembered per memory, so replaying any recent turn is harmless."""

PROGRESS_MIN = 200
"""Smallest write that shows a progress bar."""

_WRITE_CHUNK = 512


def check_query(value: object) -> str:
    """A query: a string with something besides whitespace, at most 4,096 characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty, non-blank string, got {shown(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"must be at most {MAX_TEXT_CHARS:,} characters, got {shown(value)}")
    return check_text(value)


QueryText = Annotated[str, BeforeValidator(check_query)]
UserId = Annotated[str, BeforeValidator(check_identifier)]


class HnswParams(FrozenModel):
    """HNSW build and search parameters a new collection is created with (fixed for life)."""

    ef_construction: PositiveInt = 200
    ef_search: PositiveInt = 500
    max_neighbors: PositiveInt = 32


DEFAULT_HNSW = HnswParams()
"""Measured for recall@64 >= 0.98 with a per-user filter at 20,000 memories (see above)."""


class RecallQuery(FrozenModel):
    """One query of a batch recall: the text, whose memories, and the current mood valence."""

    query: QueryText
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
    """The ranked memories for one query at one instant, and the malformed rows left out."""

    query: str
    user_id: str
    now: str
    results: tuple[RecallHit, ...]
    skipped: tuple[str, ...] = ()
    """Ids of stored rows among the candidates too malformed to score (logged as warnings)."""

    def to_json(self) -> dict[str, Any]:
        """``{"query", "user_id", "now", "results": [...], "skipped": [...]}``, in rank order."""
        return {
            "query": self.query,
            "user_id": self.user_id,
            "now": self.now,
            "results": [hit.to_json() for hit in self.results],
            "skipped": list(self.skipped),
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
    skipped: tuple[str, ...] = ()
    """Recalled ids whose stored ``recall_count`` is malformed: left unchanged, logged."""


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Counts and configuration of one store prefix: memories per user, space, HNSW, size."""

    location: str
    collection: str
    """The prefix every user's collection is named under."""
    space: str
    hnsw: dict[str, Any]
    embedder: str | None
    count: int
    users: dict[str, int] = field(default_factory=dict)
    """Memories per user with any, by the users' real ids."""
    size_bytes: int | None = None
    collections: int = 0
    """User collections under the prefix (one per user)."""

    def to_json(self) -> dict[str, Any]:
        """The stats as a JSON object."""
        return {
            "location": self.location,
            "collection": self.collection,
            "collections": self.collections,
            "space": self.space,
            "hnsw": self.hnsw,
            "embedder": self.embedder,
            "count": self.count,
            "users": self.users,
            "size_bytes": self.size_bytes,
        }


def _check_user(user_id: object) -> str:
    try:
        return check_identifier(user_id, "user_id")
    except ValueError as error:
        raise InvalidInputError(f"{error} (every read and write is scoped to one user)") from None


def _check_ids(ids: Iterable[object], what: str = "ids") -> list[str]:
    if isinstance(ids, str):
        raise InvalidInputError(f"{what} must be a sequence of ids, not one string: {shown(ids)}")
    checked: list[str] = []
    seen: set[str] = set()
    for index, ident in enumerate(ids):
        try:
            check_identifier(ident, f"{what}[{index}]")
        except ValueError as error:
            raise InvalidInputError(str(error)) from None
        assert isinstance(ident, str)
        if ident not in seen:
            seen.add(ident)
            checked.append(ident)
    return checked


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------- the mapper


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
    skipped: tuple[str, ...] = ()
    """Ids of malformed rows left out (each was logged)."""

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
_ROW_KEYS = (
    "user_id",
    "significance",
    "emotional_valence",
    "recall_count",
    "episode",
    "timestamp",
    "timestamp_epoch",
)


def _empty_rows(skipped: tuple[str, ...] = ()) -> _Rows:
    ints, flags = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    return _Rows([], [], [], _EMPTY, _EMPTY, _EMPTY, _EMPTY, ints, flags, skipped)


def _is_number(value: object, low: float, high: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def _row_problem(text: object, meta: object) -> str | None:
    """Why one stored row cannot be scored, or None; the checks of ``MemoryRecord``, cheaply."""
    if not isinstance(meta, Mapping):
        return "it has no metadata"
    missing = [key for key in _ROW_KEYS if key not in meta]
    if missing:
        return (
            f"it lacks the affect-memory metadata {', '.join(missing)} (was it written by "
            "another tool?)"
        )
    count = meta["recall_count"]
    checks = (
        ("text", type(text) is str and len(text) <= MAX_TEXT_CHARS, text),
        (
            "recall_count",
            type(count) is int and 0 <= count <= MAX_RECALL_COUNT,
            count,
        ),
        ("episode", type(meta["episode"]) is bool, meta["episode"]),
        ("timestamp", type(meta["timestamp"]) is str, meta["timestamp"]),
        ("significance", _is_number(meta["significance"], 0.0, 1.0), meta["significance"]),
        (
            "emotional_valence",
            _is_number(meta["emotional_valence"], -1.0, 1.0),
            meta["emotional_valence"],
        ),
        (
            "timestamp_epoch",
            _is_number(meta["timestamp_epoch"], 0.0, MAX_EPOCH),
            meta["timestamp_epoch"],
        ),
    )
    for name, ok, value in checks:
        if not ok:
            return f"its {name} is malformed ({shown(value)})"
    return None


def _to_rows(
    ids: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    distances: Sequence[float],
    user_id: str,
) -> _Rows:
    """The one mapper from one query's columnar Chroma result, checked column by column.

    Rows were validated whole when written (``MemoryRecord``); these cheap checks still refuse
    a row of another user (``IsolationError``) and distances outside [0, 2] beyond float
    noise. A row some other writer left without or with malformed affect metadata is left
    out, logged by id and listed in ``skipped``: one bad row must not fail a user's recall.
    Timestamps are not parsed: the epoch float stored at write time feeds the scorer.
    """
    count = len(ids)
    if not len(documents) == len(metadatas) == len(distances) == count:
        raise StoreError(
            f"Chroma returned ragged columns: {count} ids, {len(documents)} documents, "
            f"{len(metadatas)} metadatas, {len(distances)} distances"
        )
    if count == 0:
        return _empty_rows()
    raw = np.asarray(distances, dtype=np.float64)
    if not np.isfinite(raw).all() or raw.min() < -DISTANCE_NOISE or raw.max() > 2 + DISTANCE_NOISE:
        bad = next(d for d in raw.tolist() if not -DISTANCE_NOISE <= d <= 2 + DISTANCE_NOISE)
        raise StoreError(
            f"Chroma returned a distance of {bad!r} outside the cosine range [0, 2]; "
            "is the collection really cosine?"
        )
    owners = [(meta or {}).get("user_id", user_id) for meta in metadatas]
    if any(owner != user_id for owner in owners):
        intruder = next(i for i, owner in enumerate(owners) if owner != user_id)
        raise IsolationError(
            f"Chroma returned memory {ids[intruder]!r} of another user for a query scoped to "
            f"{shown(user_id)}; nothing was returned"
        )
    rows = _fast_rows(ids, documents, metadatas, raw)
    if rows is not None:
        return rows
    # Something is malformed: find the rows, log them by id, and map the rest.
    keep: list[int] = []
    skipped: list[str] = []
    for index, (ident, text, meta) in enumerate(zip(ids, documents, metadatas, strict=True)):
        problem = _row_problem(text, meta)
        if problem is None:
            keep.append(index)
            continue
        skipped.append(ident)
        logger.warning(
            "skipped stored memory %s of user %s: %s; re-ingest it through affect-memory",
            shown(ident),
            shown(user_id),
            problem,
        )
    if not keep:
        return _empty_rows(tuple(skipped))
    kept = _fast_rows(
        [ids[i] for i in keep],
        [documents[i] for i in keep],
        [metadatas[i] for i in keep],
        raw[keep],
    )
    assert kept is not None, "rows that pass _row_problem pass the column checks"
    return replace(kept, skipped=tuple(skipped))


def _fast_rows(
    ids: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    raw: np.ndarray,
) -> _Rows | None:
    """The rows as columns when every one is well formed, else None (the caller sorts out
    which are not)."""
    try:
        significance = [meta["significance"] for meta in metadatas]  # type: ignore[index]
        valence = [meta["emotional_valence"] for meta in metadatas]  # type: ignore[index]
        recalls = [meta["recall_count"] for meta in metadatas]  # type: ignore[index]
        episodes = [meta["episode"] for meta in metadatas]  # type: ignore[index]
        stamps = [meta["timestamp"] for meta in metadatas]  # type: ignore[index]
        epochs = [meta["timestamp_epoch"] for meta in metadatas]  # type: ignore[index]
        if any(type(v) is bool or type(v) is str for v in (*significance, *valence, *epochs)):
            return None
        sig = np.asarray(significance, dtype=np.float64)
        val = np.asarray(valence, dtype=np.float64)
        moments = np.asarray(epochs, dtype=np.float64)
    except (KeyError, TypeError, ValueError):
        return None
    if (
        not all(type(n) is int and 0 <= n <= MAX_RECALL_COUNT for n in recalls)
        or not all(type(flag) is bool for flag in episodes)
        or not all(type(stamp) is str for stamp in stamps)
        or not all(type(text) is str and len(text) <= MAX_TEXT_CHARS for text in documents)
        or not (np.isfinite(sig).all() and sig.min() >= 0.0 and sig.max() <= 1.0)
        or not (np.isfinite(val).all() and val.min() >= -1.0 and val.max() <= 1.0)
        or not (np.isfinite(moments).all() and moments.min() >= 0 and moments.max() <= MAX_EPOCH)
    ):
        return None
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


# ---------------------------------------------------------------- queries


def recall_query_problems(
    value: object, *, where: str | None = "query"
) -> tuple[RecallQuery | None, list[str]]:
    """The ``RecallQuery`` ``value`` describes, or every problem it has (each naming ``where``
    when given, the field and the value)."""
    label = f"{where}: " if where else ""
    if isinstance(value, RecallQuery):
        return value, []
    if not isinstance(value, Mapping):
        return None, [
            f"{label}expected a mapping with query, user_id and mood_valence?, got {shown(value)}"
        ]
    try:
        return RecallQuery.model_validate(value), []
    except ValidationError as error:
        return None, [f"{label}{explain_error(item)[0]}" for item in error.errors()]


def parse_recall_query(value: object, *, where: str | None = "query") -> RecallQuery:
    """A ``RecallQuery`` from a query or a mapping; the error names ``where`` (when given),
    every bad field and its value."""
    query, problems = recall_query_problems(value, where=where)
    if query is None:
        raise InvalidInputError(problems_message(problems))
    return query


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


@dataclass
class _Planned:
    """One user's part of a write: the collection and the records to write into it."""

    user_id: str
    collection: Any
    records: list[MemoryRecord]
    previous: dict[str, tuple[str, dict[str, Any], Any]] = field(default_factory=dict)
    """For upsert: the rows the write replaces (document, metadata, embedding) by id."""
    attempted: list[str] = field(default_factory=list)
    """Ids handed to Chroma so far (a failed call may have stored some of them)."""


class ChromaMemory:
    """Memories in Chroma, one collection per user: validated writes, scoped reads, recall.

    ``location`` is a directory (embedded, one process at a time), ``":memory:"`` (in-process,
    shared by every in-memory client of the process while one is open) or ``http://host:port``
    (a ``chroma run`` server, for several processes). ``collection`` is the prefix the users'
    collections are named under; ``timeout`` bounds every request to a server.
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
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._prefix = check_prefix(collection)
        if not isinstance(hnsw, HnswParams):
            raise StoreError(f"hnsw must be HnswParams, got {hnsw!r}")
        self._timeout = check_timeout(timeout)
        self._location: StoreLocation = parse_location(location)
        self._embedder: Embedder = (
            embedder if embedder is not None else SentenceTransformerEmbedder()
        )
        self._hnsw = hnsw
        self._progress = progress
        self._lock: PathLock | None = None
        self._closed = False
        self._collections: dict[str, Any] = {}
        self._guard = threading.Lock()
        self._client, self._lock = open_client(
            self._location, create=create, timeout=self._timeout
        )
        try:
            self._check_layout(create)
            self._max_batch = max(1, int(self._client.get_max_batch_size()))
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ opening

    def _check_layout(self, create: bool) -> None:
        """Refuse a store in the old single-collection layout; without ``create``, refuse a
        prefix that holds no user yet."""
        from chromadb.errors import NotFoundError

        where = self._location.describe()
        with self._backend("open the store"):
            try:
                shared = self._client.get_collection(self._prefix, embedding_function=None)
            except NotFoundError:
                shared = None
            if shared is not None:
                sample = shared.get(limit=1, include=["metadatas"])
                if sample["ids"] and "user_id" in (sample["metadatas"][0] or {}):
                    raise LegacyLayoutError(
                        f"{where} keeps memories in the old layout, every user in one collection "
                        f"{self._prefix!r}; run `affect-memory migrate "
                        f"{'--chroma' if self._location.kind == 'http' else '--data-dir'} "
                        f"...` to move them into one collection per user"
                    )
            if create:
                return
            listed = self._client.list_collections()
        if any(is_user_collection(self._prefix, c.name) for c in listed):
            return
        prefixes = sorted(
            {
                str((c.metadata or {}).get(PREFIX_KEY))
                if (c.metadata or {}).get(LAYOUT_KEY)
                else c.name
                for c in listed
            }
        )
        raise StoreError(
            f"no collection {self._prefix!r} at {where} (present: "
            f"{', '.join(prefixes) or 'none'}); ingest memories first or pass --collection"
        )

    def _user_collection(self, user_id: str, *, create: bool) -> Any | None:
        """``user_id``'s collection, checked to be theirs and cosine; None if it does not
        exist and ``create`` is false."""
        with self._guard:
            cached = self._collections.get(user_id)
        if cached is not None:
            return cached
        from chromadb.errors import ChromaError, NotFoundError

        name = user_collection_name(self._prefix, user_id)
        where = self._location.describe()
        with self._backend(f"open the collection of user {shown(user_id)}"):
            try:
                collection = self._client.get_collection(name, embedding_function=None)
            except NotFoundError:
                if not create:
                    return None
                configuration = {"hnsw": {"space": "cosine", **self._hnsw.model_dump()}}
                try:
                    collection = self._client.create_collection(
                        name,
                        configuration=configuration,
                        metadata=collection_metadata(self._prefix, user_id, self._embedder.name),
                        embedding_function=None,
                    )
                except ChromaError:
                    # Another process created it between our get and create: use theirs.
                    collection = self._client.get_collection(name, embedding_function=None)
        check_user_collection(name, collection.metadata, self._prefix, user_id, where)
        hnsw = (collection.configuration or {}).get("hnsw") or {}
        space = hnsw.get("space") or ((collection.configuration or {}).get("spann") or {}).get(
            "space"
        )
        if space != "cosine":
            raise WrongSpaceError(
                f"collection {name!r} at {where} (user {shown(user_id)}) uses the {space!r} "
                "distance space, but affect-memory scores cosine distances in [0, 2] and would "
                "misrank anything else; Chroma cannot change the space of an existing "
                "collection, so delete this one or use another prefix (--collection NAME)"
            )
        recorded = (collection.metadata or {}).get("embedder")
        if recorded is not None and recorded != self._embedder.name:
            raise StoreError(
                f"collection {name!r} at {where} was filled with embedder {recorded!r} but this "
                f"memory embeds with {self._embedder.name!r}; vectors of different models are "
                "not comparable - use the same model or another prefix (--collection NAME)"
            )
        with self._guard:
            return self._collections.setdefault(user_id, collection)

    def _user_collections(self) -> list[tuple[str, Any]]:
        """Every user collection under the prefix, checked, as ``(user id, collection)``."""
        with self._backend("list collections"):
            listed = self._client.list_collections()
        found: list[tuple[str, Any]] = []
        for listing in listed:
            if not is_user_collection(self._prefix, listing.name):
                continue
            owner = (listing.metadata or {}).get(USER_KEY)
            if not isinstance(owner, str) or user_collection_name(self._prefix, owner) != (
                listing.name
            ):
                raise IsolationError(
                    f"collection {listing.name!r} at {self._location.describe()} is named like "
                    f"a user collection of {self._prefix!r} but records user {shown(owner)}; "
                    "it is not used - rename or delete it"
                )
            collection = self._user_collection(owner, create=False)
            if collection is not None:
                found.append((owner, collection))
        return found

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
            import httpx

            where = self._location.describe()
            if isinstance(error, httpx.TimeoutException):
                raise StoreUnavailableError(
                    f"cannot {action}: the Chroma server at {where} did not answer within "
                    f"{self._timeout:g} s (timeout={self._timeout:g}); is it stopped or "
                    "overloaded? (raise the timeout with timeout= or --timeout)"
                ) from error
            hint = " (is the Chroma server still running?)" if self._location.kind == "http" else ""
            unavailable = isinstance(error, httpx.TransportError) or "connect" in str(error).lower()
            kind = StoreUnavailableError if unavailable else StoreError
            raise kind(
                f"cannot {action} in {where}: {type(error).__name__}: {shown(str(error))[1:-1]}"
                f"{hint}"
            ) from error

    # ------------------------------------------------------------------ properties

    @property
    def location(self) -> str:
        """The store location as given (path, ``:memory:`` or URL)."""
        return self._location.describe()

    @property
    def collection_name(self) -> str:
        """The prefix the users' collections are named under."""
        return self._prefix

    @property
    def timeout(self) -> float:
        """Seconds a server request may take before ``StoreUnavailableError``."""
        return self._timeout

    @property
    def embedder(self) -> Embedder:
        """The embedder every document and query goes through."""
        return self._embedder

    def collection_for(self, user_id: str) -> str:
        """The name of the Chroma collection that holds (or will hold) ``user_id``'s memories."""
        return user_collection_name(self._prefix, _check_user(user_id))

    # ------------------------------------------------------------------ writes

    def add(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store new records; ids the record's user already has are left untouched and
        reported as skipped (the same id under another user is another memory).

        The batch is validated whole first, and a failed write removes what it had stored.
        """
        batch = validate_records(records)
        plans: list[_Planned] = []
        stored: set[tuple[str, str]] = set()
        for user_id, group in _by_user(batch).items():
            collection = self._user_collection(user_id, create=False)
            existing = self._existing(collection, [r.id for r in group])
            stored.update((user_id, ident) for ident in existing)
            todo = [r for r in group if r.id not in existing]
            if todo:
                plans.append(_Planned(user_id, collection, todo))
        self._write(plans, replace=False, progress=progress)
        return WriteReport(
            written=sum(len(plan.records) for plan in plans),
            skipped=tuple(r.id for r in batch if (r.user_id, r.id) in stored),
        )

    def upsert(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store records, replacing the record's user's memories under the same ids.

        Validated whole first; a failed write puts back every row it had replaced and removes
        the ones it had added, so no batch is left half replaced.
        """
        batch = validate_records(records)
        plans: list[_Planned] = []
        for user_id, group in _by_user(batch).items():
            collection = self._user_collection(user_id, create=False)
            plan = _Planned(user_id, collection, group)
            if collection is not None:
                plan.previous = self._snapshot(collection, [r.id for r in group])
            plans.append(plan)
        self._write(plans, replace=True, progress=progress)
        return WriteReport(written=len(batch))

    def _existing(self, collection: Any | None, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        if collection is None:
            return found
        with self._backend("look up ids"):
            for chunk in _chunks(ids, self._max_batch):
                found.update(collection.get(ids=list(chunk), include=[])["ids"])
        return found

    def _snapshot(
        self, collection: Any, ids: Sequence[str]
    ) -> dict[str, tuple[str, dict[str, Any], Any]]:
        """The stored rows of ``ids`` (document, metadata, embedding), to undo an upsert."""
        rows: dict[str, tuple[str, dict[str, Any], Any]] = {}
        with self._backend("read the rows an upsert replaces"):
            for chunk in _chunks(ids, self._max_batch):
                got = collection.get(
                    ids=list(chunk), include=["documents", "metadatas", "embeddings"]
                )
                for ident, text, meta, vector in zip(
                    got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
                ):
                    rows[ident] = (text, dict(meta or {}), vector)
        return rows

    def _show_progress(self, total: int, asked: bool | None) -> bool:
        wanted = asked if asked is not None else self._progress
        if wanted is None:
            wanted = sys.stderr.isatty()
        return bool(wanted) and total >= PROGRESS_MIN

    def _write(self, plans: Sequence[_Planned], *, replace: bool, progress: bool | None) -> None:
        """Embed and write every plan in chunks; on any failure undo the call, then raise."""
        total = sum(len(plan.records) for plan in plans)
        if not total:
            return
        from tqdm import tqdm

        chunk_size = min(self._max_batch, _WRITE_CHUNK)
        bar = tqdm(
            total=total,
            unit="memory",
            desc="ingest",
            disable=not self._show_progress(total, progress),
            file=sys.stderr,
        )
        action = "upsert" if replace else "add"
        try:
            with bar:
                for plan in plans:
                    if plan.collection is None:
                        plan.collection = self._user_collection(plan.user_id, create=True)
                    write = plan.collection.upsert if replace else plan.collection.add
                    for chunk in _chunks(plan.records, chunk_size):
                        texts = [record.text for record in chunk]
                        vectors = check_embeddings(
                            self._embedder.embed_documents(texts), len(texts)
                        )
                        ids = [record.id for record in chunk]
                        plan.attempted.extend(ids)
                        with self._backend("write memories"):
                            write(
                                ids=ids,
                                embeddings=vectors,
                                documents=texts,
                                metadatas=[record.to_metadata() for record in chunk],
                            )
                        bar.update(len(chunk))
        except BaseException as error:
            attempted = sum(len(plan.attempted) for plan in plans)
            try:
                self._undo(plans)
            except BaseException as undo_error:
                raise StoreError(
                    f"{action} failed ({error}) and undoing it failed too ({undo_error}): up to "
                    f"{attempted:,} of its records may be stored; run the same {action} again "
                    "to complete it"
                ) from error
            if isinstance(error, StoreError | EmbeddingError) and attempted:
                raise type(error)(
                    f"{error}; nothing of this {action} was kept (the {attempted:,} records it "
                    "had sent were taken back)"
                ) from error
            raise

    def _undo(self, plans: Sequence[_Planned]) -> None:
        """Take back what ``_write`` sent: delete added ids, put replaced rows back."""
        for plan in plans:
            if not plan.attempted or plan.collection is None:
                continue
            added = [ident for ident in plan.attempted if ident not in plan.previous]
            replaced = [ident for ident in plan.attempted if ident in plan.previous]
            with self._backend("undo a failed write"):
                for part in _chunks(added, self._max_batch):
                    plan.collection.delete(ids=list(part))
                for part in _chunks(replaced, self._max_batch):
                    rows = [plan.previous[ident] for ident in part]
                    plan.collection.upsert(
                        ids=list(part),
                        documents=[text for text, _, _ in rows],
                        metadatas=[meta for _, meta, _ in rows],
                        embeddings=np.asarray([vector for _, _, vector in rows], dtype=np.float32),
                    )

    # ------------------------------------------------------------------ retrieval

    def _check_candidates(self, candidates: object) -> int:
        try:
            n = check_int(candidates, 1)
        except ValueError as error:
            raise InvalidInputError(f"candidates {error}") from None
        if n > MAX_CANDIDATES:
            raise InvalidInputError(
                f"candidates must be between 1 and {MAX_CANDIDATES}, got {shown(candidates)}"
            )
        return n

    def _embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return check_embeddings(self._embedder.embed_documents(list(queries)), len(queries))

    def _query(self, vectors: np.ndarray, user_id: str, n: int) -> list[_Rows]:
        """The one query path: nearest ``n`` of ``user_id``'s memories for each vector.

        The user's own collection is searched without a ``where`` filter (isolation is the
        layout's); the mapper still checks every row's owner.
        """
        user_id = _check_user(user_id)
        collection = self._user_collection(user_id, create=False)
        if collection is None:
            return [_empty_rows() for _ in range(len(vectors))]
        with self._backend("query memories"):
            result = collection.query(
                query_embeddings=vectors,
                n_results=n,
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
        try:
            query = check_query(query)
        except ValueError as error:
            raise InvalidInputError(f"query {error}") from None
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
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int = DEFAULT_CANDIDATES,
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
        """Recall for many queries: one embedding batch, one Chroma query per user. Read-only.

        Scores, distances and similarities agree with one ``recall`` per query within
        ``RECALL_MANY_TOLERANCE`` (1e-6; the model embeds a query in a batch slightly
        differently, in the last bits), and so does the order, except between results whose
        scores are within that of each other.
        """
        if isinstance(queries, Mapping | BaseModel | str):
            raise InvalidInputError(
                f"recall_many takes a list of queries, got one {type(queries).__name__}; "
                "use recall() for a single query"
            )
        items = list(queries)
        checked: list[RecallQuery] = []
        problems: list[str] = []
        for index, item in enumerate(items):
            where = f"query {index}" if len(items) > 1 else None
            query, found = recall_query_problems(item, where=where)
            if query is None:
                problems.extend(found)
            else:
                checked.append(query)
        if problems:
            raise InvalidInputError(problems_message(problems))
        moment = datetime.now(UTC) if now is None else normalize_timestamp(now, field="now").moment
        try:
            top_k = check_int(top_k, 1)
        except ValueError as error:
            raise InvalidInputError(f"top_k {error}") from None
        if top_k > MAX_CANDIDATES:
            raise InvalidInputError(f"top_k must be <= {MAX_CANDIDATES}, got {shown(top_k)}")
        n = max(self._check_candidates(candidates), top_k)
        if not checked:
            return []
        vectors = self._embed_queries([query.query for query in checked])
        by_user: dict[str, list[int]] = {}
        for index, query in enumerate(checked):
            by_user.setdefault(query.user_id, []).append(index)
        found_rows: dict[int, _Rows] = {}
        for user_id, indices in by_user.items():
            for index, rows in zip(indices, self._query(vectors[indices], user_id, n), strict=True):
                found_rows[index] = rows
        stamp = moment.astimezone(UTC).isoformat(timespec="microseconds")
        return [
            RecallResult(
                query.query,
                query.user_id,
                stamp,
                _rank(found_rows[index], moment, query.mood_valence, top_k, congruence_on, weights),
                found_rows[index].skipped,
            )
            for index, query in enumerate(checked)
        ]

    # ------------------------------------------------------------------ reads and deletes

    def get(self, ids: Iterable[str], *, user_id: str) -> tuple[MemoryRecord, ...]:
        """``user_id``'s stored records for ``ids``, in the order asked; ids that user does not
        have are left out, and so are malformed rows (logged)."""
        user_id = _check_user(user_id)
        wanted = _check_ids(ids)
        collection = self._user_collection(user_id, create=False)
        if collection is None or not wanted:
            return ()
        rows: dict[str, MemoryRecord] = {}
        with self._backend("read memories"):
            for chunk in _chunks(wanted, self._max_batch):
                got = collection.get(ids=list(chunk), include=["documents", "metadatas"])
                for ident, text, meta in zip(
                    got["ids"], got["documents"], got["metadatas"], strict=True
                ):
                    try:
                        rows[ident] = MemoryRecord.from_stored(ident, text, meta or {})
                    except ValidationError as error:
                        logger.warning(
                            "skipped stored memory %s of user %s: %s",
                            shown(ident),
                            shown(user_id),
                            explain_error(error.errors()[0])[0],
                        )
        return tuple(rows[ident] for ident in wanted if ident in rows)

    def forget(self, ids: Iterable[str], *, user_id: str) -> tuple[str, ...]:
        """Delete ``user_id``'s memories with these ids; returns the ids removed.

        ``user_id`` is required: ids are per user, so an unscoped forget could only guess.
        """
        user_id = _check_user(user_id)
        wanted = _check_ids(ids)
        collection = self._user_collection(user_id, create=False)
        if collection is None or not wanted:
            return ()
        present: set[str] = set()
        with self._backend("forget memories"):
            for chunk in _chunks(wanted, self._max_batch):
                present.update(collection.get(ids=list(chunk), include=[])["ids"])
            removed = [ident for ident in wanted if ident in present]
            for chunk in _chunks(removed, self._max_batch):
                collection.delete(ids=list(chunk))
        return tuple(removed)

    def count(self, user_id: str | None = None) -> int:
        """How many memories are stored, in total or for one user."""
        if user_id is None:
            collections = [collection for _, collection in self._user_collections()]
        else:
            collection = self._user_collection(_check_user(user_id), create=False)
            collections = [] if collection is None else [collection]
        with self._backend("count memories"):
            return sum(int(collection.count()) for collection in collections)

    def stats(self) -> MemoryStats:
        """Memories per user (by their real ids), the space and HNSW settings, size on disk."""
        users: dict[str, int] = {}
        configuration: Mapping[str, Any] = {"hnsw": {"space": "cosine", **self._hnsw.model_dump()}}
        embedder: str | None = self._embedder.name
        collections = self._user_collections()
        with self._backend("count memories"):
            for user_id, collection in collections:
                held = int(collection.count())
                if held:  # a user whose memories were all forgotten has none to list
                    users[user_id] = held
        if collections:
            first = collections[0][1]
            configuration = first.configuration or {}
            embedder = (first.metadata or {}).get("embedder")
        hnsw = dict(configuration.get("hnsw") or {})
        size = None
        if self._location.kind == "path" and self._location.path is not None:
            size = _directory_size(self._location.path)
        return MemoryStats(
            location=self.location,
            collection=self._prefix,
            space=str(hnsw.get("space")),
            hnsw={key: hnsw[key] for key in HnswParams.model_fields if key in hnsw},
            embedder=embedder,
            count=sum(users.values()),
            users=dict(sorted(users.items())),
            size_bytes=size,
            collections=len(collections),
        )

    # ------------------------------------------------------------------ turn writes

    def apply_turn_writes(
        self,
        turn_id: str,
        *,
        user_id: str,
        recalled_ids: Sequence[str] = (),
        recalled_at: str | datetime | float | None = None,
        new_record: MemoryRecord | Mapping[str, Any] | None = None,
        replace_new: bool = False,
    ) -> TurnWriteReport:
        """Apply one committed turn's memory writes to ``user_id``'s memories; applying the
        same turn again changes nothing.

        Each surfaced memory gets ``recall_count + 1`` (stopping at 2**53 - 1) and
        ``last_recalled_at`` once: the turn id is appended to the memory's ``recall_turns``
        (the last 32 kept) and rows already carrying it are skipped. ``new_record`` (the user
        message, with a deterministic id, owned by ``user_id``) is inserted if absent, so a
        late replay cannot reset counts later turns added; pass ``replace_new=True`` to
        overwrite instead. Not atomic across processes: two writers recalling the same memory
        at once through one server can lose an increment.
        """
        if not isinstance(turn_id, str) or not 1 <= len(turn_id) <= 256:
            raise InvalidInputError(
                f"turn_id must be a 1-256 character string, got {shown(turn_id)}"
            )
        user_id = _check_user(user_id)
        ids = _check_ids(recalled_ids, "recalled_ids")
        record = None
        if new_record is not None:
            record = validate_records([new_record], label="new_record")[0]
            if record.user_id != user_id:
                raise InvalidInputError(
                    f"new_record belongs to user {shown(record.user_id)}, but the turn writes "
                    f"are for user {shown(user_id)}"
                )
        incremented: list[str] = []
        applied: list[str] = []
        missing: list[str] = []
        skipped: list[str] = []
        if ids:
            if recalled_at is None:
                raise InvalidInputError("recalled_at is required when recalled_ids are given")
            when = normalize_timestamp(recalled_at, field="recalled_at")
            collection = self._user_collection(user_id, create=False)
            updates: list[tuple[str, dict[str, Any]]] = []
            stored: dict[str, Mapping[str, Any]] = {}
            with self._backend("update recalled memories"):
                if collection is not None:
                    for chunk in _chunks(ids, self._max_batch):
                        got = collection.get(ids=list(chunk), include=["metadatas"])
                        metas = (m or {} for m in got["metadatas"])
                        stored.update(zip(got["ids"], metas, strict=True))
                for ident in ids:
                    meta = stored.get(ident)
                    if meta is None:
                        missing.append(ident)
                        continue
                    turns = meta.get("recall_turns") or []
                    if not isinstance(turns, list):
                        turns = []
                    if turn_id in turns:
                        applied.append(ident)
                        continue
                    count = meta.get("recall_count", 0)
                    if type(count) is not int or not 0 <= count <= MAX_RECALL_COUNT:
                        skipped.append(ident)
                        logger.warning(
                            "turn %s left memory %s of user %s unchanged: its stored "
                            "recall_count %s is malformed",
                            turn_id,
                            shown(ident),
                            shown(user_id),
                            shown(count),
                        )
                        continue
                    updates.append(
                        (
                            ident,
                            {
                                "recall_count": min(count + 1, MAX_RECALL_COUNT),
                                "last_recalled_at": when.iso,
                                "last_recalled_epoch": when.epoch,
                                "recall_turns": [*turns, turn_id][-RECALL_TURNS_KEPT:],
                            },
                        )
                    )
                if collection is not None:
                    for part in _chunks(updates, self._max_batch):
                        collection.update(
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
        return TurnWriteReport(
            tuple(incremented), tuple(applied), tuple(missing), stored_new, tuple(skipped)
        )

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
        return f"ChromaMemory({self.location!r}, collection={self._prefix!r})"


def _by_user(records: Sequence[MemoryRecord]) -> dict[str, list[MemoryRecord]]:
    groups: dict[str, list[MemoryRecord]] = {}
    for record in records:
        groups.setdefault(record.user_id, []).append(record)
    return groups

