"""The users' Chroma collections of one store: opened, created, checked and cached, one per user.

A user's collection is created cosine with ``DEFAULT_HNSW`` and ``sync_threshold`` 1, and
recorded as theirs (``affect_memory.memory.chroma.layout``); one recording another user, another
space or another embedder is refused, and a store still in the old single-collection layout is
refused on open.

Why ``sync_threshold`` 1: chromadb 1.5.9 writes a collection's HNSW index to disk only once
``sync_threshold`` records (default 1,000) have arrived since the last sync. Its index cache
(``RLIMIT_NOFILE // 5`` indexes embedded, a YAML setting on a server) evicts loaded indexes
when many users are active, and reloading one that was never written fails for the rest of
the process ("Error creating hnsw segment reader: Nothing found on disk", on every query and
add). With 1, every write is synced; it costs no measurable write time. A collection created
before this (1,000) is switched to 1 with ``modify`` the first time it is opened.

Every
backend call runs inside ``backend(action)``, which turns Chroma's and httpx's failures into
``StoreError``s saying what failed and where (``StoreUnavailableError`` for an unreachable or
timed-out server).

The module is about 470 lines because opening, creating, checking and caching a user's collection
are one sequence with one cache and one lock; split, the order that keeps two threads from creating
a collection twice could not be read in one place.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from affect_memory.errors import (
    IsolationError,
    LegacyLayoutError,
    StoreError,
    StoreUnavailableError,
    WrongSpaceError,
)
from affect_memory.kernel.bounds import PositiveInt
from affect_memory.kernel.errors import AffectMemoryError, shown
from affect_memory.kernel.models import FrozenModel
from affect_memory.memory.chroma.layout import (
    DEFAULT_COLLECTION,
    LAYOUT_KEY,
    MIGRATED_KEY,
    PREFIX_KEY,
    USER_KEY,
    VERIFIED,
    check_user_collection,
    collection_metadata,
    is_user_collection,
    user_collection_name,
)
from affect_memory.memory.chroma.location import StoreLocation, index_cache_size, open_client

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_HNSW",
    "LIST_PAGE",
    "SYNC_THRESHOLD",
    "HnswParams",
    "UserCollections",
    "configured_hnsw",
    "migrate_command",
    "recorded_embedder",
    "stored_configuration",
]


def _old_layout_rows(directory: Path, name: str) -> bool:
    """Whether collection ``name`` of the embedded store at ``directory`` holds a row naming
    its user, read from Chroma's SQLite file (for a collection Chroma itself cannot read)."""
    database = directory / "chroma.sqlite3"
    connection = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
    try:
        found = connection.execute(
            "SELECT 1 FROM collections c JOIN segments s ON s.collection = c.id "
            "JOIN embeddings e ON e.segment_id = s.id "
            "JOIN embedding_metadata m ON m.id = e.id AND m.key = 'user_id' "
            "WHERE c.name = ? LIMIT 1",
            (name,),
        ).fetchone()
    finally:
        connection.close()
    return found is not None


class HnswParams(FrozenModel):
    """HNSW build and search parameters a new collection is created with (fixed for life)."""

    ef_construction: PositiveInt = 200
    ef_search: PositiveInt = 500
    max_neighbors: PositiveInt = 32


DEFAULT_HNSW = HnswParams()
"""Measured for recall@64 >= 0.98 with a per-user filter at 20,000 memories: 1.0000 on real
embeddings and on random unit vectors (docs/guides/scale-out.md;
``python -m affect_memory.bench.hnsw_sweep`` sweeps the settings,
``affect-memory bench recall --real 20000`` re-measures this one)."""


SYNC_THRESHOLD = 1
"""Records after which Chroma writes a collection's HNSW index to disk: every write (see above)."""

LIST_PAGE = 1_000
"""Collections listed per ``list_collections`` call."""


def stored_configuration(collection: Any) -> dict[str, Any]:
    """A collection's configuration as Chroma stored it: a plain dict with ``hnsw``, ``spann``.

    Read raw, never through ``collection.configuration``: chromadb 1.5.9 records a collection
    created without an embedding function (ours: we embed ourselves and never let Chroma attach
    its default one) as ``"embedding_function": {"type": "legacy"}``, the only record it has for
    "none" (``create_collection_configuration_to_json``), and every parse of that record warns
    "legacy embedding function config". The only other records name a registered embedding
    function, which every client reading the store would then have to register too.
    """
    raw = getattr(collection, "configuration_json", None)
    return dict(raw) if isinstance(raw, Mapping) else {}


@contextmanager
def _legacy_config_unwarned() -> Iterator[None]:
    """Silence exactly chromadb's "legacy embedding function config" warning, for one call.

    ``modify(configuration=...)`` re-parses the stored configuration to merge the change in,
    and a configuration without an embedding function is "legacy" to chromadb 1.5.9 however
    it was created (see ``stored_configuration``): there is nothing to migrate, so the warning
    says nothing about this store.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "legacy embedding function config", DeprecationWarning)
        yield


def configured_hnsw(collection: Any) -> dict[str, Any]:
    """A collection's HNSW configuration (its ``space`` included) as Chroma reports it."""
    return dict(stored_configuration(collection).get("hnsw") or {})


def _space(collection: Any) -> object:
    configuration = stored_configuration(collection)
    hnsw = configuration.get("hnsw") or {}
    return hnsw.get("space") or (configuration.get("spann") or {}).get("space")


def migrate_command(location: StoreLocation, prefix: str) -> str:
    """How to move this store's old layout: the ``affect-memory migrate`` command, quoted."""
    named = "" if prefix == DEFAULT_COLLECTION else f" --collection {prefix}"
    if location.kind == "http":
        return f"`affect-memory migrate --chroma {location.describe()}{named}`"
    if location.kind == "path" and location.path is not None and location.path.name == "chroma":
        return f"`affect-memory migrate --data-dir {location.path.parent}{named}`"
    if location.kind == "memory":  # no command reaches another process's in-memory store
        return (
            f"`affect_memory.migrate_store(':memory:', collection={prefix!r})` (the Python form of "
            "`affect-memory migrate`)"
        )
    return f"`affect-memory migrate --store {location.describe()}{named}`"


def recorded_embedder(collection: Any) -> str | None:
    """The embedder a collection was filled with, as recorded when it was created."""
    embedder = (collection.metadata or {}).get("embedder")
    return None if embedder is None else str(embedder)


class UserCollections:
    """The per-user collections under one prefix of one store, and the client they live in."""

    def __init__(
        self,
        location: StoreLocation,
        prefix: str,
        *,
        embedder_name: str | None,
        hnsw: HnswParams,
        create: bool,
        timeout: float,
        index_cache: int | None = None,
        legacy: bool = False,
    ) -> None:
        """Open the store (locking an embedded path) and refuse an unusable layout
        (``legacy=True``, for ``migrate`` only, accepts the old one)."""
        self._location = location
        self._prefix = prefix
        self._embedder_name = embedder_name
        self._hnsw = hnsw
        self._timeout = timeout
        self._closed = False
        self._cached: dict[str, Any] = {}
        self._guard = threading.Lock()
        self._client, self._lock = open_client(
            location, create=create, timeout=timeout, index_cache=index_cache
        )
        try:
            if not legacy:
                self._check_layout(create)
            self.max_batch = max(1, int(self._client.get_max_batch_size()))  # rows per call
        except BaseException:
            self.close()
            raise

    @property
    def client(self) -> Any:
        """The Chroma client of the store."""
        return self._client

    @property
    def prefix(self) -> str:
        """The prefix the users' collections are named under (the old layout's collection)."""
        return self._prefix

    @property
    def location(self) -> StoreLocation:
        """Where the store lives."""
        return self._location

    @property
    def index_cache(self) -> int | None:
        """How many HNSW indexes the embedded store's cache holds (None for a server)."""
        return index_cache_size(self._client)

    @property
    def configuration(self) -> dict[str, Any]:
        """The configuration a new collection is created with."""
        return {
            "hnsw": {
                "space": "cosine",
                **self._hnsw.model_dump(),
                "sync_threshold": SYNC_THRESHOLD,
            }
        }

    @contextmanager
    def backend(self, action: str) -> Iterator[None]:
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

    def _check_layout(self, create: bool) -> None:
        """Refuse a store in the old single-collection layout; without ``create``, refuse a
        prefix that holds no user yet."""
        where = self._location.describe()
        with self.backend("open the store"):
            shared = self.existing(self._prefix)
            if shared is not None and self._old_collection_holds_users(shared):
                raise LegacyLayoutError(
                    f"{where} keeps memories in the old layout, every user in one collection "
                    f"{self._prefix!r}; run {migrate_command(self._location, self._prefix)} "
                    "to move them into one collection per user"
                )
        if create:
            return
        listed = self.listed()
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

    def _old_collection_holds_users(self, shared: Any) -> bool:
        """Whether the collection named like the prefix still holds old-layout rows.

        One whose vector segment a kill tore cannot be read at all (chromadb 1.5.9 fails every
        call on it); it never keeps the users' collections closed: one ``migrate`` verified is
        dropped by the next ``migrate``, and any other is judged from Chroma's SQLite file.
        """
        try:
            sample = shared.get(limit=1, include=["metadatas"])
        except Exception as error:  # chromadb raises InternalError for a torn segment
            return self._unreadable_old_collection(shared, error)
        return bool(sample["ids"]) and "user_id" in (sample["metadatas"][0] or {})

    def _unreadable_old_collection(self, shared: Any, error: Exception) -> bool:
        """Report an unreadable collection named like the prefix once; whether it still holds
        rows no ``migrate`` verified (then the store stays in the old layout)."""
        path = self._location.path if self._location.kind == "path" else None
        if (shared.metadata or {}).get(MIGRATED_KEY) == VERIFIED:
            holds = False
        elif path is not None:
            holds = _old_layout_rows(path, shared.name)
        else:
            raise error  # a server's collection: nothing to judge it by but Chroma
        fix = migrate_command(self._location, self._prefix)
        if (shared.metadata or {}).get(MIGRATED_KEY) == VERIFIED:
            verdict = (
                "every row of it was verified in its user's collection, so the users' "
                f"collections open without it; run {fix} to remove it"
            )
        elif holds:
            verdict = f"it still holds old-layout rows; run {fix} to move them"
        else:
            verdict = "it holds no user's memories, so the users' collections open without it"
        logger.warning(
            "collection %r at %s cannot be read (%s: %s); %s",
            shared.name,
            self._location.describe(),
            type(error).__name__,
            " ".join(str(error).split()),
            verdict,
        )
        return holds

    def of(self, user_id: str, *, create: bool) -> Any | None:
        """``user_id``'s collection, checked to be theirs and cosine; None if it does not
        exist and ``create`` is false."""
        with self._guard:
            cached = self._cached.get(user_id)
        if cached is not None:
            return cached
        from chromadb.errors import ChromaError, NotFoundError

        name = user_collection_name(self._prefix, user_id)
        with self.backend(f"open the collection of user {shown(user_id)}"):
            try:
                collection = self._client.get_collection(name, embedding_function=None)
            except NotFoundError:
                if not create:
                    return None
                try:
                    collection = self._client.create_collection(
                        name,
                        configuration=self.configuration,
                        metadata=collection_metadata(self._prefix, user_id, self._embedder_name),
                        embedding_function=None,
                    )
                except ChromaError:
                    # Another process created it between our get and create: use theirs.
                    collection = self._client.get_collection(name, embedding_function=None)
        return self._adopt(user_id, collection)

    def _adopt(self, user_id: str, collection: Any) -> Any:
        """Check ``collection`` is ``user_id``'s, cosine and of our embedder, make sure its
        index is synced on every write, and cache it."""
        name = collection.name
        where = self._location.describe()
        check_user_collection(name, collection.metadata, self._prefix, user_id, where)
        space = _space(collection)
        if space != "cosine":
            raise WrongSpaceError(
                f"collection {name!r} at {where} (user {shown(user_id)}) uses the {space!r} "
                "distance space, but affect-memory scores cosine distances in [0, 2] and would "
                "misrank anything else; Chroma cannot change the space of an existing "
                "collection, so delete this one or use another prefix (--collection NAME)"
            )
        recorded = recorded_embedder(collection)
        if (
            recorded is not None
            and self._embedder_name is not None
            and (recorded != self._embedder_name)
        ):
            raise StoreError(
                f"collection {name!r} at {where} was filled with embedder {recorded!r} but this "
                f"memory embeds with {self._embedder_name!r}; vectors of different models are "
                "not comparable - use the same model or another prefix (--collection NAME)"
            )
        if configured_hnsw(collection).get("sync_threshold") != SYNC_THRESHOLD:
            # Created before sync_threshold 1: without it an evicted index cannot be reloaded.
            with (
                self.backend(f"set sync_threshold on the collection of user {shown(user_id)}"),
                _legacy_config_unwarned(),
            ):
                collection.modify(configuration={"hnsw": {"sync_threshold": SYNC_THRESHOLD}})
        with self._guard:
            return self._cached.setdefault(user_id, collection)

    def drop(self, user_id: str) -> bool:
        """Delete ``user_id``'s collection, if it exists; whether it did (for an erasure)."""
        from chromadb.errors import NotFoundError

        with self._guard:
            self._cached.pop(user_id, None)
        name = user_collection_name(self._prefix, user_id)
        with self.backend(f"delete the collection of user {shown(user_id)}"):
            try:
                self._client.delete_collection(name)
            except NotFoundError:
                return False
        return True

    def existing(self, name: str) -> Any | None:
        """The collection ``name`` as it is (no checks of whose it is), or None if absent; call
        inside ``backend``."""
        from chromadb.errors import NotFoundError

        try:
            return self._client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return None

    def listed(self) -> list[Any]:
        """Every collection of the store, listed page by page (one call per 1,000)."""
        found: list[Any] = []
        with self.backend("list collections"):
            while True:
                page = self._client.list_collections(limit=LIST_PAGE, offset=len(found))
                found.extend(page)
                if len(page) < LIST_PAGE:
                    return found

    def every(self) -> list[tuple[str, Any]]:
        """Every user collection under the prefix, checked, as ``(user id, collection)``.

        One listing serves every user (it carries each collection's metadata and
        configuration), so this costs a call per 1,000 collections, not one per user.
        """
        found: list[tuple[str, Any]] = []
        for listing in self.listed():
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
            with self._guard:
                cached = self._cached.get(owner)
            found.append((owner, cached if cached is not None else self._adopt(owner, listing)))
        return found

    def close(self) -> None:
        """Release the Chroma client and the embedded store's lock; safe to call twice."""
        self._closed = True
        client, self._client = getattr(self, "_client", None), None
        if client is not None and hasattr(client, "close"):
            with suppress(Exception):  # closing must not mask the error that made us close
                client.close()
        lock, self._lock = getattr(self, "_lock", None), None
        if lock is not None:
            lock.release()
