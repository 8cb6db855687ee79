"""The conversation endpoints on a real Chroma memory, the real embedding model and a real
SQLite state file: a turn goes through the engine (only the language model is scripted), reads
back turn by turn with the mood after it, stays its user's alone, and a refused body writes
nothing. One test drives a real ``affect-memory serve`` process."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from affect_memory.http.app import create_app
from affect_memory.http.context import ModelChoice, ServerContext
from affect_memory.kernel.adapters import ScriptedModel, ScriptedReply
from affect_memory.kernel.appraisal import DEFAULT_AFFECT_DYNAMICS
from affect_memory.kernel.engine_settings import DEFAULT_ENGINE_LIMITS
from affect_memory.kernel.protocols import GateResult, GenerateInput
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from affect_memory.state.sqlite import SQLiteStateStore
from tests.contracts.snapshots import dump_sqlite
from tests.plugin.http.serve_process import running_serve

NOW = "2026-03-01T10:00:00+00:00"
RECORDS = [
    {"id": "a-sister", "user_id": "alice", "text": "My sister Maya lives in Lisbon.",
     "timestamp": "2026-02-01T09:00:00Z", "significance": 0.8},
    {"id": "a-run", "user_id": "alice", "text": "I am training for the Porto marathon.",
     "timestamp": "2026-02-10T09:00:00Z", "significance": 0.6},
    {"id": "a-cat", "user_id": "alice", "text": "Our cat is called Pixel.",
     "timestamp": "2026-02-20T09:00:00Z"},
    {"id": "b-sister", "user_id": "bob", "text": "My sister lives in Lisbon as well.",
     "timestamp": "2026-02-01T09:00:00Z", "significance": 0.9},
]  # fmt: skip


@dataclass(frozen=True)
class EchoingModel:
    """The server's model choice, scripted: every turn retrieves, and the reply echoes."""

    def build(self, gate: object) -> ScriptedModel:
        def respond(request: GenerateInput) -> ScriptedReply:
            return ScriptedReply(chunks=("re: ", request.message))

        return ScriptedModel(
            default_gate=GateResult(intent="CURIOSITY", should_retrieve=True), respond=respond
        )


@dataclass(frozen=True)
class StalledModel:
    """The server's model choice, scripted to stream one chunk and then never finish."""

    def build(self, gate: object) -> ScriptedModel:
        import asyncio

        never = asyncio.Event()
        return ScriptedModel(
            replies=[ScriptedReply(chunks=("partial", "never"), pause=never, pause_after=1)]
        )


@pytest.fixture
def context(tmp_path: Path, embedder: Embedder) -> Iterator[ServerContext]:
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    memory.add(RECORDS)
    served = ServerContext(memory, state_url=str(tmp_path / "state.db"), timeout=60.0)
    served.model = EchoingModel()  # type: ignore[assignment]
    yield served
    served.close()


@pytest.fixture
def client(context: ServerContext) -> Iterator[TestClient]:
    with TestClient(create_app(context), raise_server_exceptions=False) as test_client:
        yield test_client


def _turn(client: TestClient, user: str, conversation: str, body: Any) -> httpx.Response:
    return client.post(f"/v1/users/{user}/conversations/{conversation}/turns", json=body)


def _carried(emotions: dict[str, float]) -> dict[str, float]:
    """The emotions a turn leaves in the state: those above the carry floor."""
    floor = DEFAULT_AFFECT_DYNAMICS.carry_floor
    return {name: value for name, value in emotions.items() if value > floor}


def _pad(mood: dict[str, float]) -> tuple[float, float, float]:
    return mood["pleasure"], mood["arousal"], mood["dominance"]


def test_a_turn_retrieves_the_users_memories_in_recall_order_and_reads_back(
    client: TestClient, context: ServerContext
) -> None:
    question = "Where does my sister live?"
    first = _turn(client, "alice", "c1", {"message": question, "now": NOW})
    assert first.status_code == 200, first.text
    answer = first.json()
    assert answer["reply"] == f"re: {question}"
    assert answer["turn"] == 0
    recalled = context.memory.recall(
        question, "alice", now=NOW, top_k=DEFAULT_ENGINE_LIMITS.retrieval_limit
    )
    assert answer["retrieved"] == [hit.id for hit in recalled.results]
    assert answer["retrieved"][0] == "a-sister"
    assert "b-sister" not in answer["retrieved"]  # bob's memory is never alice's evidence

    before = context.memory.count("alice")
    statement = "I moved to Porto last week."
    second = _turn(client, "alice", "c1", {"message": statement, "now": "2026-03-01T10:05:00Z"})
    assert second.status_code == 200, second.text
    assert second.json()["turn"] == 1
    # the turn's memory write went through the outbox, as chat's turns do
    assert context.memory.count("alice") == before + 1
    assert statement in [record.text for record in context.memory.list("alice")]

    read = client.get("/v1/users/alice/conversations/c1")
    assert read.status_code == 200, read.text
    conversation = read.json()
    assert (conversation["conversation_id"], conversation["user_id"]) == ("c1", "alice")
    turns = conversation["turns"]
    assert [(t["index"], t["user"], t["assistant"], t["timestamp"]) for t in turns] == [
        (0, question, f"re: {question}", NOW),
        (1, statement, f"re: {statement}", "2026-03-01T10:05:00+00:00"),
    ]
    for turn, posted in zip(turns, (answer, second.json()), strict=True):
        assert _pad(turn["mood"]) == pytest.approx(_pad(posted["mood"]), abs=1e-12)
        assert turn["emotions"] == pytest.approx(_carried(posted["emotions"]), abs=1e-12)

    listed = client.get("/v1/users/alice/conversations")
    assert listed.status_code == 200
    assert listed.json() == {
        "conversations": [
            {"conversation_id": "c1", "turns": 2, "updated_at": "2026-03-01T10:05:00+00:00"}
        ]
    }


def test_another_users_conversation_is_a_404_like_a_missing_one_and_nothing_is_written(
    client: TestClient, tmp_path: Path
) -> None:
    assert _turn(client, "alice", "private", {"message": "A secret plan.", "now": NOW}).is_success
    db = tmp_path / "state.db"
    before = dump_sqlite(db)
    refused = _turn(client, "bob", "private", {"message": "let me in", "now": NOW})
    assert refused.status_code == 404
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem == {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "user 'bob' has no conversation 'private'",
        "field": "conversation_id",
    }
    assert dump_sqlite(db) == before
    read = client.get("/v1/users/bob/conversations/private")
    missing = client.get("/v1/users/bob/conversations/nowhere")
    assert (read.status_code, missing.status_code) == (404, 404)
    assert read.json()["detail"].replace("private", "X") == missing.json()["detail"].replace(
        "nowhere", "X"
    )
    assert "A secret plan" not in read.text
    assert client.get("/v1/users/bob/conversations").json() == {"conversations": []}


@pytest.mark.parametrize(
    ("path", "body", "field", "shown"),
    [
        ("alice/conversations/c2", {}, "message", "required"),
        ("alice/conversations/c2", {"message": ""}, "message", "''"),
        ("alice/conversations/c2", {"message": "  \n "}, "message", "empty"),
        ("alice/conversations/c2", {"message": 42}, "message", "42"),
        ("alice/conversations/c2", {"message": "x" * 16_001}, "message", "16,001"),
        ("alice/conversations/c2", {"message": "a\u0000b"}, "message", "NUL"),
        ("alice/conversations/c2", {"message": "hi", "now": "yesterday"}, "now", "'yesterday'"),
        ("alice/conversations/c2", {"message": "hi", "now": 17}, "now", "17"),
        ("alice/conversations/c2", {"message": "hi", "now": "2026-03-01T10:00:00"}, "now", ""),
        ("alice/conversations/c2", {"message": "hi", "mood": 1}, "mood", "mood"),
        ("alice/conversations/" + "c" * 257, {"message": "hi"}, "conversation_id", "ccc"),
        ("alice/conversations/%20", {"message": "hi"}, "conversation_id", "' '"),
    ],
)
def test_a_bad_turn_is_a_422_naming_the_field_and_writes_nothing(
    client: TestClient, tmp_path: Path, path: str, body: Any, field: str, shown: str
) -> None:
    assert _turn(client, "alice", "c1", {"message": "hello", "now": NOW}).is_success
    db = tmp_path / "state.db"
    before = dump_sqlite(db)
    refused = client.post(f"/v1/users/{path}/turns", json=body)
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["field"] == field
    assert field in problem["detail"] and shown in problem["detail"]
    assert "\n" not in problem["detail"]
    assert dump_sqlite(db) == before


def test_a_body_that_is_not_json_is_a_400_and_writes_nothing(client: TestClient) -> None:
    refused = client.post(
        "/v1/users/alice/conversations/c1/turns",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert refused.status_code == 400
    assert client.get("/v1/users/alice/conversations").json() == {"conversations": []}


def test_a_turn_slower_than_the_timeout_is_a_504_and_commits_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    served = ServerContext(memory, state_url=str(tmp_path / "state.db"), timeout=1.0)
    served.model = StalledModel()  # type: ignore[assignment]
    try:
        with TestClient(create_app(served), raise_server_exceptions=False) as client:
            stalled = _turn(client, "alice", "slow", {"message": "hello?", "now": NOW})
            assert stalled.status_code == 504, stalled.text
            assert "--timeout" in stalled.json()["detail"]
            read = client.get("/v1/users/alice/conversations/slow")
            assert read.status_code == 200  # claimed by its user, and empty
            assert read.json()["turns"] == []
            assert client.get("/v1/health").status_code == 200  # the server goes on
    finally:
        served.close()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_model_that_cannot_be_reached_is_a_502_that_never_shows_the_key(
    tmp_path: Path, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    key = "sk-test-3c1b8f0e9d7a4c2b9e6f5a1d0c8b7a6f"
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    choice = ModelChoice(
        kind="openai", url=f"http://127.0.0.1:{_closed_port()}/v1", name="m", api_key=key
    )
    served = ServerContext(memory, state_url=str(tmp_path / "state.db"), model=choice)
    caplog.set_level(logging.DEBUG)
    try:
        with TestClient(create_app(served), raise_server_exceptions=False) as client:
            failed = _turn(client, "alice", "c1", {"message": "hello", "now": NOW})
            assert failed.status_code == 502, failed.text
            assert failed.json()["detail"].startswith("the model failed")
            assert key not in failed.text
            assert client.get("/v1/users/alice/conversations/c1").json()["turns"] == []
    finally:
        served.close()
    assert key not in caplog.text


def test_a_turn_through_a_real_serve_process(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_serve(data) as server, httpx.Client(base_url=server.url, timeout=120) as http:
        posted = http.post(
            "/v1/users/alice/conversations/c1/turns", json={"message": "Hello there!", "now": NOW}
        )
        assert posted.status_code == 200, posted.text
        answer = posted.json()
        assert answer["turn"] == 0 and answer["reply"]
        read = http.get("/v1/users/alice/conversations/c1").json()
        assert [(t["user"], t["assistant"]) for t in read["turns"]] == [
            ("Hello there!", answer["reply"])
        ]
        assert http.get("/v1/users/bob/conversations/c1").status_code == 404
    store = SQLiteStateStore(data / "state.db")  # what the server committed, read after it stopped
    try:
        import asyncio

        turns = asyncio.run(store.conversation_turns("alice", "c1"))
    finally:
        store.close()
    assert turns is not None and len(turns) == 1 and turns[0].mood is not None
    assert _pad(answer["mood"]) == pytest.approx(
        (turns[0].mood.valence, turns[0].mood.arousal, turns[0].mood.dominance), abs=1e-12
    )


def test_the_default_scripted_model_gates_with_the_embedding_gate(
    tmp_path: Path, embedder: Embedder
) -> None:
    """``--model scripted`` classifies as a deployment does: a question about the user's past
    retrieves their memories in recall's order, small talk retrieves nothing."""
    memory = ChromaMemory(tmp_path / "chroma", embedder=embedder)
    memory.add(RECORDS)
    served = ServerContext(memory, state_url=str(tmp_path / "state.db"), timeout=60.0)
    try:
        with TestClient(create_app(served), raise_server_exceptions=False) as test_client:
            question = "Do you remember where my sister lives?"
            asked = _turn(test_client, "alice", "c1", {"message": question, "now": NOW})
            assert asked.status_code == 200, asked.text
            recalled = memory.recall(
                question, "alice", now=NOW, top_k=DEFAULT_ENGINE_LIMITS.retrieval_limit
            )
            assert asked.json()["retrieved"] == [hit.id for hit in recalled.results]
            assert asked.json()["retrieved"][0] == "a-sister"
            greeted = _turn(test_client, "alice", "c1", {"message": "hi!", "now": NOW})
            assert greeted.status_code == 200, greeted.text
            assert greeted.json()["retrieved"] == []
            assert greeted.json()["reply"] == "Okay."
    finally:
        served.close()


def test_the_server_applies_the_memory_writes_a_crash_left_pending_once(tmp_path: Path) -> None:
    """A turn committed with its memory write still in the outbox (the process died before
    applying it): the next server applies it on start, and the one after does not again."""
    from affect_memory.kernel.models import AffectState
    from affect_memory.kernel.protocols import Message, OutboxItem
    from affect_memory.memory.turns.effects import MEMORY_TOPIC
    from affect_memory.state.location import open_state_store
    from tests.plugin.http.serve_process import running_serve

    data = tmp_path / "data"
    data.mkdir()
    record = {"id": "porto", "text": "I moved to Porto.", "user_id": "ann",
              "timestamp": "2026-01-05T10:00:00+00:00"}  # fmt: skip
    item = OutboxItem(
        id="t1-memory",
        topic=MEMORY_TOPIC,
        payload={"turn_id": "t1", "user_id": "ann", "recalled_ids": [], "new_record": record},
    )

    async def crashed_turn() -> None:
        store = open_state_store(str(data / "state.db"))
        try:
            async with store.transaction("ann-chat") as transaction:
                await transaction.commit(
                    state=AffectState(),
                    messages=[Message(role="user", content=record["text"])],
                    outbox=(item,),
                )
        finally:
            store.close()

    asyncio.run(crashed_turn())
    for attempt in ("first", "second"):
        with running_serve(data) as server, httpx.Client(base_url=server.url) as client:
            stored = client.get("/v1/users/ann/memories")
            assert stored.status_code == 200, stored.text
            assert [m["id"] for m in stored.json()["memories"]] == ["porto"], server.output()
            replayed = "replayed 1 pending memory write(s)" in server.stderr.read_text()
            assert replayed is (attempt == "first")
