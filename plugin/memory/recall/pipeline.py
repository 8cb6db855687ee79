"""One user's planned queries from candidate pool to ranked, explained memories.

For each query and its plan (``affect_memory.memory.recall.plan``; ``RecallSettings`` holds every
constant):

1. **pool**: Chroma's ``dense_candidates`` nearest memories (ids and distances only; at most
   ``dated_dense_candidates`` under a rule that reads every candidate's row), plus the
   lexical index's ``lexical_candidates`` best BM25 matches of the plan's ``match_text``, their
   cosine from the embeddings the index holds (Chroma's ``get`` only for those it lacks;
   ``affect_memory.memory.recall.pool``). The lexical search and the index rows of the whole
   pool are one read, in one snapshot (``pool_search``): a hit's row comes with its id. Under
   the event rule, which ages no memory by its date, only the hits' rows come with the search;
   a dense candidate's row is read when the ranking reaches it
   (``affect_memory.memory.recall.members``);
2. **relevance**, on an absolute scale: fused, ``w * share + (1 - w) * max(0, cosine)``
   (``affect_memory.memory.recall.fusion``), or for a current-state plan the cosine blended with the
   member's cosine with the query's closest member (``feedback``) and the share of the query
   matched, plus the weighted topic agreement with the query (``life_topics``), times the
   change gain for a memory whose text reports a change (``change_cues``), the last two
   scaled by the memory's length (``time_rule.state_similarity``); a member the index holds
   no text of is bounded as if it reported a change until its row is read;
3. **age**: the plan's time rule (``affect_memory.memory.recall.time_rule``) gives each memory the
   age recency is scored at;
4. **rank**: the kernel's ``rank_columns`` with the settings' weights, over only the members
   that can reach the top (``affect_memory.memory.recall.pruning``), with the recall counts of the
   index, which owns them. The index also holds what ranking reads of each memory's Chroma
   row (text, timestamp, significance, valence, episode), so those rows come from the index,
   through the same checks; Chroma is read (documents and metadata) only for a member the
   index lacks or holds without those fields (written before they were indexed, or with
   malformed metadata).

A filter (``where``, ``affect_memory.memory.filters``) applies before all of it: Chroma's query
gets it as its ``where`` (a pool it returns short of ``dense_candidates`` while the index
holds more memories meeting it is topped up from the index, ``pool.with_filtered``), and the
lexical search ranks only the memories whose tags meet it, so every member of the pool meets
it and ``top_k`` of them come back whenever that many exist.

The ``dense`` ranking is recall as it was: Chroma's nearest, its distance as is, aged by the
calendar. An engine turn takes this same ranking as it is (``RankedQuery.scored``), so a turn
and a recall surface the same memories with the same scores.

This is the one candidate path: ``ChromaMemory``'s recall, its ``candidates`` (the whole pool,
``RankedQuery.candidates``) and its engine retrieval, the benchmarks through them, and an
adopted collection's recall (``affect_memory.memory.admin.adopted_reads``) all rank here.

The module is about 740 lines because the steps above share one query's pool, relevance and
scoring state through the pruned fetch's callback; the pieces that stand alone already live
in the modules each step names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.batch import RankedColumns, rank_columns
from affect_memory.kernel.engine import StageObserver
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.retrieval import SECONDS_PER_DAY, RetrievalWeights, ScoredCandidate
from affect_memory.memory.chroma.rows import StoredRows, rows_from_query
from affect_memory.memory.filters import MemoryFilter
from affect_memory.memory.recall.change_cues import change_word
from affect_memory.memory.recall.explanation import CALENDAR_RULE, Explanation, explained_hits
from affect_memory.memory.recall.feedback import closest_feedback
from affect_memory.memory.recall.fusion import fuse
from affect_memory.memory.recall.life_topics import TopicSpace
from affect_memory.memory.recall.members import MemberFacts
from affect_memory.memory.recall.plan import QueryPlan
from affect_memory.memory.recall.pool import (
    MemoryIndexReads,
    PooledSearch,
    QueryPool,
    UserCollectionReads,
    chroma_vector,
    dense_pools,
    index_vectors,
    with_filtered,
    with_lexical,
)
from affect_memory.memory.recall.pruning import (
    RankedPrefix,
    first_fetch,
    rank_exactly,
    score_ceilings,
    settles,
)
from affect_memory.memory.recall.time_rule import (
    ages_by_date,
    cue_scales,
    rule_ages,
    rule_anchor,
    rule_reasons,
    state_similarity,
)
from affect_memory.memory.results import RecallHit
from affect_memory.memory.settings import RecallSettings

__all__ = ["HybridRecall", "RankedQuery"]

FloatArray = npt.NDArray[np.float64]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class RankedQuery:
    """One query's ranking: the rows fetched, their scores, and what explains each."""

    rows: StoredRows
    """The fetched rows as the kernel scored them (its distances, ages and the index's counts)."""
    ranked: RankedColumns
    explanation: Explanation
    pool: int
    """How many memories the query's pool held."""
    plan: QueryPlan | None = None
    """What the query was read as asking (None: the dense ranking)."""

    @classmethod
    def empty(cls, skipped: tuple[str, ...] = ()) -> RankedQuery:
        """No memories to rank."""
        rows = StoredRows.empty(skipped)
        ranked = rank_columns(rows.columns, _EPOCH, limit=1)
        floats = np.zeros(0, dtype=np.float64)
        return cls(rows, ranked, Explanation(floats, floats, floats, [], floats), 0)

    def hits(self) -> tuple[RecallHit, ...]:
        """The ranked memories as recall hits, best first."""
        if not len(self.rows):
            return ()
        return explained_hits(self.rows, self.ranked, self.explanation)

    def _candidate(self, i: int, distances: FloatArray) -> MemoryCandidate:
        """Row ``i`` as a kernel candidate at ``distances[i]``, its rule's age and the index's
        recall count, skipping pydantic: every value was checked already."""
        columns = self.rows.columns
        return MemoryCandidate.model_construct(
            id=columns.ids[i],
            text=self.rows.texts[i],
            distance=float(distances[i]),
            timestamp=self.rows.timestamps[i],
            significance=float(columns.significance[i]),
            recall_count=int(columns.recall_counts[i]),
            episode=bool(columns.episodes[i]),
            emotional_valence=float(columns.valences[i]),
            age_days=float(self.explanation.ages[i]),
        )

    def scored(self) -> tuple[ScoredCandidate, ...]:
        """The ranked memories as the kernel scored them, best first: each candidate carries
        its cosine distance to the query and its rule's age (``age_days``), and the score its
        relevance (``similarity``), recency, salience and congruence. What an engine turn
        takes as it is (``affect_memory.kernel.protocols.RankedRetriever``)."""
        scores = self.ranked.scores
        return tuple(
            ScoredCandidate.model_construct(
                candidate=self._candidate(i, self.explanation.distances),
                score=float(scores.score[i]),
                similarity=float(scores.similarity[i]),
                recency=float(scores.recency[i]),
                salience=float(scores.salience[i]),
                congruence=float(scores.congruence[i]),
                episode_bonus=float(scores.episode_bonus[i]),
            )
            for i in self.ranked.order
        )

    def candidates(self) -> tuple[MemoryCandidate, ...]:
        """The ranked memories as the kernel candidates they were scored as, best first.

        Each carries the kernel's distance (``2 (1 - relevance)``, or Chroma's in the dense
        ranking), its rule's age (``age_days``) and the index's recall count, so ranking them
        again gives the same scores.
        """
        distances = self.rows.columns.distances
        return tuple(self._candidate(i, distances) for i in self.ranked.order)


@dataclass(frozen=True, slots=True)
class _Scoring:
    """What one query is ranked with."""

    now: datetime
    mood_valence: float
    top_k: int
    settings: RecallSettings
    weights: RetrievalWeights
    congruence_on: bool
    whole_pool: bool = False


@dataclass(frozen=True, slots=True)
class _Relevance:
    """A pool's relevance (the kernel's similarity), its kernel distances and their parts."""

    similarity: FloatArray
    distances: FloatArray
    """The kernel's distances (``2 (1 - relevance)``, or Chroma's in the dense ranking)."""
    chroma_distances: FloatArray
    cosine: FloatArray
    dense: FloatArray | None = None
    bm25: FloatArray | None = None
    lexical: FloatArray | None = None
    share: FloatArray | None = None
    """A current-state question's share of the query each member matches (``lexical_share``)."""
    fused: FloatArray | None = None
    topic: FloatArray | None = None
    """A current-state question's topic agreement of each member with the query."""
    query_topic: str | None = None
    """The life domain the query most likely is about (with ``topic``)."""
    closest: FloatArray | None = None
    """A current-state question's cosine of each member with the query's closest member (the
    closest's own, and one without an embedding: its cosine with the query)."""
    feedback: FloatArray | None = None
    """A current-state question's cosine blended with ``closest`` (``feedback``)."""

    @property
    def state_cosine(self) -> FloatArray:
        """The cosine a current-state question's similarity starts from: the blended one."""
        return self.cosine if self.feedback is None else self.feedback


class HybridRecall:
    """Ranks one user's queries over their Chroma collection and the memory's index."""

    def __init__(
        self,
        collections: UserCollectionReads,
        index: MemoryIndexReads,
        *,
        observer: StageObserver | None = None,
        topics: Callable[[], TopicSpace] | None = None,
    ) -> None:
        """Read from ``collections`` and ``index``; ``observer`` sees each stage's seconds;
        ``topics`` gives the life domains current-state questions use (None: no topic term)."""
        self._collections = collections
        self._index = index
        self._observer = observer
        self._topics = topics

    def _timed(self, stage: str, start: float) -> None:
        if self._observer is not None:
            self._observer(stage, perf_counter() - start)

    def rank(
        self,
        user_id: str,
        queries: Sequence[str],
        vectors: FloatArray,
        *,
        plans: Sequence[QueryPlan | None],
        now: datetime,
        moods: Sequence[float],
        top_k: int,
        settings: RecallSettings,
        weights: RetrievalWeights | None = None,
        congruence_on: bool = True,
        whole_pool: bool = False,
        where: MemoryFilter | None = None,
    ) -> list[RankedQuery]:
        """The ranking of each query (embedded as ``vectors``, planned as ``plans``: None for
        the ``dense`` ranking) over ``user_id``'s memories.

        ``weights`` override the settings' own; at least ``top_k`` nearest memories are
        fetched whatever ``settings.dense_candidates`` (or, under a rule that ages memories by
        their dates, ``dated_dense_candidates``) says. With ``whole_pool`` every pool
        member is fetched and ranked (for fitting and pool coverage), not only the top ``k``.
        With ``where``, only the memories meeting it are candidates.
        """
        collection = self._collections.of(user_id, create=False)
        if collection is None or not len(queries):
            return [replace(RankedQuery.empty(), plan=plan) for plan in plans]
        sizes = self._dense_sizes(user_id, plans, settings, top_k)
        size = max(sizes)
        with self._collections.backend("query memories"):
            start = perf_counter()
            result = collection.query(
                query_embeddings=vectors,
                n_results=size,
                include=["distances"],
                where=None if where is None else where.chroma_where(),
            )
            self._timed("chroma_query", start)
        # one query at the deepest plan's size: a shallower plan's nearest are its prefix
        # (HNSW searches at ef_search whatever the size asked for)
        pools = [
            pool.nearest(wanted)
            for pool, wanted in zip(
                dense_pools(result, f"a query of user {user_id!r}"), sizes, strict=True
            )
        ]
        if where is not None:
            pools = [
                self._topped_up(collection, user_id, where, pool, vector, wanted)
                if len(pool) < wanted
                else pool
                for pool, vector, wanted in zip(pools, vectors, sizes, strict=True)
            ]
        newest: list[float | None] = []
        ranked = []
        for vector, pool, mood, rule in zip(vectors, pools, moods, plans, strict=True):
            scoring = _Scoring(
                now, mood, top_k, settings, weights or settings.weights, congruence_on, whole_pool
            )
            if rule is not None and rule.kind == "state" and not newest:
                newest.append(self._index.newest_epoch(user_id))
            read: PooledSearch | None = None
            if rule is not None and settings.lexical_candidates > 0:
                pool, read = self._with_lexical(
                    collection, user_id, rule, vector, pool, settings, where
                )
            found = self._rank_pool(
                collection,
                user_id,
                pool,
                vector,
                rule,
                newest[0] if newest else None,
                scoring,
                read,
            )
            ranked.append(replace(found, plan=rule))
        return ranked

    def _dense_sizes(
        self,
        user_id: str,
        plans: Sequence[QueryPlan | None],
        settings: RecallSettings,
        top_k: int,
    ) -> list[int]:
        """How many of Chroma's nearest each plan's pool takes: ``dense_candidates``, or
        ``dated_dense_candidates`` under a rule that reads every candidate's row, unless the
        deeper pool would hold every memory of the user anyway (a small store is kept whole);
        never fewer than ``top_k``."""
        deep = max(settings.dense_candidates, top_k)
        shallow = max(min(settings.dense_candidates, settings.dated_dense_candidates), top_k)
        dated = [_reads_every_row(rule) for rule in plans]
        if shallow >= deep or not any(dated):
            return [deep] * len(plans)
        if self._index.memory_count(user_id) <= settings.dense_candidates:
            return [deep] * len(plans)
        return [shallow if reads else deep for reads in dated]

    def _with_lexical(
        self,
        collection: Any,
        user_id: str,
        rule: QueryPlan,
        vector: FloatArray,
        pool: QueryPool,
        settings: RecallSettings,
        where: MemoryFilter | None = None,
    ) -> tuple[QueryPool, PooledSearch]:
        """``pool`` joined with the lexical search's hits, and that search, which read the
        index rows of the whole pool in its snapshot."""
        start = perf_counter()
        read = self._index.pool_search(
            user_id,
            rule.match_text,
            settings.lexical_candidates,
            known=pool.ids,
            k1=settings.bm25_k1,
            b=settings.bm25_b,
            where=where,
            embeddings=rule.kind == "state",
            candidate_rows=ages_by_date(rule),
        )
        self._timed("lexical_search", start)
        return with_lexical(pool, read.hits, vector, self._read_embeddings(collection)), read

    def _read_embeddings(self, collection: Any) -> Callable[[list[str]], Mapping[str, Any]]:
        def read_missing(ids: list[str]) -> Mapping[str, Any]:
            with self._collections.backend("read memories"):
                begin = perf_counter()
                got = collection.get(ids=ids, include=["embeddings"])
                self._timed("chroma_get", begin)
            return got  # type: ignore[no-any-return]

        return read_missing

    def _topped_up(
        self,
        collection: Any,
        user_id: str,
        where: MemoryFilter,
        pool: QueryPool,
        vector: FloatArray,
        size: int,
    ) -> QueryPool:
        """A filtered pool Chroma returned short of ``size``, topped up from the index when
        more memories meet the filter (an approximate filtered search can miss some)."""
        start = perf_counter()
        members = self._index.filtered_members(user_id, where, set(pool.ids))
        self._timed("index_read", start)
        return with_filtered(pool, members, vector, self._read_embeddings(collection), size)

    def _rank_pool(
        self,
        collection: Any,
        user_id: str,
        pool: QueryPool,
        vector: FloatArray,
        rule: QueryPlan | None,
        newest_epoch: float | None,
        scoring: _Scoring,
        read: PooledSearch | None = None,
    ) -> RankedQuery:
        if not len(pool):
            return RankedQuery.empty()
        if scoring.whole_pool:
            scoring = replace(scoring, top_k=len(pool))
        if rule is not None and not pool.searched:
            # no lexical search found a term of the query (a question of stop words, or no
            # lexical candidates): relevance is the cosine's alone, not capped below it
            words_off = {"lexical_weight": 0.0, "state_lexical_weight": 0.0}
            scoring = replace(scoring, settings=scoring.settings.model_copy(update=words_off))
        relevance = _relevance(pool, rule, scoring.settings)
        gains = rule is not None and rule.kind == "state"
        # What the index knows of the members before Chroma is read (their ages and recall
        # counts, or bounds of them) gives each one's best possible score, which decides the
        # order rows are fetched in.
        start = perf_counter()
        facts = self._facts(user_id, pool, rule, read, embeddings=gains)
        self._timed("index_read", start)
        upper = relevance
        if gains:  # feedback, the topic term and the change gain
            relevance = self._with_members(
                collection, pool, vector, facts.embeddings, relevance, scoring.settings
            )
            known, texts = facts.known, facts.texts
            reports = np.array(
                [bool(k) and change_word(t) is not None for k, t in zip(known, texts, strict=True)],
                dtype=bool,
            )
            cosine, topics, shares = relevance.state_cosine, relevance.topic, relevance.share
            settings = scoring.settings
            held = [t if k else None for k, t in zip(known.tolist(), texts, strict=True)]
            scales = cue_scales(held, settings)
            relevance = _with_similarity(
                relevance, state_similarity(cosine, reports, settings, topics, shares, scales)
            )
            # one whose text the index lacks may report a change (and be short): its ceiling
            # assumes it does
            upper = _with_similarity(
                relevance,
                state_similarity(cosine, reports | ~known, settings, topics, shares, scales),
            )
        if rule is not None:  # the state and former rules age from a relevant member's date
            newest_epoch = rule_anchor(
                rule, facts.epochs, relevance.similarity, newest_epoch, scoring.settings
            )

        def bounds() -> FloatArray:
            ages = _ages(rule, facts.epochs, scoring.now, newest_epoch, scoring.settings)
            return score_ceilings(
                upper.distances,
                ages,
                facts.ceiling_counts(),
                scoring.weights,
                mood_valence=scoring.mood_valence,
                congruence_on=scoring.congruence_on,
                known=facts.known,
                significance=facts.significance,
                episodes=facts.episodes,
                valences=facts.valences,
            )

        ceilings = bounds()
        order = np.lexsort((np.arange(len(pool)), -ceilings))
        raw: dict[str, tuple[Any, Any]] = {}
        position = {ident: index for index, ident in enumerate(pool.ids)}

        def rank_first(count: int) -> RankedPrefix[tuple[StoredRows, RankedColumns, Explanation]]:
            chosen = order[:count].tolist()
            # rows a bound without dates left unread, now that the ranking reaches them
            self._fill(user_id, pool, facts, facts.unread(chosen))
            wanted = [pool.ids[index] for index in chosen]
            unfetched: list[str] = []
            for index, ident in zip(chosen, wanted, strict=True):
                if ident in raw:
                    continue
                if not facts.known[index]:
                    unfetched.append(ident)
                else:  # the index's copy of the row, checked as Chroma's would be
                    raw[ident] = (
                        facts.texts[index],
                        {
                            "user_id": user_id,
                            "significance": float(facts.significance[index]),
                            "emotional_valence": float(facts.valences[index]),
                            "recall_count": int(facts.recall_counts[index]),
                            "episode": bool(facts.episodes[index]),
                            "timestamp": facts.timestamps[index],
                            "timestamp_epoch": float(facts.epochs[index]),
                        },
                    )
            self._read(collection, user_id, unfetched, raw)
            kept = [ident for ident in wanted if ident in raw]
            at = np.array([position[ident] for ident in kept], dtype=np.intp)
            texts = [raw[ident][0] for ident in kept]
            distances = relevance.distances[at]
            if gains:  # the texts read from Chroma decide their gain now
                said = np.array([change_word(_text(t)) is not None for t in texts], dtype=bool)
                topics = None if relevance.topic is None else relevance.topic[at]
                shares = None if relevance.share is None else relevance.share[at]
                cosines = relevance.state_cosine[at]
                scales = cue_scales([_text(t) or "" for t in texts], scoring.settings)
                similarity = state_similarity(
                    cosines, said, scoring.settings, topics, shares, scales
                )
                distances = 2.0 * (1.0 - similarity)
            rows = rows_from_query(
                kept,
                texts,
                [raw[ident][1] for ident in kept],
                distances.tolist(),
                user_id,
            )
            if len(rows) < len(kept):  # malformed rows were skipped: realign
                at = np.array([position[ident] for ident in rows.ids], dtype=np.intp)
            return self._rank_rows(rows, at, relevance, facts, rule, newest_epoch, scoring)

        first = first_fetch(scoring.top_k)
        if not facts.read.all():
            # Bounds without dates: the rows the first batch reaches are read. Unless that
            # settles the top, every row is read and the pool bounded again, exactly, so the
            # rest is ranked as if read whole (never more rounds than that).
            prefix = rank_first(first)
            left = float(ceilings[order[first]]) if first < len(pool) else None
            if settles(prefix, left, scoring.top_k):
                rows, ranked, explanation = prefix.ranked
                return RankedQuery(rows, ranked, explanation, len(pool))
            self._fill(user_id, pool, facts, facts.unread(range(len(pool))))
            ceilings = bounds()
            order = np.lexsort((np.arange(len(pool)), -ceilings))
        prefix = rank_exactly(ceilings[order], rank_first, limit=scoring.top_k, first=first)
        rows, ranked, explanation = prefix.ranked
        return RankedQuery(rows, ranked, explanation, len(pool))

    def _facts(
        self,
        user_id: str,
        pool: QueryPool,
        rule: QueryPlan | None,
        read: PooledSearch | None,
        *,
        embeddings: bool,
    ) -> MemberFacts:
        """What the index holds of the pool's members: every member's row (with
        ``embeddings``, their embeddings too) or, under a rule that ages no memory by its
        date, only those the lexical search read with its hits (``members``)."""
        if not ages_by_date(rule):
            facts = MemberFacts.none_read(len(pool))
            if read is not None:
                facts.fill(*read.held(pool.ids))
            return facts
        whole = None if read is None else read.rehearsal(pool.ids)
        if whole is None:
            whole = self._index.rehearsal(user_id, pool.ids, fields=True, embeddings=embeddings)
        return MemberFacts.of(whole)

    def _fill(self, user_id: str, pool: QueryPool, facts: MemberFacts, at: list[int]) -> None:
        """Read the index rows of the pool's members at positions ``at`` into ``facts``."""
        if not at:
            return
        start = perf_counter()
        ids = [pool.ids[index] for index in at]
        facts.fill(at, self._index.rehearsal(user_id, ids, fields=True))
        self._timed("index_read", start)

    def _with_members(
        self,
        collection: Any,
        pool: QueryPool,
        vector: FloatArray,
        held: Sequence[bytes | None] | None,
        relevance: _Relevance,
        settings: RecallSettings,
    ) -> _Relevance:
        """``relevance`` with the closest member's feedback on each member and each member's
        topic agreement with the query, from the embedding the index holds of it, or Chroma's
        where it holds none (neither for one Chroma lacks too)."""
        dimension = len(vector)
        members, present = index_vectors(held or [None] * len(pool), dimension)
        unread = [ident for ident, got in zip(pool.ids, present.tolist(), strict=True) if not got]
        if unread:
            with self._collections.backend("read memories"):
                start = perf_counter()
                got = collection.get(ids=unread, include=["embeddings"])
                self._timed("chroma_get", start)
            chroma = dict(zip(got["ids"], got["embeddings"], strict=True))
            for at in np.flatnonzero(~present).tolist():
                found = chroma_vector(chroma.get(pool.ids[at]), dimension)
                if found is not None:
                    members[at], present[at] = found, True
        feedback = closest_feedback(relevance.cosine, members, present, settings.feedback_weight)
        if feedback.closest_at is not None:  # else no member has a vector: no feedback
            relevance = replace(relevance, closest=feedback.closest, feedback=feedback.cosines)
        if self._topics is None:
            return relevance
        space = self._topics()
        # one product over the whole pool whichever store each vector came from (same bits)
        agreed, topic = space.agreement(vector, members, settings.topic_temperature)
        return replace(relevance, topic=np.where(present, agreed, 0.0), query_topic=topic)

    def _read(
        self, collection: Any, user_id: str, ids: list[str], into: dict[str, tuple[Any, Any]]
    ) -> None:
        if not ids:
            return
        with self._collections.backend("read memories"):
            start = perf_counter()
            got = collection.get(ids=ids, include=["documents", "metadatas"])
            self._timed("chroma_get", start)
        for ident, document, metadata in zip(
            got["ids"], got["documents"], got["metadatas"], strict=True
        ):
            into[ident] = (document, metadata)

    def _rank_rows(
        self,
        rows: StoredRows,
        at: npt.NDArray[np.intp],
        relevance: _Relevance,
        facts: MemberFacts,
        rule: QueryPlan | None,
        newest_epoch: float | None,
        scoring: _Scoring,
    ) -> RankedPrefix[tuple[StoredRows, RankedColumns, Explanation]]:
        columns = rows.columns
        calendar = (scoring.now.timestamp() - columns.epochs) / SECONDS_PER_DAY
        ages = _ages(rule, columns.epochs, scoring.now, newest_epoch, scoring.settings)
        changes: list[str | None] | None = None
        scales: FloatArray | None = None
        if rule is None:
            reasons = [CALENDAR_RULE] * len(rows)
        elif rule.kind == "state":
            changes = [change_word(text) for text in rows.texts]
            topics = None
            if relevance.topic is not None and relevance.query_topic is not None:
                topics = (relevance.topic[at], relevance.query_topic)
            closest = None if relevance.closest is None else relevance.closest[at]
            shares = None if relevance.share is None else relevance.share[at]
            scales = cue_scales(rows.texts, scoring.settings)
            reasons = rule_reasons(
                rule,
                ages,
                relevance.cosine[at],
                scoring.settings,
                changes=changes,
                topics=topics,
                closest=closest,
                shares=shares,
                scales=scales,
            )
        else:
            reasons = rule_reasons(rule, ages, relevance.cosine[at], scoring.settings)
        counts = facts.recall_counts[at]
        rows = replace(rows, columns=replace(columns, recall_counts=counts, ages_days=ages))
        ranked = rank_columns(
            rows.columns,
            scoring.now,
            mood_valence=scoring.mood_valence,
            limit=scoring.top_k,
            congruence_on=scoring.congruence_on,
            weights=scoring.weights,
        )

        def part(values: FloatArray | None) -> FloatArray | None:
            return None if values is None else values[at]

        explanation = Explanation(
            distances=relevance.chroma_distances[at],
            ages=ages,
            calendar_ages=calendar,
            reasons=reasons,
            last_recalled=facts.last_recalled[at],
            dense=part(relevance.dense),
            bm25=part(relevance.bm25),
            lexical=part(relevance.lexical),
            fused=part(relevance.fused),
            topic=part(relevance.topic),
            closest=part(relevance.closest),
            share=part(relevance.share),
            scale=scales,
            changes=changes,
            plan=None if rule is None else rule.kind,
            weights=_rule_weights(rule, scoring.settings),
        )
        chosen = len(ranked.order)
        kth = float(ranked.scores.score[ranked.order[-1]]) if chosen >= scoring.top_k else -np.inf
        return RankedPrefix((rows, ranked, explanation), chosen, kth)


def _rule_weights(rule: QueryPlan | None, settings: RecallSettings) -> dict[str, float]:
    """The weights a plan's relevance was made with, by the part they weigh (a lexical weight
    of 0 where no lexical search ran: ``_Relevance.share`` is None then)."""
    if rule is None:
        return {}
    if rule.kind == "state":
        return {
            "cosine": 1.0 - settings.state_lexical_weight,
            "words_matched": settings.state_lexical_weight,
            "closest": settings.feedback_weight,
            "topic": settings.topic_weight,
            "change_gain": settings.change_gain,
            "cue_words": settings.state_cue_words,
        }
    return {"lexical": settings.lexical_weight, "dense": 1.0 - settings.lexical_weight}


def _ages(
    rule: QueryPlan | None,
    epochs: FloatArray,
    now: datetime,
    newest_epoch: float | None,
    settings: RecallSettings,
) -> FloatArray:
    """The age each memory is scored at: its rule's, or (the dense ranking) the calendar's."""
    if rule is None:
        calendar: FloatArray = np.maximum(0.0, (now.timestamp() - epochs) / SECONDS_PER_DAY)
        return calendar
    return rule_ages(rule, epochs, now, newest_epoch, settings)


def _reads_every_row(rule: QueryPlan | None) -> bool:
    """Whether ``rule`` reads every dense candidate's index row before ranking: a planned
    rule that ages memories by their dates (period, former, state), not the event rule (rows
    read as the ranking reaches them) nor the dense ranking (its own small pool)."""
    return rule is not None and ages_by_date(rule)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _with_similarity(relevance: _Relevance, similarity: FloatArray) -> _Relevance:
    """``relevance`` with another similarity, and the kernel distances that carry it."""
    return replace(relevance, similarity=similarity, distances=2.0 * (1.0 - similarity))


def _relevance(pool: QueryPool, rule: QueryPlan | None, settings: RecallSettings) -> _Relevance:
    """The pool's relevance under its rule, and the kernel distances that carry it."""
    cosine = 1.0 - pool.distances
    if rule is None:  # the dense ranking: Chroma's distance as is
        return _Relevance(1.0 - pool.distances / 2.0, pool.distances, pool.distances, cosine)
    if rule.kind == "state":  # the cosine and the share of the query matched (``_rank_pool``
        # adds feedback, the topic term and the change gain)
        share = pool.lexical_share() if pool.searched else None
        weight = settings.state_lexical_weight
        similarity = (1.0 - weight) * np.clip(cosine, 0.0, 1.0)
        if share is not None:
            similarity = similarity + weight * share
        return _Relevance(
            similarity,
            2.0 * (1.0 - similarity),
            pool.distances,
            cosine,
            bm25=pool.bm25 if pool.searched else None,
            share=share,
        )
    parts = fuse(pool.lexical_share(), cosine, settings.lexical_weight)
    return _Relevance(
        parts.fused,
        2.0 * (1.0 - parts.fused),
        pool.distances,
        cosine,
        dense=parts.dense,
        bm25=pool.bm25 if pool.searched else None,
        lexical=parts.lexical if pool.searched else None,
        fused=parts.fused,
    )
