"""Adopting a cosine collection another tool wrote (LangChain, LlamaIndex, raw chromadb).

How it fits the per-user layout: an adopted collection is a **read-only source beside the
users' own collections**, never one of them. Either the whole collection is one user's
(``owner="alice"``: one adopted collection = one user), or a metadata field names each row's
user (``FieldMapping(user="user")``) and every query is scoped ``where {field: user}``. It is
recalled on its own (``AdoptedCollection.recall``, ranked by the kernel as ``ChromaMemory``
ranks), or made affect-memory's own with ``import_into(memory)``, which adds its rows to the
users' collections through ``ChromaMemory.add``, re-embedded by that memory's embedder and
with their ids kept; the adopted collection stays as it was.

* **Defaults** for affect metadata the rows lack (``ADOPTION_DEFAULTS``): significance 0.5,
  no episode, emotional valence 0, recall count 0. A row that has one under the mapped name
  keeps it, and a malformed value leaves that row out, named in ``skipped``.
* **Timestamps** come from the mapped field: zoned ISO-8601 text or epoch seconds (zoneless
  text read as UTC with ``assume_utc=True``), else ``default_timestamp``; a row with neither
  is left out and named.
* **Nothing in Chroma is written**: recall only queries, and a turn's recall counts are not
  kept for adopted rows (import them to have counts).
* An **l2 or ip** collection is refused with the fix: import it (the documents are
  re-embedded, so its space does not matter) or recreate it cosine.

The query must be embedded by the model that embedded the collection: pass that model as
``embedder`` (its dimension is checked against the stored vectors).

The module is about 450 lines because surveying, reading, recalling and importing a foreign
collection share one row reader and its field mapping; split, each would re-read the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from affect_memory.errors import StoreError, TimestampError, WrongSpaceError
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.protocols import RetrievalInput
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from affect_memory.memory.collections import HnswParams, UserCollections, stored_configuration
from affect_memory.memory.layout import DEFAULT_COLLECTION, LAYOUT_KEY, PREFIX_KEY, USER_KEY
from affect_memory.memory.location import DEFAULT_TIMEOUT, parse_location
from affect_memory.memory.problems import explain_error
from affect_memory.memory.recall.explanation import rank_rows
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import RecallResult, check_query, check_top_k, check_user
from affect_memory.memory.rows import StoredRows, rows_from_query
from affect_memory.memory.timestamps import normalize_timestamp
from affect_memory.memory.worker import StoreWorker
from affect_memory.models.embeddings import Embedder, check_embeddings, default_embedder

__all__ = [
    "ADOPTION_DEFAULTS",
    "AdoptedCollection",
    "AdoptionSurvey",
    "FieldMapping",
    "ImportReport",
]

_T = TypeVar("_T")

ADOPTION_DEFAULTS: Mapping[str, Any] = {
    "significance": 0.5,
    "episode": False,
    "emotional_valence": 0.0,
    "recall_count": 0,
}
"""What a row of an adopted collection is scored with when it lacks the field."""

DEFAULT_ADOPTED_CANDIDATES = 64
"""Nearest rows of an adopted collection a recall ranks."""

PAGE = 1_000
"""Rows read per Chroma call when surveying or importing."""


@dataclass(frozen=True)
class FieldMapping:
    """Which metadata keys of the adopted rows hold the timestamp, the user and the affect
    fields (the affect fields default to affect-memory's own names)."""

    timestamp: str | None = None
    user: str | None = None
    significance: str = "significance"
    emotional_valence: str = "emotional_valence"
    episode: str = "episode"
    recall_count: str = "recall_count"
    assume_utc: bool = False
    """Read a timestamp without a zone as UTC (refused otherwise)."""


@dataclass
class AdoptionSurvey:
    """What an adopted collection holds, and what adoption will fill in."""

    name: str
    location: str
    rows: int
    dimension: int | None
    users: dict[str, int] = field(default_factory=dict)
    """Rows per user (the owner's, or each value of the user field)."""
    defaulted: dict[str, int] = field(default_factory=dict)
    """Rows that get each default because they lack the field."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Rows that cannot be memories, by id, with the reason (the first 20)."""
    left_out_count: int = 0

    def to_json(self) -> dict[str, Any]:
        """The survey as plain JSON values."""
        return {
            "collection": self.name,
            "location": self.location,
            "rows": self.rows,
            "dimension": self.dimension,
            "users": dict(sorted(self.users.items())),
            "defaulted": self.defaulted,
            "left_out": self.left_out_count,
            "left_out_examples": self.left_out,
        }


@dataclass(frozen=True)
class ImportReport:
    """What ``import_into`` wrote into the users' own collections."""

    written: int
    already: int
    """Rows whose id the user's collection already held (left as they were)."""
    left_out: dict[str, str]
    """Rows that could not become memories, by id, with the reason (the first 20)."""
    left_out_count: int


class AdoptedCollection:
    """A cosine collection written by another tool, read as memories without changing it."""

    def __init__(
        self,
        location: str,
        name: str,
        *,
        embedder: Embedder | None = None,
        fields: FieldMapping | None = None,
        owner: str | None = None,
        default_timestamp: str | datetime | float | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        check_space: bool = True,
    ) -> None:
        """Open collection ``name`` at ``location``; rows are ``owner``'s, or the user each
        names in ``fields.user``. ``check_space=False`` (importing only) accepts l2 and ip."""
        from chromadb.errors import NotFoundError

        self._fields = fields or FieldMapping()
        if (self._fields.user is None) == (owner is None):
            raise InvalidInputError(
                "an adopted collection needs either owner= (the whole collection is one "
                "user's) or fields=FieldMapping(user=KEY) (each row names its user), not "
                f"{'both' if owner is not None else 'neither'}"
            )
        self._owner = None if owner is None else check_user(owner)
        self._default = (
            None
            if default_timestamp is None
            else normalize_timestamp(default_timestamp, field="default_timestamp")
        )
        self._embedder = embedder if embedder is not None else default_embedder()
        self._name = name
        self._worker = StoreWorker(f"adopted {name}")
        self._store = UserCollections(
            parse_location(location), DEFAULT_COLLECTION, embedder_name=None, hnsw=HnswParams(),
            create=False, timeout=timeout, legacy=True,
        )  # fmt: skip
        where = self._store.location.describe()
        try:
            with self._store.backend(f"open the collection {shown(name)}"):
                try:
                    self._collection = self._store.client.get_collection(
                        name, embedding_function=None
                    )
                except NotFoundError:
                    present = sorted(c.name for c in self._store.listed())
                    raise StoreError(
                        f"no collection {shown(name)} at {where} to adopt (present: "
                        f"{', '.join(present[:20]) or 'none'})"
                    ) from None
                _refuse_own(name, self._collection.metadata, where)
                sample = self._collection.get(limit=1, include=["embeddings"])
            space = _space(self._collection)
            if check_space and space != "cosine":
                raise WrongSpaceError(
                    f"collection {shown(name)} at {where} uses the {space!r} distance space, "
                    "but affect-memory scores cosine distances and cannot adopt it as it is. "
                    f"Fix: import it (`affect-memory adopt {name} --import ...`, which "
                    "re-embeds its documents into cosine collections and leaves it unchanged), "
                    "or recreate it cosine (LangChain: Chroma(..., collection_metadata="
                    "{'hnsw:space': 'cosine'}); chromadb: create_collection(..., configuration="
                    "{'hnsw': {'space': 'cosine'}}))"
                )
            vectors = sample["embeddings"]
            self.dimension = None if vectors is None or not len(vectors) else len(vectors[0])
            if check_space and self.dimension not in (None, self._embedder.dimension):
                raise StoreError(
                    f"collection {shown(name)} at {where} holds {self.dimension}-dimensional "
                    f"vectors but {self._embedder.name!r} embeds in {self._embedder.dimension}; "
                    "pass the embedder the other tool used (embedder=...)"
                )
        except BaseException:
            self._store.close()
            raise

    # ---------------------------------------------------------------- reading rows

    def _mapped(
        self, ident: str, text: object, meta: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any] | None, str]:
        """A row's affect metadata with the defaults filled in, or None and why not."""
        meta = meta or {}
        names = self._fields
        if self._owner is not None:
            user: object = self._owner
        else:
            assert names.user is not None
            user = meta.get(names.user)
            if not isinstance(user, str) or not user.strip():
                return None, f"its user field {names.user!r} is missing or not text"
        if not isinstance(text, str) or not text.strip():
            return None, "it has no text"
        stamp = None if names.timestamp is None else meta.get(names.timestamp)
        try:
            if stamp is None:
                if self._default is None:
                    where = "" if names.timestamp is None else f" in {names.timestamp!r}"
                    raise TimestampError(
                        f"it has no timestamp{where} and no default_timestamp was given"
                    )
                moment = self._default
            else:
                moment = normalize_timestamp(self._utc(stamp), field=str(names.timestamp))
        except TimestampError as error:
            return None, str(error)
        mapped = {"user_id": user, "timestamp": moment.iso, "timestamp_epoch": moment.epoch}
        for key in ADOPTION_DEFAULTS:
            value = meta.get(getattr(names, key))
            mapped[key] = ADOPTION_DEFAULTS[key] if value is None else value
        # The record import would add: a row it would refuse is left out here too, so the
        # survey counts exactly what --import writes.
        record = {key: mapped[key] for key in ("user_id", *ADOPTION_DEFAULTS)}
        try:
            MemoryRecord.model_validate({"id": ident, "text": text, "timestamp": moment.iso,
                                         **record})  # fmt: skip
        except ValidationError as error:
            return None, explain_error(error.errors()[0])[0]
        return mapped, ""

    def _utc(self, stamp: object) -> object:
        if self._fields.assume_utc and isinstance(stamp, str):
            try:
                parsed = datetime.fromisoformat(stamp)
            except ValueError:
                return stamp
            if parsed.tzinfo is None:
                return parsed.replace(tzinfo=UTC)
        return stamp

    def _where(self, user_id: str | None) -> dict[str, Any] | None:
        if self._fields.user is None or user_id is None:
            return None
        return {self._fields.user: user_id}

    def _pages(self, include: list[str], user_id: str | None = None) -> Iterator[Mapping[str, Any]]:
        offset = 0
        while True:
            with self._store.backend(f"read the collection {shown(self._name)}"):
                got = self._collection.get(
                    limit=PAGE, offset=offset, where=self._where(user_id), include=include
                )
            if not got["ids"]:
                return
            yield got
            offset += len(got["ids"])

    def survey(self) -> AdoptionSurvey:
        """Count the rows, their users and the defaults they need; reads only."""
        report = AdoptionSurvey(
            self._name, self._store.location.describe(), 0, self.dimension,
            defaulted=dict.fromkeys(ADOPTION_DEFAULTS, 0),
        )  # fmt: skip
        for got in self._pages(["documents", "metadatas"]):
            for ident, text, meta in zip(
                got["ids"], got["documents"], got["metadatas"], strict=True
            ):
                report.rows += 1
                mapped, why = self._mapped(ident, text, meta)
                if mapped is None:
                    report.left_out_count += 1
                    if len(report.left_out) < 20:
                        report.left_out[ident] = why
                    continue
                report.users[mapped["user_id"]] = report.users.get(mapped["user_id"], 0) + 1
                for key in ADOPTION_DEFAULTS:
                    report.defaulted[key] += (meta or {}).get(getattr(self._fields, key)) is None
        return report

    def _query(self, query: str, user_id: str, n: int) -> StoredRows:
        """The nearest ``n`` rows of ``user_id`` as checked rows (defaults filled in)."""
        user_id = check_user(user_id)
        try:
            query = check_query(query)
        except ValueError as error:
            raise InvalidInputError(f"query {error}") from None
        if self._owner is not None and user_id != self._owner:
            return StoredRows.empty()  # the collection is another user's
        vector = check_embeddings(self._embedder.embed_documents([query]), 1)
        with self._store.backend(f"query the collection {shown(self._name)}"):
            got = self._collection.query(
                query_embeddings=vector, n_results=n, where=self._where(user_id),
                include=["documents", "metadatas", "distances"],
            )  # fmt: skip
        ids, texts = got["ids"][0], got["documents"][0]
        metas, distances = got["metadatas"][0], got["distances"][0]
        keep: list[int] = []
        mapped_rows: list[dict[str, Any]] = []
        left_out: list[str] = []
        for index, ident in enumerate(ids):
            mapped, _why = self._mapped(ident, texts[index], metas[index])
            if mapped is None:
                left_out.append(ident)
                continue
            keep.append(index)
            mapped_rows.append(mapped)
        rows = rows_from_query(
            [ids[i] for i in keep], [texts[i] for i in keep], mapped_rows,
            [distances[i] for i in keep], user_id,
        )  # fmt: skip
        if left_out:
            from dataclasses import replace

            rows = replace(rows, skipped=(*rows.skipped, *left_out))
        return rows

    def recall(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int = DEFAULT_ADOPTED_CANDIDATES,
        congruence_on: bool = True,
        weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    ) -> RecallResult:
        """``user_id``'s best rows for ``query``, ranked by the kernel with the defaults."""
        moment = datetime.now(UTC) if now is None else normalize_timestamp(now, field="now").moment
        top_k = check_top_k(top_k)
        n = _check_candidates(candidates, top_k)
        rows = self._query(query, user_id, n)
        hits = rank_rows(
            rows, moment, mood_valence=mood_valence, limit=top_k, congruence_on=congruence_on,
            weights=weights,
        )  # fmt: skip
        stamp = moment.astimezone(UTC).isoformat(timespec="microseconds")
        return RecallResult(query, user_id, stamp, hits, rows.skipped)

    async def arecall(self, query: str, user_id: str, **options: Any) -> RecallResult:
        """``recall`` for an event loop, in this collection's worker thread."""
        import functools

        return await self._worker.run(functools.partial(self.recall, query, user_id, **options))

    def candidates(
        self, query: str, user_id: str, *, candidates: int = DEFAULT_ADOPTED_CANDIDATES
    ) -> tuple[MemoryCandidate, ...]:
        """``user_id``'s nearest rows as kernel candidates (defaults filled in), unranked."""
        return tuple(self._query(query, user_id, _check_candidates(candidates, 1)).candidates())

    def retriever_for(self, user_id: str) -> AdoptedRetriever:
        """A ``MemoryRetriever`` over ``user_id``'s rows, for an ``AffectEngine``."""
        return AdoptedRetriever(self, check_user(user_id))

    # ---------------------------------------------------------------- making them our own

    def import_into(self, memory: Any, *, progress: bool | None = None) -> ImportReport:
        """Add every usable row to ``memory``'s per-user collections (re-embedded, ids kept,
        ids a user already has left alone); this collection is not changed."""
        written = already = count = 0
        left_out: dict[str, str] = {}
        for got in self._pages(["documents", "metadatas"]):
            batch: list[dict[str, Any]] = []
            for ident, text, meta in zip(
                got["ids"], got["documents"], got["metadatas"], strict=True
            ):
                mapped, why = self._mapped(ident, text, meta)
                if mapped is None:
                    count += 1
                    if len(left_out) < 20:
                        left_out[ident] = why
                    continue
                record = {key: mapped[key] for key in ("user_id", *ADOPTION_DEFAULTS)}
                batch.append(
                    {"id": ident, "text": text, "timestamp": mapped["timestamp"], **record}
                )
            report = memory.add(batch, progress=progress)
            written += report.written
            already += len(report.skipped)
        return ImportReport(written, already, left_out, count)

    async def run(self, call: Callable[[], _T]) -> _T:
        """Run a blocking call on this collection in its worker thread."""
        return await self._worker.run(call)

    def close(self) -> None:
        """Release the Chroma client (and an embedded store's lock); safe to call twice."""
        self._worker.close()
        self._store.close()

    def __enter__(self) -> AdoptedCollection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AdoptedRetriever:
    """The engine's retriever over one user's rows of an adopted collection."""

    def __init__(self, source: AdoptedCollection, user_id: str) -> None:
        """Retrieve ``user_id``'s rows of ``source``."""
        self._source = source
        self.user_id = user_id

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        """The nearest rows for the request (at least its limit), unranked, found in the
        collection's worker thread."""
        n = max(DEFAULT_ADOPTED_CANDIDATES, request.limit)
        return await self._source.run(
            lambda: self._source.candidates(request.query, self.user_id, candidates=n)
        )


def _check_candidates(candidates: object, top_k: int) -> int:
    if (
        isinstance(candidates, bool)
        or not isinstance(candidates, int)
        or not 1 <= candidates <= 1024
    ):
        raise InvalidInputError(
            f"candidates must be an int from 1 to 1024, got {shown(candidates)}"
        )
    return max(candidates, top_k)


def _refuse_own(name: str, metadata: Mapping[str, Any] | None, where: str) -> None:
    """Refuse one of affect-memory's own per-user collections: adopting it (``--owner``)
    would silently copy one user's memories to another."""
    meta = metadata or {}
    if LAYOUT_KEY in meta or USER_KEY in meta:
        raise InvalidInputError(
            f"collection {shown(name)} at {where} is affect-memory's own collection of user "
            f"{shown(meta.get(USER_KEY))} (prefix {shown(meta.get(PREFIX_KEY))}), not another "
            "tool's; it is not adopted (its memories are already that user's)"
        )


def _space(collection: Any) -> object:
    configuration = stored_configuration(collection)  # raw: parsing it warns (see there)
    hnsw = configuration.get("hnsw") or {}
    legacy = (collection.metadata or {}).get("hnsw:space")
    return hnsw.get("space") or (configuration.get("spann") or {}).get("space") or legacy
