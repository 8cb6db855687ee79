"""The behaviour every ``ChromaMemory`` location must show; subclass and provide ``make_memory``.

Run against an embedded path, the in-process store and a ``chroma run`` server, always with
the real all-MiniLM-L6-v2 model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.cli.demo import SAMPLE_MEMORIES
from affect_memory.errors import (
    IsolationError,
    LegacyLayoutError,
    RecordError,
    StoreError,
    TimestampError,
    WrongSpaceError,
)
from affect_memory.kernel import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    AffectEngine,
    AffectState,
    EngineRetrieval,
    GateResult,
    InvalidInputError,
    MemoryCandidate,
    RetrievalWeights,
    rank_candidates,
)
from affect_memory.kernel.adapters import InMemoryStateStore, ScriptedModel
from affect_memory.kernel.protocols import MemoryRetriever, RetrievalInput
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.recall.change_cues import change_word
from affect_memory.memory.records import MemoryRecord
from affect_memory.memory.results import MAX_CANDIDATES, MAX_TOP_K, WriteReport
from affect_memory.memory.settings import DENSE_RECALL, RECALL_WEIGHTS, RecallSettings
from affect_memory.memory.store import ChromaMemory
from tests.contracts.recall_agreement import assert_recall_agrees
from tests.contracts.recall_schema import RECALL_RESULT_KEYS, state_similarity_of

MemoryFactory = Callable[..., ChromaMemory]

REFERENCE = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
"""The reference date of ``fixtures/sample_memories.jsonl``."""

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def record(ident: str, text: str, user: str = "ann", days: float = 1.0, **fields: Any) -> dict:
    """A record dict ``days`` before the reference date."""
    stamp = (REFERENCE - timedelta(days=days)).isoformat()
    return {"id": ident, "text": text, "user_id": user, "timestamp": stamp, **fields}


def sample_records() -> list[dict[str, Any]]:
    """The sample corpus."""
    lines = SAMPLE_MEMORIES.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def sample_probes() -> list[dict[str, str]]:
    """The stale-versus-current probes of the sample corpus."""
    lines = (FIXTURES / "sample_memories.probes.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def raw_client(memory: ChromaMemory) -> Any:
    """A Chroma client of the same store, to forge what another tool might leave there."""
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()  # the memory's own hold keeps the embedded store locked
    return client


def request(query: str, limit: int = 4) -> RetrievalInput:
    """An engine retrieval request at the reference date."""
    return RetrievalInput(query=query, state=AffectState(), limit=limit, now=REFERENCE)


class MemoryContract:
    """Run against every store location: embedded, in-memory and a Chroma server."""

    @pytest.fixture
    def make_memory(self) -> MemoryFactory:
        """A factory of memories on a fresh, empty collection (kwargs go to ChromaMemory)."""
        raise NotImplementedError

    @pytest.fixture
    def memory(self, make_memory: MemoryFactory) -> ChromaMemory:
        return make_memory()

    # ---------------------------------------------------------------- writes and reads

    def test_a_record_is_read_back_with_every_field_and_a_canonical_timestamp(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(
            [
                record(
                    "m1",
                    "I planted tomatoes on the balcony.",
                    timestamp="2026-05-01T09:30:00+02:00",
                    significance=0.8,
                    episode=True,
                    emotional_valence=-0.25,
                    recall_count=2,
                    agent_id="agent-7",
                    conversation_id="conv-1",
                    last_recalled_at="2026-05-02T00:00:00Z",
                    extra={"source": "chat", "turn": 12, "weight": 0.5, "pinned": True},
                )
            ]
        )
        (stored,) = memory.get(["m1"], user_id="ann")
        assert stored.timestamp == "2026-05-01T07:30:00.000000+00:00"
        assert stored.last_recalled_at == "2026-05-02T00:00:00.000000+00:00"
        assert (stored.significance, stored.episode, stored.emotional_valence) == (0.8, True, -0.25)
        assert (stored.recall_count, stored.agent_id, stored.conversation_id) == (
            2,
            "agent-7",
            "conv-1",
        )
        assert stored.extra == {"source": "chat", "turn": 12, "weight": 0.5, "pinned": True}

    def test_get_keeps_the_requested_order_and_leaves_out_unknown_ids(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record(f"m{i}", f"memory number {i}") for i in range(6)])
        ids = ["m4", "nope", "m0", "m5", "m2"]
        assert [r.id for r in memory.get(ids, user_id="ann")] == ["m4", "m0", "m5", "m2"]

    def test_writes_are_split_under_the_batch_size(self, memory: ChromaMemory) -> None:
        memory._collections.max_batch = 7  # as if the server accepted 7 rows per call
        report = memory.add([record(f"m{i}", f"fact number {i} about gardens") for i in range(23)])
        assert report.written == 23
        assert memory.count() == 23
        assert len(memory.get([f"m{i}" for i in range(23)], user_id="ann")) == 23

    def test_reingesting_the_same_records_changes_nothing(self, memory: ChromaMemory) -> None:
        corpus = sample_records()
        first = memory.add(corpus)
        before = memory.stats().users
        second = memory.add(corpus)
        assert (first.written, second.written, len(second.skipped)) == (40, 0, 40)
        memory.upsert(corpus)
        assert memory.count() == 40
        assert memory.stats().users == before == {"alice": 13, "bob": 14, "carmen": 13}

    def test_add_keeps_a_stored_memory_and_upsert_replaces_it(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I like green tea.")])
        memory.add([record("m1", "I like black coffee.")])
        assert memory.get(["m1"], user_id="ann")[0].text == "I like green tea."
        memory.upsert([record("m1", "I like black coffee.")])
        assert memory.get(["m1"], user_id="ann")[0].text == "I like black coffee."

    # ---------------------------------------------------------------- refusals

    def test_one_bad_record_rejects_the_whole_batch(self, memory: ChromaMemory) -> None:
        batch = [
            record("m0", "fine"),
            record("m1", "fine too"),
            record("m2", "bad", significance=1.5),
        ]
        with pytest.raises(RecordError, match=r"record 2 \(id 'm2'\): significance .*1\.5"):
            memory.add(batch)
        assert memory.count() == 0

    @pytest.mark.parametrize(
        ("bad", "shown"),
        [
            ("2026-05-01T10:00:00", "naive"),
            ("2026-05-01", "naive"),
            ("yesterday", "not an ISO-8601"),
            (float("nan"), "finite"),
            (float("inf"), "finite"),
            (-1.0, "1970-9999"),
            ("1969-12-31T23:59:59Z", "1970-9999"),
            (True, "must be a zoned"),
        ],
    )
    def test_every_bad_timestamp_is_refused_and_nothing_is_written(
        self, memory: ChromaMemory, bad: object, shown: str
    ) -> None:
        batch = [record("m0", "a fine memory"), record("m1", "a bad one", timestamp=bad)]
        with pytest.raises(TimestampError, match=rf"record 1 \(id 'm1'\): timestamp .*{shown}"):
            memory.add(batch)
        with pytest.raises(TimestampError):
            memory.upsert(batch)
        assert memory.count() == 0

    def test_extra_metadata_cannot_claim_another_user(self, memory: ChromaMemory) -> None:
        for hostile in ({"user_id": "bob"}, {"timestamp_epoch": 0.0}, {"chroma:document": "x"}):
            with pytest.raises(RecordError, match="reserved"):
                memory.add([record("m1", "I live in Oslo.", extra=hostile)])
        assert memory.count() == 0

    def test_a_query_without_a_user_scope_is_refused(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I live in Oslo.")])
        with pytest.raises(InvalidInputError, match="user scope"):
            asyncio.run(memory.retrieve(request("where do I live")))
        for nobody in ("", None, 7):
            with pytest.raises(InvalidInputError, match="user_id"):
                memory.recall("where do I live", nobody)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="candidates"):
            memory.recall("where do I live", "ann", candidates=MAX_CANDIDATES + 1)

    # ---------------------------------------------------------------- isolation

    def test_a_user_never_sees_another_users_memories(self, memory: ChromaMemory) -> None:
        users = ["an", "ann", "anna", "ann "]  # prefixes and a trailing space are other users
        memory.add(
            [
                record(f"{user.strip()}-{len(user)}-{topic}", f"I live in {city}.", user=user)
                for user in users
                for topic, city in (("home", "Oslo"), ("work", "Bergen"), ("trip", "Tromsø"))
            ]
        )
        for user in users:
            own = {f"{user.strip()}-{len(user)}-{topic}" for topic in ("home", "work", "trip")}
            result = memory.recall(
                "Where do I live?", user, top_k=MAX_TOP_K, candidates=MAX_CANDIDATES
            )
            assert {hit.id for hit in result.results} == own
            candidates = asyncio.run(memory.retriever_for(user).retrieve(request("Oslo", 64)))
            assert {c.id for c in candidates} == own
            assert memory.count(user) == 3

    def test_hostile_json_cannot_smuggle_a_memory_into_another_scope(
        self, memory: ChromaMemory
    ) -> None:
        with pytest.raises(RecordError):
            memory.add([{**record("m1", "x"), "metadata": {"user_id": "bob"}}])
        with pytest.raises(RecordError, match="user_id"):
            memory.add([{**record("m1", "x"), "user_id": ["ann", "bob"]}])
        assert memory.count() == 0

    # ---------------------------------------------------------------- retrieval

    def test_a_user_without_memories_gets_nothing(self, memory: ChromaMemory) -> None:
        assert memory.recall("anything", "nobody", now=REFERENCE).results == ()
        memory.add([record("m1", "I keep bees.", user="somebody")])
        assert memory.recall("bees", "nobody", now=REFERENCE).results == ()
        assert asyncio.run(memory.retriever_for("nobody").retrieve(request("bees"))) == ()
        assert memory.count("nobody") == 0 and memory.recall_many([], now=REFERENCE) == []

    def test_the_retriever_satisfies_the_kernel_protocol_and_returns_the_requests_best(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record(f"m{i}", f"my note number {i} about the garden") for i in range(80)])
        retriever = memory.retriever_for("ann", candidates=8)
        assert isinstance(retriever, MemoryRetriever)
        assert retriever.ranking_weights == RECALL_WEIGHTS
        four = asyncio.run(retriever.retrieve(request("garden", limit=4)))
        assert len(four) == 4 and all(c.age_days is not None for c in four)
        assert len(asyncio.run(retriever.retrieve(request("garden", limit=20)))) == 20
        assert len(asyncio.run(memory.retrieve(request("garden", 4), user_id="ann"))) == 4
        # At most the engine's 64, whatever the request asks for.
        assert len(asyncio.run(retriever.retrieve(request("garden", limit=500)))) == 64
        best = asyncio.run(memory.retrieve(request("garden", 10), user_id="ann"))
        recalled = memory.recall("garden", "ann", now=REFERENCE, top_k=10)
        assert [c.id for c in best] == [hit.id for hit in recalled.results]

    def test_candidates_carry_canonical_timestamps_and_valid_distances(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        for candidate in memory.candidates("How do I feel?", "carmen", candidates=64):
            assert isinstance(candidate, MemoryCandidate)
            assert 0.0 <= candidate.distance <= 2.0
            assert candidate.timestamp is not None and candidate.timestamp.endswith("+00:00")
            assert datetime.fromisoformat(candidate.timestamp).tzinfo == UTC
            # The lean mapper skipped validation; a full validation must agree with it.
            assert MemoryCandidate.model_validate(candidate.model_dump()) == candidate

    def test_an_exact_match_comes_back_at_distance_zero(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "The blue heron stood in the pond."), record("m2", "Tax forms.")])
        heron = "The blue heron stood in the pond."
        (best, other) = memory.candidates(heron, "ann", settings=DENSE_RECALL)
        assert best.id == "m1" and best.distance == pytest.approx(0.0, abs=1e-5)
        assert best.distance >= 0.0 and other.distance > 0.3

    def test_a_prompt_injection_memory_comes_back_only_as_candidate_text(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        injected = next(r for r in sample_records() if r["id"] == "bob-injection")
        candidates = memory.candidates("system prompt instructions", "bob", candidates=64)
        hit = next(c for c in candidates if c.id == "bob-injection")
        assert hit.text == injected["text"]
        fields = hit.model_dump()
        assert [k for k, v in fields.items() if isinstance(v, str) and "instructions" in v] == [
            "text"
        ]
        assert hit.significance == 0.5 and hit.episode is False

    def test_recall_ranks_with_the_kernel_and_keeps_the_breakdown(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        result = memory.recall("Where do I live?", "alice", now=REFERENCE, top_k=6)
        assert result.now == "2026-06-01T12:00:00.000000+00:00"
        scores = [hit.score for hit in result.results]
        assert scores == sorted(scores, reverse=True) and len(scores) == 6
        for hit in result.results:
            expected = (hit.similarity * hit.recency * hit.salience + hit.episode) * hit.congruence
            assert hit.score == pytest.approx(expected, rel=1e-12)
            assert hit.relevance is not None
            assert hit.relevance.cosine == pytest.approx(1 - hit.distance, abs=1e-12)
            # A current-state question: the similarity is the cosine blended with the
            # resemblance to the closest memory and the share of the query's words matched,
            # plus the weighted topic agreement (times the change gain for a memory that
            # reports a change), each part and weight in the hit; memories age from the
            # user's newest one at a 120-day horizon.
            assert hit.plan == "state"
            assert hit.relevance.change == change_word(hit.text)
            topic, closest = hit.relevance.topic, hit.relevance.closest
            assert topic is not None and 0.0 <= topic <= 1.0 and closest is not None
            assert hit.similarity == pytest.approx(
                state_similarity_of(hit.relevance.to_json()), abs=1e-12
            )
            assert hit.relevance.fused is None and hit.relevance.share is not None
            assert hit.age_days is not None and hit.calendar_age_days is not None
            assert hit.recency == pytest.approx(min(1.0, max(0.1, 1 - hit.age_days / 120)))
            assert hit.time_rule.startswith("current-state query (about the user, no past cue)")
            assert list(hit.to_json()) == list(RECALL_RESULT_KEYS)
        assert result.results[0].id == "alice-home-new"
        (stored,) = memory.get(["alice-home-new"], user_id="alice")
        assert stored.recall_count == 0  # recall is read-only

    def test_recall_ranks_exactly_as_the_kernel_ranks_the_candidates(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        for user, mood, query in (
            ("alice", 0.0, "What happened that made me feel this way?"),
            ("bob", -0.7, "When did I last feel this way?"),
            ("carmen", 0.5, "Where do I live now?"),
            ("carmen", 0.0, "What did I do in May 2026?"),
        ):
            for top_k in (1, 3, 20):
                hits = memory.recall(
                    query, user, mood_valence=mood, now=REFERENCE, top_k=top_k
                ).results
                # The pruned fetch ranks as the whole pool would: rank every member.
                pool = memory.candidates(query, user, mood_valence=mood, now=REFERENCE)
                expected = rank_candidates(
                    pool, REFERENCE, mood, limit=top_k, weights=RECALL_WEIGHTS
                )
                assert [h.id for h in hits] == [e.candidate.id for e in expected]
                for hit, item in zip(hits, expected, strict=True):
                    assert (hit.score, hit.recency, hit.congruence) == (
                        item.score,
                        item.recency,
                        item.congruence,
                    )

    def test_the_dense_recall_ranks_chromas_nearest_by_the_calendar(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        for user, mood in (("alice", 0.0), ("bob", -0.7), ("carmen", 0.5)):
            query = "What happened that made me feel this way?"
            hits = memory.recall(
                query, user, mood_valence=mood, now=REFERENCE, top_k=20, settings=DENSE_RECALL
            ).results
            pool = memory.candidates(
                query, user, mood_valence=mood, now=REFERENCE, settings=DENSE_RECALL
            )
            expected = rank_candidates(pool, REFERENCE, mood, limit=20)
            assert [h.id for h in hits] == [e.candidate.id for e in expected]
            for hit, item in zip(hits, expected, strict=True):
                assert hit.score == pytest.approx(item.score, abs=1e-12)
                assert hit.similarity == pytest.approx(1 - hit.distance / 2, abs=1e-12)
                assert hit.age_days == pytest.approx(hit.calendar_age_days, abs=1e-9)

    def test_a_turn_ranks_the_same_rows_as_recall_bit_for_bit(self, memory: ChromaMemory) -> None:
        # Timestamps with microseconds: ages from epochs and from timedeltas differ in the
        # last bits there, so only one shared ranking path gives equal scores.
        memory.add(sample_records())
        memory.add(
            [
                record(
                    f"frac{i}",
                    f"I moved to city number {i} and I live there now.",
                    user="alice",
                    days=0.123456789 + 0.987654321 * i,
                    significance=0.1 * i,
                )
                for i in range(8)
            ]
        )
        heavy = RetrievalWeights(episode_bonus=0.2, recency_horizon_days=30.0)
        for user, query, weights in (
            ("alice", "Where do I live?", DEFAULT_RETRIEVAL_WEIGHTS),
            ("alice", "Tell me about my home.", heavy),
            ("bob", "What happened that made me feel this way?", DEFAULT_RETRIEVAL_WEIGHTS),
        ):
            recalled = memory.recall(
                query, user, now=REFERENCE, top_k=6, candidates=MAX_CANDIDATES, weights=weights
            )
            engine = AffectEngine(
                model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
                store=InMemoryStateStore(),
                conversation_id="c",
                retriever=memory.retriever_for(user),
                clock=lambda: REFERENCE,
                retrieval=EngineRetrieval(weights=weights),
            )
            turn = asyncio.run(engine.turn(query))
            ranked = [
                (m.candidate.id, m.score, m.similarity, m.recency, m.salience, m.congruence)
                for m in turn.memories
            ]
            hits = [
                (h.id, h.score, h.similarity, h.recency, h.salience, h.congruence)
                for h in recalled.results
            ]
            assert ranked == hits  # exactly: one ranking path
            assert [m.episode_bonus for m in turn.memories] == [h.episode for h in recalled.results]
            assert len(turn.memories) == 6

    def test_an_engine_without_weights_ranks_a_turn_exactly_as_recall(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        for user, query in (
            ("alice", "Where do I live?"),
            ("bob", "What did Bob do in May 2026?"),
            ("carmen", "When did Carmen start running?"),
        ):
            recalled = memory.recall(query, user, now=REFERENCE, top_k=6, mood_valence=0.0)
            engine = AffectEngine(
                model=ScriptedModel(gates=[GateResult(should_retrieve=True)], replies=[["ok"]]),
                store=InMemoryStateStore(),
                conversation_id="c",
                retriever=memory.retriever_for(user),
                clock=lambda: REFERENCE,
            )
            assert engine.weights == RECALL_WEIGHTS  # the retriever's, not the kernel's
            turn = asyncio.run(engine.turn(query))
            assert [(m.candidate.id, m.score, m.recency) for m in turn.memories] == [
                (h.id, h.score, h.recency) for h in recalled.results
            ]
            assert [m.candidate.age_days for m in turn.memories] == [
                h.age_days for h in recalled.results
            ]

    def test_top_k_above_the_pool_size_widens_the_dense_search(self, memory: ChromaMemory) -> None:
        memory.add([record(f"m{i}", f"I wrote note {i} about tea.") for i in range(30)])
        dense_only = RecallSettings(lexical_candidates=0)  # the pool is the dense search alone
        wide = memory.recall(
            "tea", "ann", now=REFERENCE, top_k=20, candidates=5, settings=dense_only
        )
        assert len(wide.results) == 20  # not 5: the dense search fetched top_k
        narrow = memory.recall("tea", "ann", now=REFERENCE, top_k=3, candidates=5)
        assert len(narrow.results) == 3

    def test_mood_congruence_reaches_the_ranking(self, memory: ChromaMemory) -> None:
        memory.add(
            [
                record("sad", "I remember that evening by the sea.", emotional_valence=-0.8),
                record("happy", "I remember that evening by the sea!", emotional_valence=0.8),
            ]
        )
        low = memory.recall("that evening by the sea", "ann", mood_valence=-0.6, now=REFERENCE)
        by_id = {hit.id: hit for hit in low.results}
        assert by_id["sad"].congruence == 1.06 and by_id["happy"].congruence == 1.0

    def test_reranking_puts_current_facts_above_stale_ones_far_more_often(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        owners = {r["id"]: r["user_id"] for r in sample_records()}
        probes = sample_probes()
        ranked = memory.recall_many(
            [{"query": p["query"], "user_id": p["user_id"]} for p in probes],
            now=REFERENCE,
            top_k=MAX_TOP_K,
            candidates=MAX_CANDIDATES,
        )
        reranked: dict[str, int] = {}
        plain: dict[str, int] = {}
        foreign = 0
        for probe, result in zip(probes, ranked, strict=True):
            user = probe["user_id"]
            order = [hit.id for hit in result.results]
            # Every row of the user came back (at most 14 < 64), so Chroma's order is the
            # same rows sorted by distance.
            assert len(order) == sum(owner == user for owner in owners.values())
            by_distance = sorted(result.results, key=lambda hit: (hit.distance, hit.id))
            distance_order = [hit.id for hit in by_distance]
            foreign += sum(owners[i] != user for i in order)
            reranked[user] = reranked.get(user, 0) + (
                order.index(probe["current"]) < order.index(probe["stale"])
            )
            plain[user] = plain.get(user, 0) + (
                distance_order.index(probe["current"]) < distance_order.index(probe["stale"])
            )
        assert foreign == 0
        # Measured: reranked 30 of 30, plain distance 7 (alice 1, bob 1, carmen 5 of 10 each).
        assert sum(reranked.values()) == 30 and sum(plain.values()) <= 12
        for user in ("alice", "bob", "carmen"):
            assert reranked[user] == 10 and reranked[user] > plain[user]

    # ---------------------------------------------------------------- forget, count, stats

    def test_forget_removes_only_what_it_may(self, memory: ChromaMemory) -> None:
        memory.add([record("a1", "mine", user="ann"), record("b1", "theirs", user="bob")])
        assert memory.forget(["b1", "zz"], user_id="ann") == ()
        assert memory.forget(["a1", "zz", "a1"], user_id="ann") == ("a1",)
        assert memory.count() == 1 and memory.count("ann") == 0 and memory.count("bob") == 1
        stats = memory.stats()
        assert (stats.space, stats.count, stats.users) == ("cosine", 1, {"bob": 1})
        assert stats.hnsw == {"ef_construction": 200, "ef_search": 500, "max_neighbors": 32}

    # ---------------------------------------------------------------- turn writes

    def test_turn_writes_apply_exactly_once_per_turn(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I live in Oslo."), record("m2", "I work in Bergen.")])
        message = record("turn-1:user", "I moved again!", days=0, emotional_valence=0.4)
        first = memory.apply_turn_writes(
            "turn-1",
            user_id="ann",
            recalled_ids=["m1", "m2", "gone"],
            recalled_at=REFERENCE,
            new_record=message,
        )
        assert (first.incremented, first.missing, first.stored_new) == (
            ("m1", "m2"),
            ("gone",),
            True,
        )
        again = memory.apply_turn_writes(
            "turn-1",
            user_id="ann",
            recalled_ids=["m1", "m2"],
            recalled_at=REFERENCE,
            new_record=message,
        )
        assert (again.incremented, again.already_applied, again.stored_new) == (
            (),
            ("m1", "m2"),
            False,
        )
        later = REFERENCE + timedelta(hours=1)
        memory.apply_turn_writes(
            "turn-2", user_id="ann", recalled_ids=["m1", "turn-1:user"], recalled_at=later
        )
        # A late replay of turn 1 neither re-counts m1 nor resets the message's own count.
        memory.apply_turn_writes(
            "turn-1",
            user_id="ann",
            recalled_ids=["m1", "m2"],
            recalled_at=REFERENCE,
            new_record=message,
        )
        m1, m2, said = memory.get(["m1", "m2", "turn-1:user"], user_id="ann")
        assert (m1.recall_count, m2.recall_count, said.recall_count) == (2, 1, 1)
        assert m1.last_recalled_at == "2026-06-01T13:00:00.000000+00:00"
        assert m2.last_recalled_at == "2026-06-01T12:00:00.000000+00:00"
        assert said.user_id == "ann" and said.emotional_valence == 0.4
        assert memory.count() == 3

    def test_turn_writes_validate_before_writing(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I live in Oslo.")])
        with pytest.raises(TimestampError, match="new_record 0"):
            memory.apply_turn_writes(
                "t",
                user_id="ann",
                recalled_ids=["m1"],
                recalled_at=REFERENCE,
                new_record=record("t:user", "hi", timestamp="2026-06-01T12:00:00"),
            )
        with pytest.raises(TimestampError, match="recalled_at"):
            memory.apply_turn_writes(
                "t", user_id="ann", recalled_ids=["m1"], recalled_at="2026-06-01"
            )
        with pytest.raises(InvalidInputError, match="recalled_at is required"):
            memory.apply_turn_writes("t", user_id="ann", recalled_ids=["m1"])
        assert memory.get(["m1"], user_id="ann")[0].recall_count == 0 and memory.count() == 1

    # ---------------------------------------------------------------- ids are per user (4.1)

    def test_the_same_id_under_two_users_is_two_memories(self, memory: ChromaMemory) -> None:
        tea, bike, train = "I drink green tea every morning.", "I ride my bike.", "I take trains."
        memory.add([record("m1", tea, user="ann")])
        # Before per-user collections: skipped as "already stored" (written 0, skipped m1).
        assert memory.add([record("m1", bike, user="bob")]) == WriteReport(written=1)
        assert [r.text for r in memory.get(["m1"], user_id="ann")] == [tea]
        assert [r.text for r in memory.get(["m1"], user_id="bob")] == [bike]
        # Before: upsert replaced ann's memory and moved it to bob.
        memory.upsert([record("m1", train, user="bob", significance=0.9)])
        (ann,) = memory.get(["m1"], user_id="ann")
        assert (ann.text, ann.user_id, ann.significance) == (tea, "ann", 0.5)
        assert memory.get(["m1"], user_id="bob")[0].text == train
        # One batch may carry the same id for two users, not twice for one.
        both = [record("m2", "ann's second", user="ann"), record("m2", "bob's second", user="bob")]
        assert memory.add(both).written == 2
        with pytest.raises(RecordError, match="repeats record 0"):
            memory.add([record("m3", "x", user="ann"), record("m3", "y", user="ann")])
        assert (memory.count(), memory.count("ann"), memory.count("bob")) == (4, 2, 2)
        ann_hits = memory.recall("What do I drink?", "ann", now=REFERENCE).results
        assert {hit.id: hit.text for hit in ann_hits}["m1"] == tea
        bob_pool = {c.id: c.text for c in memory.candidates("How do I travel?", "bob")}
        assert bob_pool == {"m1": train, "m2": "bob's second"}
        # Before: a turn of bob's incremented whichever m1 Chroma held.
        memory.apply_turn_writes("t1", user_id="bob", recalled_ids=["m1"], recalled_at=REFERENCE)
        assert memory.get(["m1"], user_id="ann")[0].recall_count == 0
        assert memory.get(["m1"], user_id="bob")[0].recall_count == 1
        # Before: forget without a user deleted any user's m1.
        assert memory.forget(["m1"], user_id="ann") == ("m1",)
        assert memory.get(["m1"], user_id="ann") == ()
        assert memory.get(["m1"], user_id="bob")[0].text == train
        assert memory.stats().users == {"ann": 1, "bob": 2}

    def test_every_read_write_and_delete_names_one_user(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I live in Oslo.")])
        with pytest.raises(TypeError, match="user_id"):
            memory.forget(["m1"])  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="user_id"):
            memory.get(["m1"])  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="user_id"):
            memory.apply_turn_writes("t", recalled_ids=["m1"], recalled_at=REFERENCE)  # type: ignore[call-arg]
        for nobody in (None, "", 7, "a\x00b", "\ud800"):
            with pytest.raises(InvalidInputError, match="user_id"):
                memory.forget(["m1"], user_id=nobody)  # type: ignore[arg-type]
            with pytest.raises(InvalidInputError, match="user_id"):
                memory.get(["m1"], user_id=nobody)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="belongs to user 'bob'"):
            memory.apply_turn_writes("t", user_id="ann", new_record=record("t:m", "hi", user="bob"))
        assert memory.count() == 1 and memory.get(["m1"], user_id="ann")[0].recall_count == 0

    def test_every_kind_of_user_id_gets_a_collection_of_its_own(self, memory: ChromaMemory) -> None:
        users = [
            "ann", "Ann", "ann ", "ann.", "a", "1.2.3.4", "..", "-", "$and", "a/b\\c:d",
            "ünï cödé", "用户", "😀", "x" * 512, "x" * 511 + "y",
        ]  # fmt: skip
        memory.add(
            [record("same-id", f"note of user number {i}", user=u) for i, u in enumerate(users)]
        )
        names = {memory.collection_for(user) for user in users}
        assert len(names) == len(users)
        for name in names:
            assert 3 <= len(name) <= 512 and ".." not in name and name.isascii()
        assert memory.stats().users == dict.fromkeys(sorted(users), 1)
        for index, user in enumerate(users):
            (hit,) = memory.recall("note", user, now=REFERENCE).results
            assert (hit.id, hit.text) == ("same-id", f"note of user number {index}")

    def test_a_collection_recorded_for_another_user_is_never_used(
        self, memory: ChromaMemory
    ) -> None:
        memory.add([record("m1", "I live in Oslo.", user="mallory")])
        forged = raw_client(memory).get_collection(memory.collection_for("mallory"))
        # A collection under eve's name whose own record says it holds mallory's memories.
        raw_client(memory).create_collection(
            memory.collection_for("eve"),
            metadata=dict(forged.metadata),
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )
        for attempt in (
            lambda: memory.recall("Where do I live?", "eve"),
            lambda: memory.add([record("m2", "I am eve.", user="eve")]),
            lambda: memory.forget(["m1"], user_id="eve"),
            lambda: memory.stats(),
        ):
            with pytest.raises(IsolationError, match="records user 'mallory'"):
                attempt()
        assert memory.get(["m1"], user_id="mallory")[0].text == "I live in Oslo."

    def test_a_user_collection_in_another_space_is_refused(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I live in Oslo.", user="ann")])
        template = raw_client(memory).get_collection(memory.collection_for("ann")).metadata
        raw_client(memory).create_collection(
            memory.collection_for("bob"),
            metadata={**template, "affect_memory_user": "bob"},
            embedding_function=None,
        )  # Chroma's default space, l2
        with pytest.raises(WrongSpaceError, match="'l2' distance space"):
            memory.recall("Where do I live?", "bob")
        assert memory.recall("Where do I live?", "ann").results[0].id == "m1"

    def test_a_store_in_the_old_shared_layout_is_refused_naming_migrate(
        self, memory: ChromaMemory, make_memory: MemoryFactory
    ) -> None:
        shared = raw_client(memory).create_collection(
            memory.collection_name,
            configuration={"hnsw": {"space": "cosine"}},
            embedding_function=None,
        )
        shared.add(
            ids=["m1"],
            embeddings=[[1.0] + [0.0] * 383],
            documents=["I live in Oslo."],
            metadatas=[{"user_id": "ann", "timestamp": "2026-05-01T00:00:00.000000+00:00"}],
        )
        with pytest.raises(LegacyLayoutError) as raised:
            make_memory()
        message = str(raised.value)
        assert "`affect-memory migrate" in message and "\n" not in message
        assert f"one collection {memory.collection_name!r}" in message

    # ---------------------------------------------------------------- batches are whole (4.3)

    @pytest.mark.parametrize(
        ("bad", "message"),
        [
            ({"extra": {"$and": 1}}, r"extra key '\$and' starts with '\$'"),
            ({"extra": {"$or": 1}}, r"extra key '\$or' starts with '\$'"),
            ({"extra": {"#document": "x"}}, "extra key '#document' starts with '#'"),
            ({"extra": {"#embedding": 1}}, "extra key '#embedding' starts with '#'"),
            ({"extra": {"note": "\ud800"}}, "lone surrogate"),
            ({"extra": {"\ud800": 1}}, "lone surrogate"),
            ({"text": "tea \ud800"}, "lone surrogate"),
            ({"id": "m\ud800"}, "lone surrogate"),
            ({"id": "m\x00550"}, "NUL"),
            ({"extra": {"k" * 65: 1}}, "1-64 character strings"),
            ({"extra": {f"k{i}": i for i in range(33)}}, "at most 32 keys"),
            ({"extra": {"note": "x" * 4097}}, "at most 4,096 characters"),
            ({"recall_count": 2**63}, "recall_count must be at most"),
        ],
    )
    def test_a_600_record_batch_with_one_bad_record_stores_nothing(
        self, memory: ChromaMemory, bad: dict[str, Any], message: str
    ) -> None:
        batch = [record(f"m{i}", f"note {i} about the garden") for i in range(600)]
        batch[550] = {**batch[550], **bad}
        # Before: Chroma refused the second 512-record chunk after the first was stored.
        with pytest.raises(RecordError, match=rf"record 550 .*{message}"):
            memory.add(batch)
        with pytest.raises(RecordError, match=rf"record 550 .*{message}"):
            memory.upsert(batch)
        assert memory.count() == 0

    def test_a_write_chroma_refuses_part_way_takes_back_what_it_stored(
        self, memory: ChromaMemory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Chunks of 32 instead of WRITE_CHUNK's 512: the same chunk-by-chunk write and undo,
        # with a sixteenth of the embedding (the sizes were 600 records, the 551st refused).
        monkeypatch.setattr("affect_memory.memory.chroma.writes.WRITE_CHUNK", 32)
        size, refused = 38, 35
        old = [record(f"m{i}", f"old note {i} about the garden") for i in range(0, size, 2)]
        memory.add(old)
        batch: list[Any] = [record(f"m{i}", f"new note {i} about the sea") for i in range(size)]
        # A new record Chroma refuses that got past validation (model_construct skips it):
        # the write fails in its second 32-record chunk, after the first was stored.
        batch[refused] = MemoryRecord.model_construct(
            **{**MemoryRecord.model_validate(batch[refused]).__dict__, "extra": {"$and": 1}}
        )
        with pytest.raises(StoreError, match="nothing of this add was kept"):
            memory.add(batch)
        assert memory.count() == len(old)
        with pytest.raises(StoreError, match="nothing of this upsert was kept"):
            memory.upsert(batch)
        assert memory.count() == len(old)
        kept = memory.get([f"m{i}" for i in range(size)], user_id="ann")
        assert [r.text for r in kept] == [
            f"old note {i} about the garden" for i in range(0, size, 2)
        ]
        (hit,) = memory.candidates(
            "old note 0 about the garden", "ann", candidates=1, settings=DENSE_RECALL
        )
        assert hit.id == "m0" and hit.distance == pytest.approx(0.0, abs=1e-5)

    def test_a_batch_error_lists_every_problem_up_to_twenty(self, memory: ChromaMemory) -> None:
        batch = [record(f"m{i}", "fine", significance=2.0 if i % 2 else 0.5) for i in range(60)]
        with pytest.raises(RecordError) as raised:
            memory.add(batch)
        message = str(raised.value)
        named = [
            f"record {i} (id 'm{i}'): significance must be within [0, 1], got 2.0"
            for i in range(1, 40, 2)
        ]
        assert message == "; ".join(named) + "; and 10 more (30 problems)"
        with pytest.raises(
            RecordError, match=r"got one dict; pass a list \(e\.g\. add\(\[record\]\)\)"
        ):
            memory.add(record("m1", "fine"))  # type: ignore[arg-type]
        assert memory.count() == 0

    # ---------------------------------------------------------------- stored rows (4.4)

    def test_recall_count_is_bounded_to_what_reads_back(self, memory: ChromaMemory) -> None:
        with pytest.raises(
            RecordError, match=r"recall_count must be at most 9,007,199,254,740,991"
        ):
            memory.add([record("m1", "I keep bees.", recall_count=2**53)])
        memory.add([record("m1", "I keep bees.", recall_count=2**53 - 1)])
        assert memory.get(["m1"], user_id="ann")[0].recall_count == 2**53 - 1
        memory.apply_turn_writes("t", user_id="ann", recalled_ids=["m1"], recalled_at=REFERENCE)
        (stored,) = memory.get(["m1"], user_id="ann")
        assert type(stored.recall_count) is int and stored.recall_count == 2**53 - 1
        assert memory.recall("bees", "ann").results[0].recall_count == 2**53 - 1

    def test_a_malformed_stored_row_is_skipped_and_named(
        self, memory: ChromaMemory, caplog: pytest.LogCaptureFixture
    ) -> None:
        memory.add([record("good", "I keep bees on the roof.")])
        # Another tool writes two rows into ann's collection behind the memory's index (which
        # holds only rows it has checked, so recall reads these from Chroma).
        raw = raw_client(memory).get_collection(memory.collection_for("ann"))
        good = raw.get(ids=["good"], include=["metadatas", "embeddings"])
        meta = good["metadatas"][0]
        raw.add(
            ids=["huge", "odd"],
            documents=["I keep bees in the garden.", "I keep bees at my aunt's."],
            metadatas=[
                {**meta, "recall_count": 2**63},  # read back as a float
                {**meta, "significance": "high"},
            ],
            embeddings=np.asarray([good["embeddings"][0]] * 2, dtype=np.float32),
        )
        with caplog.at_level("WARNING", logger="affect_memory.memory.store"):
            result = memory.recall("Where are my bees?", "ann", now=REFERENCE)
        # Before: every recall of ann's raised StoreError without naming the row.
        assert [hit.id for hit in result.results] == ["good"]
        assert sorted(result.skipped) == ["huge", "odd"]
        assert result.to_json()["skipped"] == list(result.skipped)
        assert "'huge'" in caplog.text and "recall_count" in caplog.text and "'odd'" in caplog.text
        assert [c.id for c in memory.candidates("bees", "ann")] == ["good"]
        turn = memory.apply_turn_writes(
            "t", user_id="ann", recalled_ids=["good", "huge"], recalled_at=REFERENCE
        )
        # The index keeps the counts, so a count another tool broke in Chroma blocks nothing.
        assert (turn.incremented, turn.skipped) == (("good", "huge"), ())
        assert [r.id for r in memory.get(["good", "huge", "odd"], user_id="ann")] == ["good"]

    # ---------------------------------------------------------------- batch recall (1)

    def test_recall_many_agrees_with_recall_within_the_documented_tolerance(
        self, memory: ChromaMemory
    ) -> None:
        memory.add(sample_records())
        queries = [
            {"query": p["query"], "user_id": p["user_id"], "mood_valence": mood}
            for p in sample_probes()
            for mood in (0.0, -0.6)
        ]
        options: dict[str, Any] = {"now": REFERENCE, "top_k": 20, "candidates": 40}
        whole = memory.recall_many(queries, **options)
        sevens = [
            result
            for start in range(0, len(queries), 7)
            for result in memory.recall_many(queries[start : start + 7], **options)
        ]
        for query, batched, in_sevens in zip(queries, whole, sevens, strict=True):
            single = memory.recall(
                query["query"], query["user_id"], mood_valence=query["mood_valence"], **options
            )
            hits = [hit.to_json() for hit in single.results]
            assert_recall_agrees(hits, [hit.to_json() for hit in batched.results])
            assert_recall_agrees(hits, [hit.to_json() for hit in in_sevens.results])

    # ---------------------------------------------------------------- queries (3)

    def test_recall_takes_everything_after_user_id_by_keyword(self, memory: ChromaMemory) -> None:
        memory.add([record("m1", "I drink tea.")])
        with pytest.raises(TypeError, match="positional"):
            memory.recall("tea", "ann", 0.5)  # type: ignore[misc]
        with pytest.raises(InvalidInputError) as raised:
            memory.recall("tea", "ann", mood_valence=5.0)
        assert str(raised.value) == "mood_valence must be within [-1, 1], got 5.0"

    @pytest.mark.parametrize("blank", ["", "   ", "\n\t "])
    def test_a_blank_query_is_refused_everywhere(self, memory: ChromaMemory, blank: str) -> None:
        memory.add([record("m1", "I drink tea.")])
        with pytest.raises(InvalidInputError, match="query must be a non-empty, non-blank"):
            memory.recall(blank, "ann")
        with pytest.raises(InvalidInputError, match="query must be a non-empty, non-blank"):
            memory.candidates(blank, "ann")
        with pytest.raises(InvalidInputError, match="query must be a non-empty, non-blank"):
            asyncio.run(memory.retrieve(request(blank), user_id="ann"))
        with pytest.raises(InvalidInputError) as raised:
            memory.recall_many(
                [{"query": "tea", "user_id": "ann"}, {"query": blank, "user_id": "ann"}]
            )
        assert str(raised.value).startswith("query 1: query must be a non-empty, non-blank")
