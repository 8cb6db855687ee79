"""Every endpoint of the API core against a real server process, twice: over an embedded Chroma
store with SQLite state, and over a ``chroma run`` server with PostgreSQL state.

Each test writes users of its own (named after the test and the backend), so the tests hold
in any order on the session's two servers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from affect_memory.kernel import __version__
from affect_memory.kernel.engine import DEFAULT_ENGINE_LIMITS
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from affect_memory.state.location import open_state_store
from tests.plugin.http.conftest import Api
from tests.plugin.state.user_data import commit, memory_item

RECORDS = [
    {
        "id": "m1",
        "text": "I adopted a grey cat called Miso from the shelter.",
        "timestamp": "2025-03-01T09:00:00+01:00",
        "significance": 0.8,
        "valence": 0.7,
        "metadata": {"topic": "pets", "mood": 3},
    },
    {
        "id": "m2",
        "text": "My sister moved to Lisbon for a new job.",
        "timestamp": "2025-05-10T18:30:00Z",
        "significance": 0.6,
        "valence": -0.2,
        "agent_id": "helper",
    },
    {
        "id": "m3",
        "text": "Miso the cat knocked a glass off the kitchen table.",
        "timestamp": "2025-07-20T07:15:00-04:00",
        "significance": 0.3,
        "valence": -0.4,
        "episode": True,
        "metadata": {"topic": "pets"},
    },
]
"""Three memories, oldest first (m1, m2, m3 by instant)."""

NOW = "2025-08-01T12:00:00Z"
"""When the conversation turns happen."""


@pytest.fixture(params=["embedded", "chroma"])
def api(request: pytest.FixtureRequest) -> Api:
    """Each server in turn."""
    found: Api = request.getfixturevalue(f"{request.param}_api")
    return found


def _user(api: Api, name: str) -> str:
    return f"{name}-{api.kind}"


def _post(api: Api, user: str, records: list[dict[str, Any]], **body: Any) -> httpx.Response:
    return api.client.post(f"/v1/users/{user}/memories", json={"records": records, **body})


def _seeded(api: Api, name: str) -> str:
    user = _user(api, name)
    answer = _post(api, user, RECORDS)
    assert answer.status_code == 201, answer.text
    assert answer.json() == {"ids": ["m1", "m2", "m3"], "written": 3, "skipped": []}
    return user


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    """What the API should give back for a posted record (apart from the timestamp's form)."""
    return {
        "id": record["id"],
        "text": record["text"],
        "significance": record["significance"],
        "valence": record["valence"],
        "episode": record.get("episode", False),
        "agent_id": record.get("agent_id"),
        "conversation_id": None,
        "recall_count": 0,
        "last_recalled_at": None,
        "metadata": record.get("metadata", {}),
    }


def test_health_says_ok_and_the_version(api: Api) -> None:
    answer = api.client.get("/v1/health")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "version": __version__}


def test_posted_memories_read_back_whole_newest_first(api: Api) -> None:
    user = _seeded(api, "listing")
    page = api.client.get(f"/v1/users/{user}/memories").json()
    assert [memory["id"] for memory in page["memories"]] == ["m3", "m2", "m1"]
    assert (page["total"], page["offset"], page["limit"]) == (3, 0, 50)
    by_id = {memory["id"]: memory for memory in page["memories"]}
    for record in RECORDS:
        got = dict(by_id[record["id"]])
        stamp = got.pop("timestamp")
        assert got == _shown(record)
        assert stamp.endswith("+00:00")  # stored in UTC, the same instant as posted
    assert by_id["m3"]["timestamp"].startswith("2025-07-20T11:15:00")
    one = api.client.get(f"/v1/users/{user}/memories/m2")
    assert one.status_code == 200
    assert one.json() == by_id["m2"]


def test_a_page_and_a_search_are_slices_of_the_newest_first_order(api: Api) -> None:
    user = _seeded(api, "paging")
    middle = api.client.get(f"/v1/users/{user}/memories", params={"offset": 1, "limit": 1})
    assert [m["id"] for m in middle.json()["memories"]] == ["m2"]
    assert middle.json()["total"] == 3
    past_end = api.client.get(f"/v1/users/{user}/memories", params={"offset": 3}).json()
    assert past_end["memories"] == [] and past_end["total"] == 3
    found = api.client.get(f"/v1/users/{user}/memories", params={"q": "MISO"}).json()
    assert [m["id"] for m in found["memories"]] == ["m3", "m1"]
    assert found["total"] == 2
    second = api.client.get(
        f"/v1/users/{user}/memories", params={"q": "miso", "offset": 1, "limit": 5}
    ).json()
    assert [m["id"] for m in second["memories"]] == ["m1"]
    assert second["total"] == 2


def test_a_repeated_id_is_skipped_unless_upserted(api: Api) -> None:
    user = _seeded(api, "upsert")
    changed = {**RECORDS[0], "text": "Miso is a black cat, not grey."}
    again = _post(api, user, [changed])
    assert again.status_code == 201
    assert again.json() == {"ids": ["m1"], "written": 0, "skipped": ["m1"]}
    kept = api.client.get(f"/v1/users/{user}/memories/m1").json()
    assert kept["text"] == RECORDS[0]["text"]
    replaced = _post(api, user, [changed], upsert=True)
    assert replaced.status_code == 201
    assert replaced.json() == {"ids": ["m1"], "written": 1, "skipped": []}
    assert api.client.get(f"/v1/users/{user}/memories/m1").json()["text"] == changed["text"]
    assert api.client.get(f"/v1/users/{user}/memories").json()["total"] == 3


def test_a_record_without_id_or_timestamp_gets_both(api: Api) -> None:
    user = _user(api, "defaults")
    answer = _post(api, user, [{"text": "The bare minimum of a memory."}])
    assert answer.status_code == 201
    [ident] = answer.json()["ids"]
    stored = api.client.get(f"/v1/users/{user}/memories/{ident}").json()
    assert stored["text"] == "The bare minimum of a memory."
    assert stored["significance"] == pytest.approx(0.5, abs=1e-12)
    assert stored["timestamp"].endswith("+00:00")


def test_forget_removes_one_memory_of_that_user_only(api: Api) -> None:
    user = _seeded(api, "forget")
    other = _seeded(api, "forget-other")  # the same ids under another user
    gone = api.client.delete(f"/v1/users/{user}/memories/m2")
    assert gone.status_code == 200
    assert gone.json() == {"forgotten": ["m2"]}
    missing = api.client.get(f"/v1/users/{user}/memories/m2")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["field"] == "memory_id"
    assert "'m2'" in missing.json()["detail"]
    again = api.client.delete(f"/v1/users/{user}/memories/m2")
    assert again.status_code == 404
    assert api.client.get(f"/v1/users/{other}/memories/m2").status_code == 200
    assert api.client.get(f"/v1/users/{other}/memories").json()["total"] == 3
    assert api.client.get(f"/v1/users/{user}/memories").json()["total"] == 2


def test_users_and_stats_count_each_users_memories(api: Api) -> None:
    first = _seeded(api, "counted")
    second = _user(api, "counted-two")
    assert _post(api, second, RECORDS[:1]).status_code == 201
    users = {entry["user_id"]: entry["memories"] for entry in api.client.get("/v1/users").json()[
        "users"
    ]}
    assert users[first] == 3 and users[second] == 1
    stats = api.client.get("/v1/stats").json()
    assert stats["users"] == users
    assert stats["count"] == sum(users.values())
    assert stats["space"] == "cosine"
    assert stats["collection"] == api.collection


def test_export_is_every_memory_as_ingestable_lines(api: Api) -> None:
    user = _seeded(api, "export")
    answer = api.client.get(f"/v1/users/{user}/export")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in answer.text.splitlines()]
    assert [line["id"] for line in lines] == ["m1", "m2", "m3"]  # export's order: oldest first
    assert all(line["user_id"] == user for line in lines)
    assert lines[0]["extra"] == {"mood": 3, "topic": "pets"}
    assert lines[1]["agent_id"] == "helper" and lines[2]["episode"] is True
    empty = api.client.get(f"/v1/users/{_user(api, 'export-nobody')}/export")
    assert empty.status_code == 200 and empty.text == ""


def test_export_lines_are_what_the_store_exports(chroma_api: Api, embedder: Embedder) -> None:
    user = _seeded(chroma_api, "export-parity")
    served = [json.loads(line) for line in chroma_api.client.get(
        f"/v1/users/{user}/export"
    ).text.splitlines()]
    with ChromaMemory(
        chroma_api.chroma or "", collection=chroma_api.collection, index=chroma_api.index,
        embedder=embedder,
    ) as memory:
        assert served == list(memory.export(user))


def test_recall_ranks_the_users_memories_with_their_explanations(api: Api) -> None:
    user = _seeded(api, "recall")
    answer = api.client.post(
        f"/v1/users/{user}/recall",
        json={"query": "what is my cat called?", "top_k": 2, "now": "2025-08-01T12:00:00Z"},
    )
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert list(result) == ["query", "user_id", "now", "plan", "results", "skipped"]
    assert result["user_id"] == user and result["query"] == "what is my cat called?"
    assert result["now"].startswith("2025-08-01T12:00:00")
    assert len(result["results"]) == 2
    assert result["results"][0]["score"] >= result["results"][1]["score"]
    assert {hit["id"] for hit in result["results"]} == {"m1", "m3"}  # the two about the cat
    assert all(hit["time_rule"] for hit in result["results"])
    filtered = api.client.post(
        f"/v1/users/{user}/recall", json={"query": "cat", "where": {"agent_id": "helper"}}
    ).json()
    assert [hit["id"] for hit in filtered["results"]] == ["m2"]


async def _seed_state(state: str, user: str, other: str) -> None:
    store = open_state_store(state)
    try:
        await commit(store, f"{user}-chat", "hello", (memory_item(f"{user}-t1", user),))
        await commit(store, f"{other}-chat", "hi", (memory_item(f"{other}-t1", other),))
    finally:
        store.close()


async def _conversations_of(state: str, user: str) -> tuple[str, ...]:
    store = open_state_store(state)
    try:
        return tuple((await store.erase_user(user)).conversations)
    finally:
        store.close()


def test_erasing_a_user_removes_their_memories_and_conversations_only(api: Api) -> None:
    user = _seeded(api, "erased")
    other = _seeded(api, "kept")
    asyncio.run(_seed_state(api.state, user, other))
    answer = api.client.delete(f"/v1/users/{user}")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "user_id": user,
        "memories": 3,
        "state": {"conversations": [f"{user}-chat"], "messages": 1, "outbox_items": 1},
    }
    assert api.client.get(f"/v1/users/{user}/memories").json()["total"] == 0
    assert user not in {entry["user_id"] for entry in api.client.get("/v1/users").json()["users"]}
    assert api.client.get(f"/v1/users/{other}/memories").json()["total"] == 3
    # What is left of the other user: their conversation (erased here, by the test, to see it).
    assert asyncio.run(_conversations_of(api.state, other)) == (f"{other}-chat",)
    assert asyncio.run(_conversations_of(api.state, user)) == ()


def test_a_turn_reads_back_as_the_users_conversation_and_no_one_elses(api: Api) -> None:
    """Through the real server, on SQLite and on PostgreSQL state: a question about the past
    retrieves the user's memories in recall's order, each turn reads back with its mood, and
    another user sees neither the conversation nor can post to it."""
    user = _seeded(api, "talker")
    other = _seeded(api, "stranger")
    base = f"/v1/users/{user}/conversations/evening"
    question = {"message": "Do you remember what my cat is called?", "now": NOW}
    asked = api.client.post(f"{base}/turns", json=question)
    assert asked.status_code == 200, asked.text
    limit = DEFAULT_ENGINE_LIMITS.retrieval_limit
    recalled = api.client.post(
        f"/v1/users/{user}/recall", json={"query": question["message"], "now": NOW, "top_k": limit}
    )
    assert asked.json()["retrieved"] == [hit["id"] for hit in recalled.json()["results"]]
    assert asked.json()["retrieved"][0] in {"m1", "m3"}  # the cat, not the sister
    told = api.client.post(f"{base}/turns", json={"message": "Thanks, that helps!", "now": NOW})
    assert (told.status_code, told.json()["turn"]) == (200, 1), told.text

    read = api.client.get(base)
    assert read.status_code == 200, read.text
    turns = read.json()["turns"]
    assert [turn["user"] for turn in turns] == [question["message"], "Thanks, that helps!"]
    assert turns[-1]["mood"] == pytest.approx(told.json()["mood"], abs=1e-12)
    listed = api.client.get(f"/v1/users/{user}/conversations").json()["conversations"]
    assert [(c["conversation_id"], c["turns"]) for c in listed] == [("evening", 2)]

    assert api.client.get(f"/v1/users/{other}/conversations").json() == {"conversations": []}
    assert api.client.get(f"/v1/users/{other}/conversations/evening").status_code == 404
    refused = api.client.post(
        f"/v1/users/{other}/conversations/evening/turns", json={"message": "hi", "now": NOW}
    )
    assert refused.status_code == 404, refused.text
    assert len(api.client.get(base).json()["turns"]) == 2
