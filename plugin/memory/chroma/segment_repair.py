"""Rebuilding a collection whose HNSW segment a killed write left unreadable (embedded stores).

chromadb 1.5.9 rewrites a collection's HNSW metadata file (``index_metadata.pickle``, beside
the vector files in ``<store>/<segment id>/``) whenever it syncs the index, which
``sync_threshold`` 1 makes every write (``affect_memory.memory.chroma.collections``), and not
atomically: a process killed while it writes the file leaves it truncated, and from then on every
call on that collection fails, ``count`` included ("Error deserializing pickle file"). The rows
themselves survive in Chroma's SQLite file, and the memory index holds each row's embedding.
So on opening an embedded store, a vector segment whose metadata file fails (it must end in
pickle's STOP byte; checked again under the user's lock by a full parse with an unpickler that
loads no class, since the metadata is a plain dictionary and nothing in it should run) is moved
aside, to ``<segment id>.damaged-<UTC time>``, kept for inspection (the latest
``DAMAGED_KEPT`` of each segment; older ones are deleted as a newer one is set aside). Its
collection's rows are then upserted again with the index's embeddings (the store's embedder's
for a row whose write was in flight), which rebuilds the segment, and the index takes each row
back as Chroma then returns it (a cosine collection normalises vectors again, which can move a
last bit). A marker file, written before the move and removed once every row is back, makes a
rebuild that is itself killed resume on the next open, into a fresh segment (the partial one
is deleted); one that fails is logged as an error
and keeps its marker, and the store opens for the other users.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.memory.chroma.collections import UserCollections
from affect_memory.memory.index.consistency.rehearsal import read_rehearsal
from affect_memory.memory.index.consistency.sync import index_held
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.recall.pool import index_vector
from affect_memory.models.embeddings import Embedder

__all__ = [
    "DAMAGED_KEPT",
    "METADATA_FILE",
    "DamagedSegment",
    "damaged_segments",
    "metadata_problem",
    "rebuild_collection",
    "repair_segments",
    "set_aside",
]

logger = logging.getLogger(__name__)

METADATA_FILE = "index_metadata.pickle"
"""The HNSW segment's metadata file that chromadb 1.5.9 rewrites in place."""

DAMAGED_KEPT = 3
"""Set-aside copies of one damaged segment kept for inspection; older ones are deleted."""

_MARKER = ".affect-memory-rebuild-{collection}"
_KEYS = frozenset({"dimensionality", "id_to_label", "label_to_id"})


@dataclass(frozen=True, slots=True)
class DamagedSegment:
    """A collection's vector segment found unreadable, or whose rebuild was interrupted."""

    segment_id: str
    collection: str
    """The collection's name."""
    problem: str | None
    """Why its metadata file cannot be read (None: it reads, but a rebuild was interrupted)."""
    interrupted: bool = False
    """Whether a rebuild of it was killed before every row was back."""

    @property
    def reason(self) -> str:
        """What was found, for the log."""
        parts = [self.problem] if self.problem is not None else []
        if self.interrupted:
            parts.append("an earlier rebuild was interrupted")
        return "; ".join(parts)


class _ClassRefused(pickle.UnpicklingError):
    """A pickle that names a class: ``_NoClasses`` loads none."""


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise _ClassRefused(f"refused to load {module}.{name}")


def metadata_problem(path: Path, *, whole: bool = False) -> str | None:
    """Why the metadata file at ``path`` cannot be read, or None when it reads as a dict.

    A file that ends in pickle's STOP opcode is taken as whole, by its last byte alone, unless
    ``whole`` asks for the full parse: a truncated one ends there only by chance (one cut in
    256 or so), and the full parse reads the whole file (about 36 bytes a row) and costs about
    2 ms per 1,000 rows of the collection.
    """
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            if not size:
                return f"{path.name} is empty"
            handle.seek(size - 1)
            if handle.read(1) == pickle.STOP and not whole:
                return None
            handle.seek(0)
            data = handle.read()
    except FileNotFoundError:
        return None  # a segment never synced has none yet: chromadb builds it from its log
    except OSError as error:
        return f"cannot read {path.name}: {error}"
    try:
        value = _NoClasses(io.BytesIO(data)).load()
    except _ClassRefused:
        return None  # an older format (a pickled class): not ours to judge
    except pickle.UnpicklingError as error:
        return f"{path.name} does not parse: {error}"
    except (EOFError, ValueError, TypeError, IndexError, KeyError) as error:
        return f"{path.name} does not parse: {type(error).__name__}: {error}"
    if not isinstance(value, dict) or not value.keys() >= _KEYS:
        return f"{path.name} holds no HNSW metadata"
    return None


def damaged_segments(directory: Path) -> list[DamagedSegment]:
    """The vector segments of the embedded store at ``directory`` that need a rebuild: those
    whose metadata file does not parse, and those a killed repair left marked."""
    database = directory / "chroma.sqlite3"
    if not database.is_file():
        return []
    connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT s.id, c.name FROM segments s JOIN collections c ON c.id = s.collection "
            "WHERE s.scope = 'VECTOR' ORDER BY c.name"
        ).fetchall()
    finally:
        connection.close()
    found = []
    for segment_id, name in rows:
        interrupted = (directory / _MARKER.format(collection=name)).exists()
        problem = metadata_problem(directory / segment_id / METADATA_FILE)
        if problem is not None or interrupted:
            found.append(DamagedSegment(segment_id, name, problem, interrupted))
    return found


def mark(directory: Path, segment: DamagedSegment) -> None:
    """Mark ``segment``'s collection for a rebuild (durably, before anything is moved)."""
    marker = directory / _MARKER.format(collection=segment.collection)
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write(f"{segment.segment_id}\n{segment.reason}\n")
        handle.flush()
        os.fsync(handle.fileno())


def set_aside(directory: Path, segment: DamagedSegment) -> Path | None:
    """Mark ``segment``'s collection for a rebuild, then clear its segment's files out of the
    way: an unreadable segment's are moved aside, and their new place returned; a readable
    one of a marked collection (a rebuild killed part way) is deleted, and None returned.

    The rebuild then inserts every row into a fresh segment: upserting over the rows a partial
    segment already holds rewires the graph for each, which took minutes where a fresh
    rebuild of the same 3,000 rows took 8 s.
    """
    mark(directory, segment)
    source = directory / segment.segment_id
    if not source.exists():
        return None
    if segment.problem is None:
        shutil.rmtree(source)
        _sync_directory(directory)
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = directory / f"{segment.segment_id}.damaged-{stamp}"
    source.rename(target)
    _sync_directory(directory)
    for older in sorted(directory.glob(f"{segment.segment_id}.damaged-*"))[:-DAMAGED_KEPT]:
        shutil.rmtree(older, ignore_errors=True)  # the stamps sort by time
    return target


def rebuild_collection(
    directory: Path,
    segment: DamagedSegment,
    collection: Any,
    embeddings_of: Callable[[Sequence[str], Sequence[str]], list[npt.ArrayLike | None]],
    embed: Callable[[Sequence[str]], npt.ArrayLike],
    batch: int,
) -> list[str]:
    """Upsert every row of ``collection`` again (its documents and metadata as Chroma holds
    them, with ``embeddings_of(ids, documents)``'s embeddings, or ``embed``'s of the document
    where that gives None), then drop the marker; the ids of the rows."""
    got = collection.get(include=["documents", "metadatas"])
    ids: list[str] = list(got["ids"])
    documents: list[str] = list(got["documents"])
    metadatas: list[Any] = list(got["metadatas"])
    for start in range(0, len(ids), batch):
        part = slice(start, start + batch)
        vectors = embeddings_of(ids[part], documents[part])
        missing = [at for at, vector in enumerate(vectors) if vector is None]
        if missing:
            fresh = np.asarray(embed([documents[part][at] for at in missing]), dtype=np.float64)
            for at, vector in zip(missing, fresh, strict=True):
                vectors[at] = vector
        collection.upsert(
            ids=ids[part],
            embeddings=[np.asarray(vector, dtype=np.float64).tolist() for vector in vectors],
            documents=documents[part],
            metadatas=metadatas[part],
        )
    (directory / _MARKER.format(collection=segment.collection)).unlink(missing_ok=True)
    _sync_directory(directory)
    return ids


def repair_segments(
    directory: Path, collections: UserCollections, index: MemoryIndex, embedder: Embedder
) -> list[tuple[DamagedSegment, int]]:
    """Rebuild every user collection of ``collections`` whose vector segment is damaged
    (``damaged_segments``), each under its user's index lock and logged as a warning; what
    was rebuilt, and how many rows.

    The caller holds the store's lock, so no other process writes it meanwhile; another
    store object of this process may, so each segment is checked again, fully, under its
    user's lock (which every writer holds). A rebuild that fails is logged as an error and
    leaves its marker: that user's calls fail as they did, the other users' work.
    """
    damaged = damaged_segments(directory)
    if not damaged:
        return []
    owners = {collection.name: (owner, collection) for owner, collection in collections.every()}
    rebuilt = []
    for found in damaged:
        if found.collection not in owners:
            if found.collection != collections.prefix:  # the old layout's: the layout check says
                logger.warning(
                    "the HNSW index of collection %s is damaged (%s); it is not a user "
                    "collection of this prefix, so the users' collections open without it "
                    "(rebuild it with the store that wrote it, or delete it)",
                    found.collection,
                    found.reason,
                )
            continue
        owner, collection = owners[found.collection]
        try:
            rows = _repair(directory, found, owner, collection, collections, index, embedder)
        except Exception as error:  # one user's rebuild must not keep the others out
            logger.error(
                "could not rebuild the HNSW index of user %r's collection %s (%s): %s: %s",
                owner,
                found.collection,
                found.reason,
                type(error).__name__,
                error,
            )
            continue
        if rows is not None:
            rebuilt.append(rows)
    return rebuilt


def _repair(
    directory: Path,
    found: DamagedSegment,
    owner: str,
    collection: Any,
    collections: UserCollections,
    index: MemoryIndex,
    embedder: Embedder,
) -> tuple[DamagedSegment, int] | None:
    """Rebuild one user's collection under their lock, if it still needs it then."""
    key, name = index.user_key(owner)
    with index.backend.lock(name, timeout=index.lock_timeout):
        problem = metadata_problem(directory / found.segment_id / METADATA_FILE, whole=True)
        interrupted = (directory / _MARKER.format(collection=found.collection)).exists()
        if problem is None and not interrupted:
            return None  # caught mid-rewrite by another store object of this process
        segment = DamagedSegment(found.segment_id, found.collection, problem, interrupted)
        moved = set_aside(directory, segment)
        with collections.backend(f"rebuild the collection of user {owner!r}"):
            ids = rebuild_collection(
                directory,
                segment,
                collection,
                _indexed_embeddings(index, owner, embedder.dimension),
                embedder.embed_documents,
                collections.max_batch,
            )
        # Chroma normalises a cosine collection's vectors again on the way in, which moves
        # the last bit of a few: the index takes back each row as Chroma now returns it
        index_held(index.backend, collections, key, collection, ids)
    logger.warning(
        "rebuilt the HNSW index of user %r's collection %s (%s): %d rows upserted again "
        "from Chroma's rows and the memory index's embeddings%s",
        owner,
        segment.collection,
        segment.reason,
        len(ids),
        "" if moved is None else f"; the damaged files are kept in {moved}",
    )
    return segment, len(ids)


def _indexed_embeddings(
    index: MemoryIndex, owner: str, dimension: int
) -> Callable[[Sequence[str], Sequence[str]], list[npt.ArrayLike | None]]:
    """The index's embedding of each of ``owner``'s rows whose text it holds as Chroma does
    (None for the others, and for one whose write is in flight)."""
    key, _ = index.user_key(owner)

    def embeddings_of(ids: Sequence[str], documents: Sequence[str]) -> list[npt.ArrayLike | None]:
        held = index.backend.read(
            lambda tx: read_rehearsal(tx, key, ids, fields=True, embeddings=True)
        ).ranked
        if held is None or held.embeddings is None:
            return [None] * len(ids)
        return [
            index_vector(blob, dimension) if text == document else None
            for blob, text, document in zip(held.embeddings, held.texts, documents, strict=True)
        ]

    return embeddings_of


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
