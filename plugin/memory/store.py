"""``ChromaMemory``: an agent's long-term memory in Chroma, one collection per user.

Every user's memories live in a collection of their own (``affect_memory.memory.chroma.layout``),
so memory ids are per user and every read, write and delete names one user and touches only that
user's collection; the mapper (``affect_memory.memory.chroma.rows``) still checks each returned
row's owner.

Distance convention: collections are cosine, so Chroma returns ``1 - cos`` in [0, 2]. Recall
plans each query, embeds it and ranks the pool through ``affect_memory.memory.recall.pipeline``
(relevance on an absolute scale, the kernel's ``rank_columns`` for the score); the dense
ranking (``DENSE_RECALL``) goes through the same pipeline without a plan and hands Chroma's
distances to the kernel as they are, which reads ``similarity = 1 - distance / 2``. Writes
are whole within the process (``affect_memory.memory.chroma.writes``).

One read path: ``recall``, ``recall_many``, ``candidates`` and the engine's ``retrieve`` and
``retrieve_ranked`` all rank through that pipeline (``_ranked``). ``candidates`` is the one way
to get kernel candidates: the query's whole recall pool, prepared as recall scores it, so
ranking them with the kernel gives recall's scores; an engine turn takes the top of the same
ranking through ``retrieve`` or ``retrieve_ranked``.

This facade is about 900 lines because it is what users call: every method checks its
arguments and delegates (rows, ranking, collections, writes, turn writes), and each keeps the
full docstring of its contract.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from pydantic import BaseModel

from affect_memory.errors import StoreError
from affect_memory.kernel.engine import StageObserver
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.models import MAX_TEXT_CHARS, MemoryCandidate
from affect_memory.kernel.protocols import RetrievalInput
from affect_memory.kernel.retrieval import RetrievalWeights, ScoredCandidate
from affect_memory.memory.batches import validate_records
from affect_memory.memory.chroma.collections import (
    DEFAULT_HNSW,
    HnswParams,
    UserCollections,
    configured_hnsw,
    recorded_embedder,
)
from affect_memory.memory.chroma.layout import (
    DEFAULT_COLLECTION,
    check_prefix,
    user_collection_name,
)
from affect_memory.memory.chroma.location import (
    DEFAULT_TIMEOUT,
    check_index_cache,
    check_timeout,
    parse_location,
)
from affect_memory.memory.chroma.rows import records_of
from affect_memory.memory.chroma.segment_repair import repair_segments
from affect_memory.memory.chroma.worker import StoreWorker
from affect_memory.memory.chroma.writes import BatchWriter, chunks
from affect_memory.memory.erasure import ErasureReport, erase_user, finish_pending_erasures
from affect_memory.memory.export import DEFAULT_LIST_LIMIT, check_page, exported_records
from affect_memory.memory.filters import WhereInput, parse_where
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.index.storage.opening import open_backend, resolve_index
from affect_memory.memory.problems import problems_message
from affect_memory.memory.recall.life_topics import TopicSpace
from affect_memory.memory.recall.pipeline import HybridRecall, RankedQuery
from affect_memory.memory.recall.plan import (
    QueryAnalyser,
    QueryPlan,
    default_analyser,
    form_weights,
)
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import (
    MAX_TOP_K,
    MemoryStats,
    RecallQuery,
    RecallResult,
    TurnWriteReport,
    WriteReport,
    check_ids,
    check_query,
    check_top_k,
    check_user,
    collect_recall_queries,
)
from affect_memory.memory.retriever import UserRetriever
from affect_memory.memory.settings import RecallSettings, resolve_settings
from affect_memory.memory.timestamps import normalize_timestamp, now_moment
from affect_memory.memory.turns import writes as turn_writes
from affect_memory.models.embeddings import Embedder, check_embeddings, default_embedder

__all__ = ["QUERY_STAGES", "ChromaMemory"]

QUERY_STAGES = ("chroma_query", "lexical_search", "index_read", "chroma_get")
"""Stage names a ``ChromaMemory`` observer sees, each with its duration in seconds: a Chroma
query, a lexical search of the index (which reads the pool's rows too), the pool's ages,
recall counts and fields (from those rows, or read by id without a lexical search), a Chroma
read of rows by id."""


class ChromaMemory:
    """Memories in Chroma, one collection per user: validated writes, scoped reads, recall.

    ``location`` is a directory (embedded, one process at a time), ``":memory:"`` (in-process,
    shared by every in-memory client of the process while one is open) or ``http://host:port``
    (a ``chroma run`` server, for several processes). ``collection`` is the prefix the users'
    collections are named under; ``timeout`` bounds every request to a server. ``observer``
    (for benchmarks) is called with a stage of ``QUERY_STAGES`` and its duration in seconds.
    ``index`` says where the memory index lives (``affect_memory.memory.index.storage.opening``: by
    default a SQLite file beside an embedded store, ``postgresql://...`` for a fleet): lexical
    search and the authoritative recall counts, kept consistent with Chroma by every write.
    ``index_cache`` bounds how many users' HNSW indexes an embedded store keeps loaded
    (``affect_memory.memory.chroma.location``; a server's bound is the server's own setting).
    ``analyser`` plans each query (``affect_memory.memory.recall.plan``; English by default).
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
        observer: StageObserver | None = None,
        index_cache: int | None = None,
        index: str | os.PathLike[str] | None = None,
        analyser: QueryAnalyser | None = None,
    ) -> None:
        """Open (or, with ``create``, make) the store at ``location`` (the class says what
        each argument does); a bad argument is refused before anything is opened."""
        self._prefix = check_prefix(collection)
        lacking = [
            method
            for method in ("plan", "form_terms")
            if analyser is not None and not callable(getattr(analyser, method, None))
        ]
        if lacking:
            raise InvalidInputError(
                f"analyser must provide plan and form_terms; {analyser!r} lacks "
                f"{', '.join(lacking)}"
            )
        self._analyser: QueryAnalyser = analyser if analyser is not None else default_analyser()
        if not isinstance(hnsw, HnswParams):
            raise StoreError(f"hnsw must be HnswParams, got {hnsw!r}")
        self._timeout = check_timeout(timeout)
        check_index_cache(index_cache)
        self._location = parse_location(location)
        if observer is not None and not callable(observer):
            raise InvalidInputError(f"observer must be callable, got {observer!r}")
        self._embedder: Embedder = (
            embedder if embedder is not None else default_embedder()
        )
        self._observer = observer
        self._closed = False
        self._worker = StoreWorker(self._location.describe())
        self._collections = UserCollections(
            self._location,
            self._prefix,
            embedder_name=self._embedder.name,
            hnsw=hnsw,
            create=create,
            timeout=self._timeout,
            index_cache=index_cache,
        )
        try:
            self._index = MemoryIndex(
                open_backend(resolve_index(index, self._location), lock_timeout=30.0),
                self._collections,
                self._prefix,
                chroma_timeout=self._timeout,
                observer=self._observer,
            )
        except BaseException:
            self._collections.close()
            raise
        try:
            if self._location.kind == "path":  # a segment a killed write left unreadable
                assert self._location.path is not None
                repair_segments(
                    self._location.path, self._collections, self._index, self._embedder
                )
            self._index.reconcile_pending()  # what a killed writer left, settled on opening
            finish_pending_erasures(self._collections, self._index)  # and a killed erasure
        except BaseException:
            self.close()
            raise
        self._writer = BatchWriter(
            self._collections, self._embedder, self._index, progress=progress
        )
        self._hybrid: HybridRecall | None = None
        self._topic_space: TopicSpace | None = None
        self._topic_lock = threading.Lock()

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

    @property
    def index(self) -> MemoryIndex:
        """The memory index: lexical search, authoritative recall counts, newest times."""
        return self._index

    @property
    def index_cache(self) -> int | None:
        """How many users' HNSW indexes an embedded store keeps loaded (None for a server)."""
        return self._collections.index_cache

    def collection_for(self, user_id: str) -> str:
        """The name of the Chroma collection that holds (or will hold) ``user_id``'s memories."""
        return user_collection_name(self._prefix, check_user(user_id))

    # ------------------------------------------------------------------ writes

    def add(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store new records; ids the record's user already has are left untouched and
        reported as skipped (the same id under another user is another memory).

        The batch is validated whole first, and a failed write removes what it had stored.
        """
        return self._writer.add(validate_records(records), progress=progress)

    def upsert(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = None
    ) -> WriteReport:
        """Store records, replacing the record's user's memories under the same ids.

        Validated whole first; a failed write puts back every row it had replaced and removes
        the ones it had added, so no batch is left half replaced.
        """
        return self._writer.upsert(validate_records(records), progress=progress)

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
        same turn again changes nothing (see ``affect_memory.memory.turns.writes``)."""
        return turn_writes.apply_turn_writes(
            self._index,
            self._writer,
            turn_id,
            user_id=user_id,
            recalled_ids=recalled_ids,
            recalled_at=recalled_at,
            new_record=new_record,
            replace_new=replace_new,
        )

    # ------------------------------------------------------------------ retrieval

    def _embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return check_embeddings(self._embedder.embed_documents(list(queries)), len(queries))

    def _weighed_forms(
        self, user_id: str, plans: Sequence[QueryPlan]
    ) -> list[list[tuple[str, float]]]:
        """Each plan's ``embed_texts`` that weigh, with their weights: how ``user_id``'s
        memories write their owner (``form_weights``).

        A way of writing the owner that none of the memories uses weighs 0 and is left out:
        its row would add exactly nothing to the mean, so a user whose memories all say "I"
        (or all "the user") pays for one embedding, not three.
        """
        weights_of: dict[tuple[str, ...], list[float]] = {}
        forms = {plan.embed_forms for plan in plans}
        if forms - {("query",)}:
            terms = self._analyser.form_terms(user_id)
            flat = [term for group in terms.values() for term in group]
            memories, counts = self.index.document_frequencies(user_id, flat)
            holding = dict(zip(flat, counts, strict=True))
            weights_of = {form: form_weights(form, terms, memories, holding) for form in forms}
        return [
            [
                (text, weight)
                for text, weight in zip(
                    plan.embed_texts,
                    weights_of.get(plan.embed_forms, [1.0] * len(plan.embed_texts)),
                    strict=True,
                )
                if weight > 0
            ]
            for plan in plans
        ]

    def _embed_plans(self, user_id: str, plans: Sequence[QueryPlan]) -> np.ndarray:
        """Each plan's query vector: the unit mean of its texts that weigh, weighted
        (``_weighed_forms``; one embedding batch for every distinct text of every plan)."""
        weighing = self._weighed_forms(user_id, plans)
        texts = list(dict.fromkeys(text for parts in weighing for text, _ in parts))
        vectors = self._embed_queries(texts).astype(np.float64)
        row = {text: at for at, text in enumerate(texts)}
        means = np.empty((len(plans), vectors.shape[1]))
        for at, parts in enumerate(weighing):
            # numpy's weighted average, as ``np.average`` computes it (the same bits)
            weights = np.array([weight for _, weight in parts])
            part = vectors[[row[text] for text, _ in parts]]
            means[at] = (part * weights[:, None]).sum(axis=0) / weights.sum()
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        unit: np.ndarray = means / np.where(norms > 0, norms, 1.0)
        return unit

    def _plans(self, queries: Sequence[str], user_id: str, now: datetime) -> list[QueryPlan]:
        """The analyser's plan of each query, each checked to be one."""
        planned = [self._analyser.plan(query, user_id, now) for query in queries]
        for plan in planned:
            if not isinstance(plan, QueryPlan):
                raise InvalidInputError(
                    f"the analyser returned {type(plan).__name__}, not a QueryPlan"
                )
        return planned

    def _checked_plans(
        self, queries: Sequence[str], user_id: str, now: object
    ) -> tuple[str, list[QueryPlan]]:
        """``user_id`` checked, and each query's plan at ``now`` (None: the clock's)."""
        user_id = check_user(user_id)
        return user_id, self._plans(queries, user_id, now_moment(now))

    def query_forms(
        self, queries: Sequence[str], user_id: str, *, now: str | datetime | float | None = None
    ) -> list[list[tuple[str, float]]]:
        """The texts each query's vector is the weighted mean of, with their relative weights:
        the query's owner written each way ``user_id``'s memories write it (``query_vectors``)."""
        return self._weighed_forms(*self._checked_plans(queries, user_id, now))

    def query_vectors(
        self, queries: Sequence[str], user_id: str, *, now: str | datetime | float | None = None
    ) -> np.ndarray:
        """The unit vectors ``recall`` searches ``user_id``'s memories with for ``queries``
        (one row each): each query's plan embedded as those memories write their owner."""
        return self._embed_plans(*self._checked_plans(queries, user_id, now))

    def _topics(self) -> TopicSpace:
        """The life domains as this store's embedder places them, embedded on first use."""
        space = self._topic_space
        if space is not None:
            return space
        with self._topic_lock:
            if self._topic_space is None:
                self._topic_space = TopicSpace.of(self._embedder)
            return self._topic_space

    def _ranked(
        self,
        user_id: str,
        queries: Sequence[str],
        moods: Sequence[float],
        *,
        now: datetime,
        top_k: int,
        settings: RecallSettings,
        weights: RetrievalWeights | None = None,
        congruence_on: bool = True,
        whole_pool: bool = False,
        where: WhereInput = None,
    ) -> list[RankedQuery]:
        """The one read path of recall, ``candidates`` and the engine's retriever: plan each
        query and embed it as the user's memories write their owner (the ``dense`` ranking: no
        plan, the query as written), rank (``affect_memory.memory.recall.pipeline``) among the
        memories meeting ``where``."""
        checked_where = parse_where(where)
        if self._hybrid is None:
            self._hybrid = HybridRecall(
                self._collections, self.index, observer=self._observer, topics=self._topics
            )
        if settings.ranking == "dense":  # recall as it was: the query as written
            plans: list[QueryPlan | None] = [None] * len(queries)
            vectors = self._embed_queries(queries)
        else:
            planned = self._plans(queries, user_id, now)
            plans, vectors = list(planned), self._embed_plans(user_id, planned)
        return self._hybrid.rank(
            user_id,
            queries,
            vectors,
            plans=plans,
            now=now,
            moods=moods,
            top_k=top_k,
            settings=settings,
            weights=weights,
            congruence_on=congruence_on,
            whole_pool=whole_pool,
            where=checked_where,
        )

    def candidates(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        candidates: int | None = None,
        settings: RecallSettings | None = None,
    ) -> tuple[MemoryCandidate, ...]:
        """The one way to get kernel candidates: every member of the query's recall pool,
        ranked by the recall pipeline as ``recall`` ranks it (best first), each prepared for the
        kernel as recall scored it: its relevance as the distance ``2 (1 - relevance)`` (Chroma's
        own distance in the ``dense`` ranking), the rule's ``age_days`` and the index's recall
        count. So the kernel ranks them as recall does. Read-only.

        ``settings`` and ``candidates`` (the dense pool size) are ``recall``'s; with
        ``DENSE_RECALL`` the pool is Chroma's nearest ``dense_candidates`` by cosine. What weight
        fitting, pool coverage and the benchmarks' plain vector search read.
        """
        problems: list[str] = []
        checked = collect_recall_queries(
            [({"query": query, "user_id": user_id, "mood_valence": mood_valence}, None)],
            problems,
        )
        if problems:
            raise InvalidInputError(problems_message(problems))
        moment = now_moment(now)
        ranked = self._ranked(
            checked[0].user_id,
            [checked[0].query],
            [checked[0].mood_valence],
            now=moment,
            top_k=1,
            settings=resolve_settings(settings, candidates=candidates),
            whole_pool=True,
        )
        return ranked[0].candidates()

    def _prepared(
        self, request: RetrievalInput, user_id: str, settings: RecallSettings | None
    ) -> RankedQuery:
        """An engine request ranked as ``recall`` ranks its query: the ``request.limit`` best
        (at most 64) of ``user_id``'s memories, with ``request.weights`` when given, else the
        settings' weights.

        A message longer than a query may be (the engine admits longer ones) is searched by its
        first ``MAX_TEXT_CHARS`` characters, rather than failing the turn; the embedder reads
        far fewer than that anyway."""
        user_id = check_user(user_id)
        settings = resolve_settings(settings)
        moment = normalize_timestamp(request.now, field="now").moment
        try:
            query = check_query(request.query[:MAX_TEXT_CHARS])
        except ValueError as error:
            raise InvalidInputError(f"query {error}") from None
        ranked = self._ranked(
            user_id,
            [query],
            [request.state.mood.valence],
            now=moment,
            top_k=min(MAX_TOP_K, request.limit),
            settings=settings,
            weights=request.weights,
        )
        return ranked[0]

    async def retrieve(
        self,
        request: RetrievalInput,
        *,
        user_id: str | None = None,
        candidates: int | None = None,
        settings: RecallSettings | None = None,
    ) -> tuple[MemoryCandidate, ...]:
        """Candidates for an engine request from ``user_id``'s memories; unscoped is refused.

        The ``request.limit`` best (at most 64) of the recall pool, prepared as ``candidates``
        prepares them (so the kernel's ranking of them is recall's); ``candidates`` sets the
        dense pool size. Embedding and the queries run in a worker thread so the event loop
        keeps serving other conversations.
        """
        user, resolved = self._scoped(user_id, candidates, settings)
        return await asyncio.to_thread(
            lambda: self._prepared(request, user, resolved).candidates()
        )

    async def retrieve_ranked(
        self,
        request: RetrievalInput,
        *,
        user_id: str | None = None,
        candidates: int | None = None,
        settings: RecallSettings | None = None,
    ) -> tuple[ScoredCandidate, ...]:
        """An engine request's ``request.limit`` best memories from ``user_id``'s, best first,
        each scored with its parts as ``recall`` scores it (what an engine turn takes as it is),
        in a worker thread; unscoped is refused."""
        user, resolved = self._scoped(user_id, candidates, settings)
        return await asyncio.to_thread(lambda: self._prepared(request, user, resolved).scored())

    def _scoped(
        self, user_id: str | None, candidates: int | None, settings: RecallSettings | None
    ) -> tuple[str, RecallSettings]:
        if user_id is None:
            raise InvalidInputError(
                "retrieve needs a user scope: pass user_id=..., or hand the engine "
                "memory.retriever_for(user_id)"
            )
        return check_user(user_id), resolve_settings(settings, candidates=candidates)

    def retriever_for(
        self,
        user_id: str,
        *,
        candidates: int | None = None,
        settings: RecallSettings | None = None,
    ) -> UserRetriever:
        """A ``MemoryRetriever`` that only ever reads ``user_id``'s memories, ranked as
        ``recall`` ranks them with these settings."""
        resolved = resolve_settings(settings, candidates=candidates)
        return UserRetriever(self, user_id, settings=resolved)

    def recall(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int | None = None,
        congruence_on: bool = True,
        weights: RetrievalWeights | None = None,
        settings: RecallSettings | None = None,
        where: WhereInput = None,
    ) -> RecallResult:
        """Retrieve and rerank with the kernel; every hit keeps its score breakdown. Read-only.

        ``settings`` (default ``DEFAULT_RECALL_SETTINGS``) build the pool and rank it;
        ``candidates`` (the dense pool size) and ``weights`` replace theirs when given. The
        dense search always fetches at least ``top_k`` memories, so ``top_k`` above
        ``candidates`` widens it rather than returning fewer. ``where`` (e.g.
        ``{"agent_id": "x"}``, ``{"extra.project": {"$in": ["p", "q"]}}``; see
        ``affect_memory.memory.filters``) keeps only the memories meeting it, before ranking.
        """
        return self.recall_many(
            [{"query": query, "user_id": user_id, "mood_valence": mood_valence}],
            now=now,
            top_k=top_k,
            candidates=candidates,
            congruence_on=congruence_on,
            weights=weights,
            settings=settings,
            where=where,
        )[0]

    def recall_many(
        self,
        queries: Sequence[RecallQuery | Mapping[str, Any]],
        *,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int | None = None,
        congruence_on: bool = True,
        weights: RetrievalWeights | None = None,
        settings: RecallSettings | None = None,
        where: WhereInput = None,
    ) -> list[RecallResult]:
        """Recall for many queries: one embedding batch, one Chroma query per user. Read-only.

        Scores, distances and similarities agree with one ``recall`` per query within
        ``RECALL_MANY_TOLERANCE`` (1e-6; the model embeds a query in a batch slightly
        differently, in the last bits), and so does the order, except between results whose
        scores are within that of each other. ``where`` filters every query's memories as
        ``recall``'s does.
        """
        checked_where = parse_where(where)
        if isinstance(queries, Mapping | BaseModel | str):
            raise InvalidInputError(
                f"recall_many takes a list of queries, got one {type(queries).__name__}; "
                "use recall() for a single query"
            )
        items = list(queries)
        problems: list[str] = []
        labelled = len(items) > 1  # one query's problems need no label
        checked = collect_recall_queries(
            ((item, f"query {index}" if labelled else None) for index, item in enumerate(items)),
            problems,
        )
        if problems:
            raise InvalidInputError(problems_message(problems))
        moment = now_moment(now)
        top_k = check_top_k(top_k)
        resolved = resolve_settings(settings, candidates=candidates, weights=weights)
        if not isinstance(congruence_on, bool):
            raise InvalidInputError(f"congruence_on must be a bool, got {congruence_on!r}")
        if not checked:
            return []
        by_user: dict[str, list[int]] = {}
        for index, query in enumerate(checked):
            by_user.setdefault(query.user_id, []).append(index)
        found: dict[int, RankedQuery] = {}
        for user_id, indices in by_user.items():
            ranked = self._ranked(
                user_id,
                [checked[index].query for index in indices],
                [checked[index].mood_valence for index in indices],
                now=moment,
                top_k=top_k,
                settings=resolved,
                congruence_on=congruence_on,
                where=checked_where,
            )
            found.update(zip(indices, ranked, strict=True))
        stamp = moment.astimezone(UTC).isoformat(timespec="microseconds")
        return [
            RecallResult(
                query.query,
                query.user_id,
                stamp,
                found[index].hits(),
                found[index].rows.skipped,
                found[index].plan,
            )
            for index, query in enumerate(checked)
        ]

    # ------------------------------------------------------------------ reads and deletes

    def get(self, ids: Iterable[str], *, user_id: str) -> tuple[MemoryRecord, ...]:
        """``user_id``'s stored records for ``ids``, in the order asked; ids that user does not
        have are left out, and so are malformed rows (logged). ``recall_count`` and
        ``last_recalled_at`` are the index's (the authoritative counts)."""
        user_id = check_user(user_id)
        wanted = check_ids(ids)
        collection = self._collections.of(user_id, create=False)
        if collection is None or not wanted:
            return ()
        rows: dict[str, MemoryRecord] = {}
        with self._collections.backend("read memories"):
            for chunk in chunks(wanted, self._collections.max_batch):
                got = collection.get(ids=list(chunk), include=["documents", "metadatas"])
                rows.update(records_of(got, user_id))
        found = [ident for ident in wanted if ident in rows]
        rehearsal = self._index.rehearsal(user_id, found)
        return tuple(
            rows[ident].model_copy(update={"recall_count": count, "last_recalled_at": stamp})
            if held
            else rows[ident]
            for ident, count, stamp, held in zip(
                found,
                rehearsal.recall_counts.tolist(),
                rehearsal.last_recalled_at,
                rehearsal.found.tolist(),
                strict=True,
            )
        )

    def forget(self, ids: Iterable[str], *, user_id: str) -> tuple[str, ...]:
        """Delete ``user_id``'s memories with these ids; returns the ids removed.

        ``user_id`` is required: ids are per user, so an unscoped forget could only guess.
        """
        user_id = check_user(user_id)
        return tuple(self._writer.forget(user_id, check_ids(ids)))

    def count(self, user_id: str | None = None) -> int:
        """How many memories are stored, in total or for one user."""
        if user_id is None:
            collections = [collection for _, collection in self._collections.every()]
        else:
            collection = self._collections.of(check_user(user_id), create=False)
            collections = [] if collection is None else [collection]
        with self._collections.backend("count memories"):
            return sum(int(collection.count()) for collection in collections)

    def stats(self) -> MemoryStats:
        """Memories per user (by their real ids), the space and HNSW settings, size on disk."""
        users: dict[str, int] = {}
        collections = self._collections.every()
        with self._collections.backend("count memories"):
            for user_id, collection in collections:
                held = int(collection.count())
                if held:  # a user whose memories were all forgotten has none to list
                    users[user_id] = held
        if collections:
            first = collections[0][1]
            hnsw = configured_hnsw(first)
            embedder = recorded_embedder(first)
        else:
            hnsw = dict(self._collections.configuration["hnsw"])
            embedder = self._embedder.name
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

    # ------------------------------------------------------------------ async

    async def arecall(
        self,
        query: str,
        user_id: str,
        *,
        mood_valence: float = 0.0,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int | None = None,
        congruence_on: bool = True,
        weights: RetrievalWeights | None = None,
        settings: RecallSettings | None = None,
        where: WhereInput = None,
    ) -> RecallResult:
        """``recall`` for an event loop: the same result, computed in the store's worker thread
        while the loop runs on (``affect_memory.memory.chroma.worker``)."""
        call = functools.partial(
            self.recall,
            query,
            user_id,
            mood_valence=mood_valence,
            now=now,
            top_k=top_k,
            candidates=candidates,
            congruence_on=congruence_on,
            weights=weights,
            settings=settings,
            where=where,
        )
        return await self._worker.run(call)

    async def arecall_many(
        self,
        queries: Sequence[RecallQuery | Mapping[str, Any]],
        *,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        candidates: int | None = None,
        congruence_on: bool = True,
        weights: RetrievalWeights | None = None,
        settings: RecallSettings | None = None,
        where: WhereInput = None,
    ) -> list[RecallResult]:
        """``recall_many`` for an event loop, in the store's worker thread."""
        batch = queries if isinstance(queries, Mapping | BaseModel | str) else list(queries)
        call = functools.partial(
            self.recall_many,
            batch,
            now=now,
            top_k=top_k,
            candidates=candidates,
            congruence_on=congruence_on,
            weights=weights,
            settings=settings,
            where=where,
        )
        return await self._worker.run(call)

    async def aget(self, ids: Iterable[str], *, user_id: str) -> tuple[MemoryRecord, ...]:
        """``get`` for an event loop, in the store's worker thread."""
        wanted = list(ids) if not isinstance(ids, str) else ids
        return await self._worker.run(functools.partial(self.get, wanted, user_id=user_id))

    async def aupsert(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = False
    ) -> WriteReport:
        """``upsert`` for an event loop, in the store's worker thread (validated whole first;
        no progress bar unless asked, as ``aadd``)."""
        batch = list(records) if not isinstance(records, Mapping | str) else records
        return await self._worker.run(functools.partial(self.upsert, batch, progress=progress))

    async def aadd(
        self, records: Iterable[MemoryRecord | Mapping[str, Any]], *, progress: bool | None = False
    ) -> WriteReport:
        """``add`` for an event loop, in the store's worker thread (validated whole first).

        An embedded store's Chroma writes keep the GIL, so the loop pauses for each written
        chunk (about 0.5 s per 512 new records); embedding and a server's writes do not."""
        batch = list(records) if not isinstance(records, Mapping | str) else records
        return await self._worker.run(functools.partial(self.add, batch, progress=progress))

    async def aforget(self, ids: Iterable[str], *, user_id: str) -> tuple[str, ...]:
        """``forget`` for an event loop, in the store's worker thread."""
        wanted = list(ids) if not isinstance(ids, str) else ids
        return await self._worker.run(functools.partial(self.forget, wanted, user_id=user_id))

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Release the Chroma client and the embedded store's lock; safe to call twice.

        Async calls already handed to the worker thread finish first."""
        if not self._closed:
            self._worker.close()
            self._closed = True
            try:
                self._collections.close()
            finally:
                self._index.close()

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

    # ------------------------------------------------------------------ data rights
    # (last in the class: a method named ``list`` would shadow the builtin in the annotations
    # of every method after it)

    def list(
        self, user_id: str, *, limit: int = DEFAULT_LIST_LIMIT, offset: int = 0
    ) -> tuple[MemoryRecord, ...]:
        """A page of ``user_id``'s memories, oldest timestamp first, then by id (``limit`` at
        most 1,000); recall counts are the index's (``affect_memory.memory.export``)."""
        user_id = check_user(user_id)
        limit, offset = check_page(limit, offset)
        ids = self._index.ordered_ids(user_id, limit=limit, offset=offset)
        return self.get(ids, user_id=user_id)

    def export(self, user_id: str) -> Iterator[dict[str, Any]]:
        """Every memory of ``user_id`` as JSON-able objects that ``ingest`` reads back into
        the same records, recall counts and times included, in ``list``'s order; lazy, page by
        page (``affect_memory.memory.export.write_jsonl`` writes them as JSON lines)."""
        user_id = check_user(user_id)
        return exported_records(
            lambda limit, offset: self._index.ordered_ids(user_id, limit=limit, offset=offset),
            lambda ids: self.get(ids, user_id=user_id),
        )

    def erase_user(self, user_id: str) -> ErasureReport:
        """Erase every memory of ``user_id``: their Chroma collection and every index row
        (documents, postings, journal, recall counts); crash-safe, see
        ``affect_memory.memory.erasure``. Another user's memories, same ids or not, stay."""
        return erase_user(self._collections, self._index, user_id)

    async def alist(
        self, user_id: str, *, limit: int = DEFAULT_LIST_LIMIT, offset: int = 0
    ) -> tuple[MemoryRecord, ...]:
        """``list`` for an event loop, in the store's worker thread."""
        return await self._worker.run(
            functools.partial(self.list, user_id, limit=limit, offset=offset)
        )

    async def aexport(self, user_id: str) -> tuple[dict[str, Any], ...]:
        """``export`` for an event loop: every line, read whole in the store's worker thread."""
        return await self._worker.run(lambda: tuple(self.export(user_id)))

    async def aerase_user(self, user_id: str) -> ErasureReport:
        """``erase_user`` for an event loop, in the store's worker thread."""
        return await self._worker.run(functools.partial(self.erase_user, user_id))


def _directory_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
    return total
