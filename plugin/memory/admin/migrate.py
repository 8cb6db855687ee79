"""Moving a store from the old layout (every user in one collection) to one collection per user.

The old layout kept every memory in one collection named like the prefix, each row naming its
owner in ``user_id``. ``migrate_store`` moves those rows into the users' own collections in
four steps, each safe to interrupt (a kill, a lost server) and to run again:

1. **copy**: the old collection is read page by page, vectors included; per user, the ids
   the user's collection already holds are looked up and the rest are added with the same
   vector, document and metadata. Nothing is re-embedded, so recall ranks the same rows the
   same way. A row already there must be the same row (document and metadata), or the
   migration stops: something else wrote it. A Chroma call is all or nothing, so a kill
   leaves whole pages, and the next run adds only what is missing: every memory once.
2. **verify**: per user, the ids in the old collection and in the user's collection must be
   the same set (so the counts agree too); otherwise nothing is removed.
3. **mark**: the old collection's metadata records that it was verified.
4. **remove**: the old collection's records are deleted page by page, then the collection.
   Records go first because chromadb 1.5.9 leaves the list-valued metadata of a deleted
   collection behind, to be inherited by the next collection's rows (chroma#7594): a
   cross-user leak here. A run that finds the mark resumes here, checking that every row
   still in the old collection is in its user's collection.

A kill can also tear the old collection's HNSW segment (chromadb 1.5.9 rewrites its metadata
file in place; ``affect_memory.memory.chroma.segment_repair``), after which Chroma fails every call
on that collection. The next run moves the torn segment aside (kept as ``.damaged-<UTC time>``),
which makes the rows readable again without their vectors: a collection already marked is then
removed without reading its rows again (they were verified before the mark), and an unmarked
one is copied on, the rows not yet copied embedded again by the default embedder (refused
unless it is the model the old collection records). Until then ``ChromaMemory`` opens the
users' collections beside a marked torn collection, with one warning naming ``migrate``.

While any row is left in the old collection, ``ChromaMemory`` refuses the store
(``LegacyLayoutError``), so nothing writes to the users' collections halfway through. The
embedded store is locked for the whole run. The memory index (lexical postings, rehearsal
counts) is not touched: it indexes each user's collection from its Chroma rows when the
store is next opened.

The module is about 460 lines because the four steps share their markers and their checks of what
the previous step left; split, a step's resume rule would sit apart from the step that leaves what
it reads.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from affect_memory.errors import MigrationError, StoreError, StoreUnavailableError
from affect_memory.kernel.errors import shown
from affect_memory.memory.chroma.collections import (
    DEFAULT_HNSW,
    HnswParams,
    UserCollections,
    configured_hnsw,
    recorded_embedder,
)
from affect_memory.memory.chroma.layout import (
    DEFAULT_COLLECTION,
    MIGRATED_KEY,
    VERIFIED,
    check_prefix,
    is_user_collection,
)
from affect_memory.memory.chroma.location import (
    DEFAULT_TIMEOUT,
    StoreLocation,
    check_timeout,
    parse_location,
)
from affect_memory.memory.chroma.segment_repair import damaged_segments
from affect_memory.memory.results import check_user

__all__ = [
    "MIGRATION_PAGE",
    "MigrationReport",
    "migrate_store",
    "remove_collection",
]

MIGRATION_PAGE = 1_000
"""Rows copied or deleted per Chroma call (well under the 5,461-record batch limit; the check
after a copy lists ids 10,000 per call)."""



@dataclass
class MigrationReport:
    """What a migration found and did."""

    location: str
    collection: str
    users: dict[str, int] = field(default_factory=dict)
    """Memories per user now in their own collection (every user of the old collection)."""
    copied: int = 0
    """Rows this run added to the users' collections."""
    already: int = 0
    """Rows an earlier, interrupted run had already copied."""
    removed: bool = False
    """Whether the old collection is gone."""
    status: str = "migrated"
    """``migrated``, or ``nothing`` when there was no old collection to move."""

    @property
    def count(self) -> int:
        """Memories moved in all."""
        return sum(self.users.values())

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return {
            "status": self.status,
            "location": self.location,
            "collection": self.collection,
            "count": self.count,
            "users": dict(sorted(self.users.items())),
            "copied": self.copied,
            "already": self.already,
            "removed": self.removed,
        }


Bar = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


def _bar_factory(progress: bool | None) -> Bar:
    """Progress bars on stderr when asked (None: when stderr is a terminal)."""
    show = sys.stderr.isatty() if progress is None else progress

    def bar(label: str, total: int) -> AbstractContextManager[Callable[[int], None]]:
        if not show or total <= 0:
            return nullcontext(lambda _n: None)
        from tqdm import tqdm

        # Redrawn on every page (a page is 1,000 rows by default, so a few redraws a second).
        bar = tqdm(total=total, desc=label, unit="memory", file=sys.stderr, mininterval=0)
        return _TqdmStep(bar)

    return bar


class _TqdmStep:
    """A tqdm bar as a context manager yielding its ``update``."""

    def __init__(self, bar: Any) -> None:
        self._bar = bar

    def __enter__(self) -> Callable[[int], None]:
        return self._bar.update  # type: ignore[no-any-return]

    def __exit__(self, *exc: object) -> None:
        self._bar.close()


def migrate_store(
    location: StoreLocation | str | os.PathLike[str],
    *,
    collection: str = DEFAULT_COLLECTION,
    timeout: float = DEFAULT_TIMEOUT,
    page: int = MIGRATION_PAGE,
    progress: bool | None = None,
) -> MigrationReport:
    """Move the old single collection ``collection`` at ``location`` into one collection per
    user; resumable, and a no-op on a store already migrated."""
    if not isinstance(location, StoreLocation):
        location = parse_location(location)
    prefix = check_prefix(collection)
    timeout = check_timeout(timeout)
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= 5_000:
        raise StoreError(f"page must be a whole number of records in [1, 5000], got {page!r}")
    where = location.describe()
    if location.kind == "path" and location.path is not None and not location.path.is_dir():
        raise StoreUnavailableError(f"no memory store at {where}: nothing to migrate")
    report = MigrationReport(where, prefix)
    bar = _bar_factory(progress)
    probe = UserCollections(
        location, prefix, embedder_name=None, hnsw=DEFAULT_HNSW, create=True, timeout=timeout,
        legacy=True,
    )  # fmt: skip
    try:
        with probe.backend("open the old collection"):
            old = probe.existing(prefix)
        if old is None:
            return _nothing_to_migrate(probe, report)
        space = configured_hnsw(old).get("space")
        if space != "cosine":
            raise MigrationError(
                f"collection {prefix!r} at {where} uses the {space!r} distance space, so it was "
                "not written by affect-memory (always cosine); nothing was changed"
            )
        hnsw = HnswParams(
            **{k: v for k, v in configured_hnsw(old).items() if k in HnswParams.model_fields}
        )
        users = UserCollections(
            location, prefix, embedder_name=recorded_embedder(old), hnsw=hnsw, create=True,
            timeout=timeout, legacy=True,
        )  # fmt: skip
        try:
            _migrate(old, users, report, page=page, bar=bar)
        finally:
            users.close()
    finally:
        probe.close()
    return report


def _nothing_to_migrate(probe: UserCollections, report: MigrationReport) -> MigrationReport:
    """No old collection: a store already migrated (report its users) or no store at all."""
    listed = [c for c in probe.listed() if is_user_collection(report.collection, c.name)]
    if not listed:
        raise StoreError(
            f"no collection {report.collection!r} at {report.location}: nothing to migrate "
            "(pass --collection NAME if the store used another name)"
        )
    report.status = "nothing"
    report.removed = True
    with probe.backend("count memories"):
        for owner, user_collection in probe.every():
            report.users[owner] = int(user_collection.count())
    return report


def _pages(old: Any, page: int, include: list[str]) -> Iterator[Mapping[str, Any]]:
    """The old collection's rows page by page, in its own order (it does not change meanwhile)."""
    offset = 0
    while True:
        got = old.get(limit=page, offset=offset, include=include)
        if not got["ids"]:
            return
        yield got
        offset += len(got["ids"])


def _owner(ident: str, metadata: Mapping[str, Any] | None, where: str) -> str:
    owner = (metadata or {}).get("user_id")
    try:
        return check_user(owner)
    except ValueError:
        raise MigrationError(
            f"record {shown(ident)} of the old collection at {where} has no usable user_id "
            f"(got {shown(owner)}), so it cannot be given to a user; nothing was removed - "
            "fix or delete that record and run migrate again"
        ) from None


def _migrate(
    old: Any, users: UserCollections, report: MigrationReport, *, page: int, bar: Bar
) -> None:
    where = report.location
    verified = (old.metadata or {}).get(MIGRATED_KEY) == VERIFIED
    torn = False
    try:
        with users.backend("read the old collection"):
            total = int(old.count())
    except StoreError:
        torn = _set_aside_torn_segment(users, old.name)
        if not torn:
            raise
        with users.backend("read the old collection"):
            total = int(old.count())
    old_ids: dict[str, set[str]] = {}
    if not verified:
        # A torn segment lost the vectors of the rows not yet copied: those are embedded again.
        embed = _reembedder(old, where) if torn else None
        include = ["documents", "metadatas"] + ([] if torn else ["embeddings"])
        with bar("migrate: copy", total) as step:
            for got in _backend_pages(users, old, page, include):
                _copy_page(got, users, report, old_ids, where, embed)
                step(len(got["ids"]))
        _verify(users, old_ids, report, exact=True)
        with users.backend("mark the old collection verified"):
            metadata = dict(old.metadata or {})
            metadata[MIGRATED_KEY] = VERIFIED
            old.modify(metadata=metadata)
    elif torn:
        # Every row was verified in its user's collection before the mark was set: the old
        # collection is dropped without reading its rows again.
        _verify(users, {}, report, exact=False)
    else:
        for got in _backend_pages(users, old, page, ["metadatas"]):
            for ident, meta in zip(got["ids"], got["metadatas"], strict=True):
                old_ids.setdefault(_owner(ident, meta, where), set()).add(ident)
        _verify(users, old_ids, report, exact=False)
    with bar("migrate: remove old", total) as step, users.backend("remove the old collection"):
        remove_collection(users.client, old, page=page, step=step)
    report.removed = True


def _set_aside_torn_segment(users: UserCollections, name: str) -> bool:
    """Move the vector segment of collection ``name`` of an embedded store aside when a kill
    tore it, so Chroma can read the collection's rows (without their vectors) again; whether
    it was torn.

    The files go to ``<segment id>.damaged-<UTC time>``, kept, as segment repair keeps a
    user's (``affect_memory.memory.chroma.segment_repair``).
    """
    location = users.location
    if location.kind != "path" or location.path is None:
        return False
    directory = location.path
    torn = [s for s in damaged_segments(directory) if s.collection == name and s.problem]
    for segment in torn:
        source = directory / segment.segment_id
        if source.exists():
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            source.rename(directory / f"{segment.segment_id}.damaged-{stamp}")
    return bool(torn)


def _reembedder(old: Any, where: str) -> Callable[[list[str]], Any]:
    """The embedder the old collection was filled with, for rows whose vectors a torn segment
    lost; refused when this installation's default embedder is another model."""
    from affect_memory.models.embeddings import default_embedder

    embedder = default_embedder()
    recorded = recorded_embedder(old)
    if recorded != embedder.name:
        raise MigrationError(
            f"the old collection at {where} has a damaged vector index, so the vectors of the "
            f"rows not yet copied are lost, and it was filled with embedder {recorded!r}, not "
            f"this installation's {embedder.name!r}; nothing was removed - run migrate where "
            "that embedder is the default"
        )
    return embedder.embed_documents


def remove_collection(
    client: Any,
    collection: Any,
    *,
    page: int = MIGRATION_PAGE,
    step: Callable[[int], None] | None = None,
) -> None:
    """Delete a collection's records page by page, then the collection.

    chromadb 1.5.9's ``delete_collection`` leaves list-valued metadata behind, and the next
    rows written to any collection can inherit it (chroma#7594): deleting the records first
    leaves nothing to inherit.
    """
    while True:
        got = collection.get(limit=page, include=[])
        if not got["ids"]:
            break
        collection.delete(ids=list(got["ids"]))
        if step is not None:
            step(len(got["ids"]))
    client.delete_collection(collection.name)


def _backend_pages(
    users: UserCollections, old: Any, page: int, include: list[str]
) -> Iterator[Mapping[str, Any]]:
    pages = _pages(old, page, include)
    while True:
        with users.backend("read the old collection"):
            got = next(pages, None)
        if got is None:
            return
        yield got


def _copy_page(
    got: Mapping[str, Any],
    users: UserCollections,
    report: MigrationReport,
    old_ids: dict[str, set[str]],
    where: str,
    embed: Callable[[list[str]], Any] | None = None,
) -> None:
    """Add one page's rows to their users' collections, skipping rows already copied (with
    ``embed``, the page has no vectors and the rows to add are embedded again)."""
    by_user: dict[str, list[int]] = {}
    for index, (ident, meta) in enumerate(zip(got["ids"], got["metadatas"], strict=True)):
        owner = _owner(ident, meta, where)
        by_user.setdefault(owner, []).append(index)
        old_ids.setdefault(owner, set()).add(ident)
    for owner, rows in by_user.items():
        target = users.of(owner, create=True)
        assert target is not None
        ids = [got["ids"][i] for i in rows]
        with users.backend(f"copy the memories of user {shown(owner)}"):
            present = target.get(ids=ids, include=["documents", "metadatas"])
        stored = {
            ident: (text, meta)
            for ident, text, meta in zip(
                present["ids"], present["documents"], present["metadatas"], strict=True
            )
        }
        todo: list[int] = []
        for i in rows:
            ident = got["ids"][i]
            if ident not in stored:
                todo.append(i)
            elif stored[ident] != (got["documents"][i], got["metadatas"][i]):
                raise MigrationError(
                    f"memory {shown(ident)} of user {shown(owner)} at {where} differs from the "
                    "old collection's row with that id: something else wrote it; nothing was "
                    "removed - delete it from the user's collection and run migrate again"
                )
        report.already += len(rows) - len(todo)
        if not todo:
            continue
        documents = [got["documents"][i] for i in todo]
        vectors = (
            np.asarray([got["embeddings"][i] for i in todo], dtype=np.float32)
            if embed is None
            else np.asarray(embed(documents), dtype=np.float32)
        )
        with users.backend(f"copy the memories of user {shown(owner)}"):
            target.add(
                ids=[got["ids"][i] for i in todo],
                embeddings=vectors,
                documents=documents,
                metadatas=[got["metadatas"][i] for i in todo],
            )
        report.copied += len(todo)


def _user_ids(collection: Any, page: int = 10_000) -> set[str]:
    """Every id in a user's collection."""
    found: set[str] = set()
    while True:
        got = collection.get(limit=page, offset=len(found), include=[])
        found.update(got["ids"])
        if len(got["ids"]) < page:
            return found


def _verify(
    users: UserCollections, old_ids: Mapping[str, set[str]], report: MigrationReport, *, exact: bool
) -> None:
    """Every old row of each user is in their collection (and, ``exact``, nothing else)."""
    for owner, expected in sorted(old_ids.items()):
        collection = users.of(owner, create=False)
        with users.backend(f"verify the memories of user {shown(owner)}"):
            held = set() if collection is None else _user_ids(collection)
        missing = expected - held
        extra = held - expected if exact else set()
        if missing or extra:
            problem = (
                f"{len(missing):,} of its {len(expected):,} memories are missing"
                if missing
                else f"it holds {len(extra):,} memories the old collection does not"
            )
            raise MigrationError(
                f"user {shown(owner)} at {report.location}: {problem} in its own collection "
                f"({len(held):,} there, {len(expected):,} in the old one); nothing was removed - "
                "run migrate again"
            )
        report.users[owner] = len(held)
    if exact:
        return
    # Resuming the removal: users whose rows were all removed already are counted too.
    for owner, collection in users.every():
        if owner not in report.users:
            with users.backend(f"count the memories of user {shown(owner)}"):
                report.users[owner] = int(collection.count())
