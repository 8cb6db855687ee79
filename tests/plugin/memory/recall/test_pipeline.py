"""Recall's read path end to end: a current-state question prefers the memory that reports a
change, the one about the same part of life and the one that resembles the question's closest
memory, and says so in the hit's time rule; an event question reads only the index rows its
ranking reaches, and a question whose rule reads every row takes the shallower dense pool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.memory.index.memory_index import MemoryIndex
from affect_memory.memory.recall.life_topics import TopicSpace
from affect_memory.memory.recall.pipeline import HybridRecall
from affect_memory.memory.recall.plan import default_analyser
from affect_memory.memory.recall.pool import PooledSearch, Rehearsal
from affect_memory.memory.results import RECALL_MANY_TOLERANCE, RecallHit
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, RecallSettings
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.contracts.recall_schema import state_similarity_of
from tests.plugin.memory.index.consistency.checks import chroma_embeddings

NOW = "2026-06-01T12:00:00Z"
CORPORA = Path(__file__).resolve().parents[4] / "fixtures" / "stale_current"


def _ranked(memory: ChromaMemory, settings: RecallSettings = DEFAULT_RECALL_SETTINGS) -> list[str]:
    hits = memory.recall(
        "What instrument do I play?", "ann", now=NOW, top_k=2, settings=settings
    ).results
    return [hit.id for hit in hits]


def test_a_state_question_prefers_the_update_that_reports_a_change(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([
            {"id": "band", "text": "I play the guitar in a local band.", "user_id": "ann",
             "timestamp": "2026-04-01T09:00:00Z"},
            {"id": "piano", "text": "I stopped the guitar and now play the piano at home.",
             "user_id": "ann", "timestamp": "2026-05-10T09:00:00Z"},
        ])  # fmt: skip
        # The old fact is closer to the question and only 39 days older than its update.
        assert _ranked(memory) == ["piano", "band"]
        top = memory.recall("What instrument do I play?", "ann", now=NOW, top_k=1).results[0]
        parts = top.relevance
        assert parts is not None and parts.topic is not None and parts.closest is not None
        assert parts.change == "stopped" and parts.weights["change_gain"] == pytest.approx(0.2)
        assert top.similarity == pytest.approx(state_similarity_of(parts.to_json()))
        assert "reports a change: 'stopped'" in top.time_rule
        no_gain = RecallSettings(change_gain=0.0)
        assert _ranked(memory, no_gain) == ["band", "piano"]  # without the gain the old fact wins


JOBS = [
    {"id": "cashier", "text": "I work as a cashier at the supermarket on Elm Street.",
     "timestamp": "2025-10-01T09:00:00Z"},
    {"id": "chef", "text": "They took me on as a trainee chef in the hotel kitchen.",
     "timestamp": "2026-05-20T09:00:00Z"},
    {"id": "rain", "text": "Rain all weekend, so I stayed in and watched old films.",
     "timestamp": "2026-05-30T09:00:00Z"},
    {"id": "cousin", "text": "My cousin is coming to visit next week.",
     "timestamp": "2026-05-29T09:00:00Z"},
    {"id": "course", "text": "I'm doing an online course in the evenings.",
     "timestamp": "2026-05-28T09:00:00Z"},
]  # fmt: skip
"""An old job, its update sharing no word with the question, and newer small talk."""


def test_a_state_question_prefers_the_memory_about_the_same_part_of_life(
    tmp_path: Path, embedder: Embedder
) -> None:
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([{**record, "user_id": "ann"} for record in JOBS])

        def ranked(settings: RecallSettings = DEFAULT_RECALL_SETTINGS) -> list[str]:
            result = memory.recall(
                "What do I do for a living?", "ann", now=NOW, top_k=3, settings=settings
            )
            return [hit.id for hit in result.results]

        first = ranked()
        assert first[0] == "chef"
        # each hit's topic is its agreement with the query, computed here from Chroma's rows
        space = TopicSpace.of(embedder)
        query = memory.query_vectors(["What do I do for a living?"], "ann", now=NOW)[0]
        result = memory.recall("What do I do for a living?", "ann", now=NOW, top_k=5)
        vectors = chroma_embeddings(memory, "ann")
        for hit in result.results:
            (expected,), _ = space.agreement(
                query, np.asarray([vectors[hit.id]]), DEFAULT_RECALL_SETTINGS.topic_temperature
            )
            assert hit.relevance is not None and hit.relevance.topic is not None
            assert hit.relevance.topic == pytest.approx(expected, abs=1e-5), hit.id
        hit = memory.recall("What do I do for a living?", "ann", now=NOW, top_k=1).results[0]
        assert hit.relevance is not None and hit.relevance.topic is not None
        assert hit.relevance.topic > 0.3 and "topic agreement" in hit.time_rule
        assert "on 'work'" in hit.time_rule
        # an event question has no topic term
        other = memory.recall("Who visited me?", "ann", now=NOW, top_k=1).results[0]
        assert other.relevance is not None and other.relevance.topic is None
        # by the cosine alone, unrelated small talk wins
        assert ranked(RecallSettings(topic_weight=0.0))[0] == "course"


def test_a_state_question_prefers_the_memory_that_resembles_its_closest_one(
    tmp_path: Path, embedder: Embedder
) -> None:
    """One user of a stale-versus-current set: her new job shares little with the question,
    but resembles the old job, the question's closest memory. The words-matched part is off
    here, so the feedback is seen alone: with it, "the AC is working overtime" matches
    "working" and comes first."""
    lines = (CORPORA / "v" / "memories.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if '"user_id": "ngozi"' in line]
    question = "Where am I working right now?"
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(records)

        no_words = RecallSettings(state_lexical_weight=0.0)

        def ranked(settings: RecallSettings = no_words) -> list[RecallHit]:
            found = memory.recall(question, "ngozi", now=NOW, top_k=30, settings=settings)
            return list(found.results)

        hits = ranked()
        assert hits[0].id == "ngozi-job-new"
        # each hit's closest is its cosine with the query's closest memory, from Chroma's rows
        vectors = {ident: np.asarray(v, dtype=np.float64) for ident, v in
                   chroma_embeddings(memory, "ngozi").items()}  # fmt: skip
        closest = max(hits, key=lambda hit: hit.relevance.cosine if hit.relevance else -1.0)
        assert closest.id == "ngozi-job-old"
        anchor = vectors[closest.id] / np.linalg.norm(vectors[closest.id])
        for hit in hits:
            assert hit.relevance is not None and hit.relevance.closest is not None
            own = vectors[hit.id] / np.linalg.norm(vectors[hit.id])
            expected = hit.relevance.cosine if hit.id == closest.id else float(own @ anchor)
            assert hit.relevance.closest == pytest.approx(expected, abs=1e-5), hit.id
        assert "with the closest memory" in hits[0].time_rule
        # without it the stale job wins
        without = RecallSettings(state_lexical_weight=0.0, feedback_weight=0.0)
        assert ranked(without)[0].id == "ngozi-job-old"


@pytest.mark.parametrize("query", ["bees", "Do I keep bees?", "What did I keep on the roof?"])
def test_a_lone_memory_that_matches_well_scores_high_on_an_absolute_scale(
    query: str, tmp_path: Path, embedder: Embedder
) -> None:
    """Relevance is anchored to the cosine and the share of the query matched, not scaled over
    the pool, so a store's only memory is not scored 0 for being its pool's minimum."""
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([{"id": "bees", "text": "I keep bees on the roof", "user_id": "ann",
                     "timestamp": "2026-05-31T12:00:00Z"}])  # fmt: skip
        (hit,) = memory.recall(query, "ann", now=NOW, top_k=3).results
        assert hit.score >= 0.5, hit.time_rule
        assert hit.similarity >= 0.5 and hit.recency == pytest.approx(1.0)


def test_a_question_no_word_of_which_is_stored_is_ranked_by_its_cosine_alone(
    tmp_path: Path, embedder: Embedder
) -> None:
    """No lexical search found a word of "What did I do?" (stop words only), so its
    relevance is the cosine, not 0.4 of it, and the hit says the lexical weight was 0."""
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add([{"id": "alps", "text": "I went hiking in the Alps with my sister.",
                     "user_id": "ann", "timestamp": "2026-05-30T12:00:00Z"}])  # fmt: skip
        (hit,) = memory.recall("What did I do?", "ann", now=NOW, top_k=1).results
        assert hit.plan == "event" and hit.relevance is not None
        assert hit.similarity == pytest.approx(max(0.0, hit.relevance.cosine))
        assert hit.relevance.weights == {"lexical": 0.0, "dense": 1.0}
        assert (hit.relevance.bm25, hit.relevance.lexical) == (None, None)


class _Reads:
    """The memory's index, counting the rows ranking reads by id; with ``every_row``, each
    dense candidate's row is read with the lexical search, as every rule but the event rule
    reads them."""

    def __init__(self, index: MemoryIndex, *, every_row: bool) -> None:
        self._index = index
        self._every_row = every_row
        self.rows_read = 0

    def pool_search(self, *args: Any, **kwargs: Any) -> PooledSearch:
        if self._every_row:
            kwargs["candidate_rows"] = True
        return self._index.pool_search(*args, **kwargs)

    def rehearsal(self, user_id: str, ids: Sequence[str], **kwargs: Any) -> Rehearsal:
        self.rows_read += len(ids)
        return self._index.rehearsal(user_id, ids, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)


EVENT_QUESTIONS = (
    "What did I do last weekend?",
    "Where did the user go on holiday?",
    "ngozi cooked dinner",
    "Which film did I watch with my cousin?",
    "What did I eat?",
    "Who did the user meet?",
    "What happened at work?",
    "bought a bike",
    "What did Haruto say about his sister?",
    "Where did I travel?",
)


@pytest.mark.parametrize("weighed", [False, True])
def test_an_event_question_reads_only_the_rows_its_ranking_reaches(
    weighed: bool, tmp_path: Path, embedder: Embedder
) -> None:
    """The event rule ages no memory by its date, so a dense candidate's row is read only when
    the ranking reaches it: the same hits, scores and explanations as reading every row
    first. Some questions are settled by the rows of the first batch; the others read every
    row and bound the pool again, with the default weights and with a recall count that
    weighs (which a bound ignoring an unread member's count would get wrong)."""
    lines = (CORPORA / "v" / "memories.jsonl").read_text().splitlines()
    # often recalled memories: a bound that ignored an unread member's count would leave some
    # of them out once counts weigh
    records = [
        {**json.loads(line), "user_id": "ann", **({"recall_count": 400} if i % 5 == 0 else {})}
        for i, line in enumerate(lines)
    ]
    settings = DEFAULT_RECALL_SETTINGS
    if weighed:
        weights = RetrievalWeights(recall_weight=0.3, recall_cap=1.5)
        settings = settings.model_copy(update={"weights": weights})
    candidates = len(records) - settings.lexical_candidates  # the rows a search cannot bring
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    read: list[int] = []
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(records)
        for question in EVENT_QUESTIONS:
            plan = default_analyser().plan(question, "ann", now)
            assert plan.kind == "event", question
            vectors = memory.query_vectors([question], "ann", now=now)
            found = {}
            for every_row in (False, True):
                reads = _Reads(memory.index, every_row=every_row)
                (ranked,) = HybridRecall(memory._collections, reads).rank(
                    "ann", [question], vectors, plans=[plan], now=now, moods=[0.0], top_k=5,
                    settings=settings,
                )  # fmt: skip
                found[every_row] = ([hit.to_json() for hit in ranked.hits()], reads.rows_read)
            (lazy, lazily_read), (eager, eagerly_read) = found[False], found[True]
            assert lazy == eager and len(lazy) == 5, question
            assert eagerly_read == 0  # every row came with the search
            read.append(lazily_read)
    settled = [count < candidates for count in read]
    assert any(settled) and not all(settled), read  # both ways were taken


POOL_QUESTIONS = {
    "What did I cook for the party?": "event",
    "What did I do last week?": "period",
    "Where did I live before?": "former",
    "Where do I live now?": "state",
}


def test_a_rule_that_reads_every_candidates_row_takes_the_shallower_dense_pool(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A period, former or state question reads each dense candidate's row before ranking, so
    its pool takes at most ``dated_dense_candidates`` of Chroma's nearest; an event question
    (and the dense ranking) takes ``dense_candidates``, and a store no larger than that is
    pooled whole. Asked together, each question's pool and hits are what it gets alone: the
    shallower pool is the deeper one's prefix."""
    lines = (CORPORA / "v" / "memories.jsonl").read_text().splitlines()
    records = [{**json.loads(line), "user_id": "ann"} for line in lines]
    settings = DEFAULT_RECALL_SETTINGS.model_copy(
        update={"dense_candidates": 40, "dated_dense_candidates": 16, "lexical_candidates": 0}
    )
    dense = settings.model_copy(update={"ranking": "dense"})
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    with ChromaMemory(tmp_path / "chroma", embedder=embedder) as memory:
        memory.add(records)
        for question, kind in POOL_QUESTIONS.items():
            assert default_analyser().plan(question, "ann", now).kind == kind, question
            pool = memory.candidates(question, "ann", now=now, settings=settings)
            assert len(pool) == (40 if kind == "event" else 16), question
            assert len(memory.candidates(question, "ann", now=now, settings=dense)) == 40
        alone = [
            memory.recall(question, "ann", now=now, top_k=10, settings=settings).results
            for question in POOL_QUESTIONS
        ]
        together = memory.recall_many(
            [{"query": question, "user_id": "ann"} for question in POOL_QUESTIONS],
            now=now,
            top_k=10,
            settings=settings,
        )
        for one, batched in zip(alone, together, strict=True):
            # a batch embeds a query in the last bits differently (RECALL_MANY_TOLERANCE)
            assert [hit.id for hit in batched.results] == [hit.id for hit in one]
            assert [hit.score for hit in batched.results] == pytest.approx(
                [hit.score for hit in one], abs=RECALL_MANY_TOLERANCE
            )
        # the same depth for every rule is a settings change: the dated questions widen
        level = settings.model_copy(update={"dated_dense_candidates": 40})
        assert len(memory.candidates("Where do I live now?", "ann", now=now, settings=level)) == 40
        # a store the deeper pool holds whole is pooled whole under every rule
        whole = settings.model_copy(update={"dense_candidates": len(records)})
        for question in POOL_QUESTIONS:
            found = memory.candidates(question, "ann", now=now, settings=whole)
            assert len(found) == len(records), question
