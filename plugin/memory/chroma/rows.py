"""The one mapper from what Chroma returns to checked values: every read of stored rows is here.

Rows were validated whole when written (``MemoryRecord``); the cheap checks here still refuse a
row of another user (``IsolationError``) and distances outside [0, 2] beyond float noise
(``StoreError``). A row some other writer left without, or with malformed, affect metadata is
left out, logged by id and listed as skipped: one bad row must not fail a user's recall, turn
or read. Timestamps are not parsed: the epoch float stored at write time feeds the scorer.

A query's rows become kernel ``CandidateColumns`` (what recall ranks; the recall pipeline turns
the ranked ones into the engine's ``MemoryCandidate``s); a ``get`` becomes records, ids or
snapshots.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import ValidationError

from affect_memory.errors import IsolationError, StoreError
from affect_memory.kernel.batch import DISTANCE_TOLERANCE, CandidateColumns
from affect_memory.kernel.errors import shown
from affect_memory.kernel.models import MAX_TEXT_CHARS
from affect_memory.memory.problems import explain_error
from affect_memory.memory.records import MAX_RECALL_COUNT, MemoryRecord
from affect_memory.memory.timestamps import MAX_EPOCH

__all__ = [
    "StoredRow",
    "StoredRows",
    "check_owners",
    "ids_of",
    "records_of",
    "row_problem",
    "rows_from_query",
    "rows_of",
    "snapshots_of",
]

logger = logging.getLogger(__name__)

_ROW_KEYS = (
    "user_id",
    "significance",
    "emotional_valence",
    "recall_count",
    "episode",
    "timestamp",
    "timestamp_epoch",
)


@dataclass(frozen=True, slots=True)
class StoredRows:
    """One query's rows, checked, as the kernel's columns plus the texts and timestamps."""

    columns: CandidateColumns
    texts: list[str]
    timestamps: list[str]
    skipped: tuple[str, ...] = ()
    """Ids of malformed rows left out (each was logged)."""

    @classmethod
    def empty(cls, skipped: tuple[str, ...] = ()) -> StoredRows:
        """No rows (a user without memories), or only malformed ones, which were skipped."""
        floats = np.zeros(0, dtype=np.float64)
        columns = CandidateColumns(
            ids=[],
            distances=floats,
            epochs=floats,
            significance=floats,
            recall_counts=np.zeros(0, dtype=np.int64),
            episodes=np.zeros(0, dtype=bool),
            valences=floats,
        )
        return cls(columns, [], [], skipped)

    @property
    def ids(self) -> list[str]:
        """The rows' memory ids, nearest first."""
        return list(self.columns.ids)

    def __len__(self) -> int:
        """How many rows there are."""
        return len(self.columns)


def check_owners(
    ids: Sequence[str], metadatas: Sequence[Mapping[str, Any] | None], user_id: str, read: str
) -> None:
    """Refuse rows whose ``user_id`` metadata names another user than ``user_id``.

    The one owner check of every read (queries, ``get``): a row without the key is left to
    ``row_problem``, which skips it as malformed.
    """
    for ident, meta in zip(ids, metadatas, strict=True):
        owner = (meta or {}).get("user_id", user_id)
        if owner != user_id:
            raise IsolationError(
                f"Chroma returned memory {ident!r} of another user for {read} scoped to "
                f"{shown(user_id)}; nothing was returned"
            )


def _is_number(value: object, low: float, high: float) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )


def row_problem(text: object, meta: object) -> str | None:
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


def rows_from_query(
    ids: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    distances: Sequence[float],
    user_id: str,
) -> StoredRows:
    """One query's columnar Chroma result as checked rows of ``user_id``, column by column."""
    count = len(ids)
    if not len(documents) == len(metadatas) == len(distances) == count:
        raise StoreError(
            f"Chroma returned ragged columns: {count} ids, {len(documents)} documents, "
            f"{len(metadatas)} metadatas, {len(distances)} distances"
        )
    if count == 0:
        return StoredRows.empty()
    raw = np.asarray(distances, dtype=np.float64)
    low, high = -DISTANCE_TOLERANCE, 2 + DISTANCE_TOLERANCE
    if not np.isfinite(raw).all() or raw.min() < low or raw.max() > high:
        bad = next(d for d in raw.tolist() if not low <= d <= high)
        raise StoreError(
            f"Chroma returned a distance of {bad!r} outside the cosine range [0, 2]; "
            "is the collection really cosine?"
        )
    check_owners(ids, metadatas, user_id, "a query")
    rows = _fast_rows(ids, documents, metadatas, raw)
    if rows is not None:
        return rows
    # Something is malformed: find the rows, log them by id, and map the rest.
    keep: list[int] = []
    skipped: list[str] = []
    for index, (ident, text, meta) in enumerate(zip(ids, documents, metadatas, strict=True)):
        problem = row_problem(text, meta)
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
        return StoredRows.empty(tuple(skipped))
    kept = _fast_rows(
        [ids[i] for i in keep],
        [documents[i] for i in keep],
        [metadatas[i] for i in keep],
        raw[keep],
    )
    assert kept is not None, "rows that pass row_problem pass the column checks"
    return replace(kept, skipped=tuple(skipped))


def _fast_rows(
    ids: Sequence[str],
    documents: Sequence[str | None],
    metadatas: Sequence[Mapping[str, Any] | None],
    raw: np.ndarray,
) -> StoredRows | None:
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
    columns = CandidateColumns(
        ids=list(ids),
        distances=np.clip(raw, 0.0, 2.0),
        epochs=moments,
        significance=sig,
        recall_counts=np.asarray(recalls, dtype=np.int64),
        episodes=np.asarray(episodes, dtype=bool),
        valences=val,
    )
    return StoredRows(columns, list(documents), stamps)  # type: ignore[arg-type]


def rows_of(result: Mapping[str, Any], user_id: str) -> list[StoredRows]:
    """A Chroma ``query`` result (one list per query vector) as checked rows, one per query."""
    columns = zip(
        result["ids"],
        result["documents"],
        result["metadatas"],
        result["distances"],
        strict=True,
    )
    return [rows_from_query(*column, user_id) for column in columns]


# ---------------------------------------------------------------- reads by id


def ids_of(got: Mapping[str, Any]) -> list[str]:
    """The ids a Chroma ``get`` found."""
    return list(got["ids"])


def records_of(got: Mapping[str, Any], user_id: str) -> dict[str, MemoryRecord]:
    """The records a ``get`` (documents and metadatas) found, by id; malformed rows are logged
    and left out."""
    check_owners(got["ids"], got["metadatas"], user_id, "a read")
    records: dict[str, MemoryRecord] = {}
    for ident, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
        try:
            records[ident] = MemoryRecord.from_stored(ident, text, meta or {})
        except ValidationError as error:
            logger.warning(
                "skipped stored memory %s of user %s: %s",
                shown(ident),
                shown(user_id),
                explain_error(error.errors()[0])[0],
            )
    return records


StoredRow = tuple[str, dict[str, Any], Any]
"""A stored row as it is: document, metadata and embedding (to put it back)."""


def snapshots_of(got: Mapping[str, Any]) -> dict[str, StoredRow]:
    """The rows a ``get`` (documents, metadatas and embeddings) found, as they are, by id."""
    return {
        ident: (text, dict(meta or {}), vector)
        for ident, text, meta, vector in zip(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
        )
    }
