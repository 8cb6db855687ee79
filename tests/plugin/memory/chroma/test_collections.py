"""The users' collections: created cosine with sync_threshold 1, fixed when older, listed once,
and usable however small they are once Chroma's index cache has evicted them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.memory.chroma.collections import (
    DEFAULT_HNSW,
    SYNC_THRESHOLD,
    configured_hnsw,
    stored_configuration,
)
from affect_memory.memory.chroma.layout import collection_metadata
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from tests.contracts.memory_contract import REFERENCE, record
from tests.plugin.conftest import running_chroma


def _raw(memory: ChromaMemory) -> Any:
    client, lock = open_client(parse_location(memory.location))
    if lock is not None:
        lock.release()  # the memory's own hold keeps the store locked
    return client


def _fill(memory: ChromaMemory, users: int, per_user: int = 3) -> list[str]:
    names = [f"user-{index:03d}" for index in range(users)]
    memory.add(
        [
            record(f"m{j}", f"{name} note {j}: the kettle, the garden and bees", user=name)
            for name in names
            for j in range(per_user)
        ]
    )
    return names


def _recall_every_user_twice(memory: ChromaMemory, users: list[str]) -> None:
    """Two round-robin passes, each user once per pass: with more users than the cache holds,
    every query of the second pass reloads an evicted index."""
    for _ in range(2):
        results = memory.recall_many(
            [{"query": "bees in the garden", "user_id": user} for user in users], now=REFERENCE
        )
        assert [len(result.results) for result in results] == [3] * len(users)
        assert all(hit.id.startswith("m") for result in results for hit in result.results)


def test_a_new_collection_is_cosine_with_the_hnsw_settings_and_sync_threshold_one(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees.")])
        configuration = stored_configuration(
            _raw(memory).get_collection(memory.collection_for("ann"), embedding_function=None)
        )
    assert configuration["hnsw"] == {
        "space": "cosine",
        "ef_construction": 200,
        "ef_search": 500,
        "max_neighbors": 32,
        "resize_factor": 1.2,
        "sync_threshold": SYNC_THRESHOLD,
    }


def test_small_users_stay_readable_after_the_index_cache_evicts_them(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """Before sync_threshold 1: 25 of 60 users failed with 'Nothing found on disk' once evicted,
    on every later query and add, until the process restarted."""
    with ChromaMemory(tmp_path, embedder=embedder, index_cache=20) as memory:
        cache = memory.index_cache
        assert cache is not None and cache < 60
        # Twice the cache: the round-robin second pass still reloads every user's index.
        users = _fill(memory, 2 * cache)
        _recall_every_user_twice(memory, users)
        memory.add([record("late", "one more note about bees", user=users[0])])
        assert memory.count(users[0]) == 4


def test_a_collection_made_before_sync_threshold_one_is_fixed_when_opened(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, embedder=embedder, index_cache=20) as memory:
        assert memory.index_cache is not None
        users = [f"old-{index:03d}" for index in range(2 * memory.index_cache)]
        client = _raw(memory)
        rng = np.random.default_rng(7)
        for user in users:  # as the previous release created them: sync_threshold 1000
            old = client.create_collection(
                memory.collection_for(user),
                configuration={"hnsw": {"space": "cosine", **DEFAULT_HNSW.model_dump()}},
                metadata=collection_metadata(memory.collection_name, user, embedder.name),
                embedding_function=None,
            )
            vectors = rng.normal(size=(3, 384))
            old.add(
                ids=[f"m{j}" for j in range(3)],
                embeddings=vectors / np.linalg.norm(vectors, axis=1, keepdims=True),
                documents=[f"{user} note {j}" for j in range(3)],
                metadatas=[_metadata(user, j) for j in range(3)],
            )
        first = client.get_collection(memory.collection_for(users[0]), embedding_function=None)
        assert configured_hnsw(first)["sync_threshold"] == 1000
        _recall_every_user_twice(memory, users)
        for user in users:
            hnsw = configured_hnsw(
                client.get_collection(memory.collection_for(user), embedding_function=None)
            )
            assert hnsw["sync_threshold"] == SYNC_THRESHOLD


def _metadata(user: str, index: int) -> dict[str, Any]:
    from affect_memory.memory.records import MemoryRecord

    return MemoryRecord.model_validate(record(f"m{index}", "x", user=user)).to_metadata()


def test_small_users_stay_readable_on_a_server_with_a_small_index_cache(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """The server's cache is its YAML setting (capacity counts indexes, shards 1 makes it one
    LRU). Before sync_threshold 1: after a restart, every evicted small user failed."""
    config = "segment_manager:\n  hnsw_index_pool_cache_config:\n    memory:\n"
    config += "      capacity: 8\n      shards: 1\n"
    with (
        running_chroma(tmp_path, config) as (url, _pid),
        ChromaMemory(url, embedder=embedder) as memory,
    ):
        assert memory.index_cache is None
        users = _fill(memory, 24)
    with (
        running_chroma(tmp_path, config) as (url, _pid),
        ChromaMemory(url, embedder=embedder) as memory,
    ):
        _recall_every_user_twice(memory, users)
        memory.add([record("late", "one more note about bees", user=users[0])])


class _Counting:
    """A client that counts the calls made through it and passes every one on."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attribute = getattr(self._inner, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return attribute(*args, **kwargs)

        return counted


def test_stats_and_count_list_the_collections_once_for_every_user(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """Before: one get_collection per user on top of the listing."""
    with ChromaMemory(tmp_path, embedder=embedder) as writer:
        _fill(writer, 40, per_user=1)
    with ChromaMemory(tmp_path, embedder=embedder, create=False) as memory:
        counting = _Counting(memory._collections._client)
        memory._collections._client = counting
        stats = memory.stats()
        assert stats.count == 40 and len(stats.users) == 40 and stats.collections == 40
        assert memory.count() == 40
        assert counting.calls == {"list_collections": 2}


@pytest.mark.parametrize("bad", [0, 7, -1, True, 2.5, "20"])
def test_a_bad_index_cache_is_refused(tmp_path: Path, bad: object) -> None:
    from affect_memory.errors import StoreError

    with pytest.raises(StoreError, match="index_cache must be a whole number"):
        ChromaMemory(tmp_path, embedder=object(), index_cache=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_one_turn_id_of_two_users_writes_two_memories_and_replays_touch_only_their_own(
    where: str, tmp_path: Path, chroma_server: str, embedder: SentenceTransformerEmbedder
) -> None:
    """Turn ids come from each user's own conversation, so two users' turns may share one (and
    with it the new message's id); each turn writes, counts and is forgotten in its user's
    collection alone, embedded and over ``chroma run``."""
    location = str(tmp_path) if where == "embedded" else chroma_server
    name = f"turns-{uuid.uuid4().hex[:12]}"  # the server is shared by the session
    said = {"ann": "I planted tomatoes in the garden today.", "bob": "I fixed my bike's chain."}
    with ChromaMemory(location, collection=name, embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees.", user=user) for user in said])
        for user, text in said.items():
            report = memory.apply_turn_writes(
                "turn-1",
                user_id=user,
                recalled_ids=["m1"],
                recalled_at=REFERENCE,
                new_record=record("turn-1:user", text, user=user, days=0.0),
            )
            assert (report.incremented, report.stored_new) == (("m1",), True)
        replay = memory.apply_turn_writes(  # ann's turn again, as after a crash: no change
            "turn-1",
            user_id="ann",
            recalled_ids=["m1"],
            recalled_at=REFERENCE,
            new_record=record("turn-1:user", said["ann"], user="ann", days=0.0),
        )
        assert (replay.incremented, replay.already_applied) == ((), ("m1",))
        for user, text in said.items():
            bees, message = memory.get(["m1", "turn-1:user"], user_id=user)
            assert (bees.recall_count, message.text, message.user_id) == (1, text, user)
        assert memory.stats().users == {"ann": 2, "bob": 2}
        assert memory.forget(["turn-1:user"], user_id="bob") == ("turn-1:user",)
        assert memory.get(["turn-1:user"], user_id="bob") == ()
        (hit, *_) = memory.recall("What did I do in the garden?", "ann", now=REFERENCE).results
        assert (hit.id, hit.text) == ("turn-1:user", said["ann"])
        assert {h.id for h in memory.recall("garden", "bob", now=REFERENCE).results} == {"m1"}
