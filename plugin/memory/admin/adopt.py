"""Adopting a cosine collection another tool wrote (LangChain, LlamaIndex, raw chromadb).

How it fits the per-user layout: an adopted collection is a **read-only source beside the
users' own collections**, never one of them. Either the whole collection is one user's
(``owner="alice"``: one adopted collection = one user), or a metadata field names each row's
user (``FieldMapping(user="user")``) and every query is scoped ``where {field: user}``. It is
recalled on its own (``AdoptedCollection.recall``, ranked through the recall pipeline as
``ChromaMemory`` ranks its dense recall: Chroma's nearest, their distance as is, calendar
recency), or made affect-memory's own with ``import_into(memory)``, which adds its rows to the
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

The module is about 500 lines because surveying, reading, recalling and importing a foreign
collection share one row reader and its field mapping; split, each would re-read the rows.
Recall reads the collection through ``affect_memory.memory.admin.adopted_reads``, which hands
the recall pipeline the mapped rows as a memory's collection and index would.
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
from affect_memory.memory.admin.adopted_reads import AdoptedReads
from affect_memory.memory.chroma.collections import (
    HnswParams,
    UserCollections,
    stored_configuration,
)
from affect_memory.memory.chroma.layout import DEFAULT_COLLECTION, LAYOUT_KEY, PREFIX_KEY, USER_KEY
from affect_memory.memory.chroma.location import DEFAULT_TIMEOUT, parse_location
from affect_memory.memory.chroma.worker import StoreWorker
from affect_memory.memory.problems import explain_error
from affect_memory.memory.recall.pipeline import HybridRecall, RankedQuery
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import RecallResult, check_query, check_top_k, check_user
from affect_memory.memory.settings import DENSE_RECALL, resolve_settings
from affect_memory.memory.timestamps import normalize_timestamp, now_moment
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
                found = self._store.existing(name)
                if found is None:
                    present = sorted(c.name for c in self._store.listed())
                    raise StoreError(
                        f"no collection {shown(name)} at {where} to adopt (present: "
                        f"{', '.join(present[:20]) or 'none'})"
                    )
                self._collection = found
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

    def _ranked(
        self,
        query: str,
        user_id: str,
        *,
        now: datetime,
        mood_valence: float,
        top_k: int,
        candidates: int,
        weights: RetrievalWeights,
        congruence_on: bool = True,
        whole_pool: bool = False,
    ) -> tuple[RankedQuery, tuple[str, ...]]:
        """``query`` ranked over ``user_id``'s rows by the recall pipeline's dense ranking
        (``DENSE_RECALL`` with ``candidates`` and ``weights``: Chroma's nearest, its distance
        as is, calendar recency), and the ids of the rows left out as unable to be memories."""
        user_id = check_user(user_id)
        try:
            query = check_query(query)
        except ValueError as error:
            raise InvalidInputError(f"query {error}") from None
        settings = resolve_settings(DENSE_RECALL, candidates=candidates, weights=weights)
        if self._owner is not None and user_id != self._owner:
            return RankedQuery.empty(), ()  # the collection is another user's
        vectors = check_embeddings(self._embedder.embed_documents([query]), 1)
        reads = AdoptedReads(
            user_id,
            query=lambda embedded, n: self._collection.query(
                query_embeddings=embedded,
                n_results=n,
                where=self._where(user_id),
                include=["documents", "metadatas", "distances"],
            ),
            mapped=self._mapped,
            backend=lambda action: self._store.backend(
                f"{action} in the collection {shown(self._name)}"
            ),
        )
        (ranked,) = HybridRecall(reads, reads).rank(
            user_id, [query], vectors, plans=[None], now=now, moods=[mood_valence],
            top_k=top_k, settings=settings, congruence_on=congruence_on, whole_pool=whole_pool,
        )  # fmt: skip
        return ranked, tuple(reads.left_out)

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
        """``user_id``'s best rows for ``query``, ranked with the defaults filled in as
        ``ChromaMemory`` ranks the dense recall (the recall pipeline, without a plan)."""
        moment = now_moment(now)
        top_k = check_top_k(top_k)
        ranked, left_out = self._ranked(
            query, user_id, now=moment, mood_valence=mood_valence, top_k=top_k,
            candidates=_check_candidates(candidates, top_k), weights=weights,
            congruence_on=congruence_on,
        )  # fmt: skip
        stamp = moment.astimezone(UTC).isoformat(timespec="microseconds")
        skipped = (*ranked.rows.skipped, *left_out)
        return RecallResult(query, user_id, stamp, ranked.hits(), skipped)

    async def arecall(self, query: str, user_id: str, **options: Any) -> RecallResult:
        """``recall`` for an event loop, in this collection's worker thread."""
        import functools

        return await self._worker.run(functools.partial(self.recall, query, user_id, **options))

    def candidates(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        candidates: int = DEFAULT_ADOPTED_CANDIDATES,
        weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
    ) -> tuple[MemoryCandidate, ...]:
        """``user_id``'s nearest ``candidates`` rows as kernel candidates (defaults filled in,
        calendar ``age_days`` at ``now``), best first as ``recall`` ranks them: the one way to
        get this collection's candidates, as ``ChromaMemory.candidates`` is a memory's."""
        moment = now_moment(now)
        ranked, _left_out = self._ranked(
            query, user_id, now=moment, mood_valence=mood_valence, top_k=1,
            candidates=_check_candidates(candidates, 1), weights=weights, whole_pool=True,
        )  # fmt: skip
        return ranked.candidates()

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
        """The nearest rows for the request (at least its limit) as ``candidates`` prepares
        them at ``request.now``, found in the collection's worker thread."""
        n = max(DEFAULT_ADOPTED_CANDIDATES, request.limit)
        return await self._source.run(
            lambda: self._source.candidates(
                request.query,
                self.user_id,
                mood_valence=request.state.mood.valence,
                now=request.now,
                candidates=n,
                weights=request.weights or DEFAULT_RETRIEVAL_WEIGHTS,
            )
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
