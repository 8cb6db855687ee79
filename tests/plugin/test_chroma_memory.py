"""ChromaMemory against an embedded path, the in-process store and a real ``chroma run`` server."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from plugin.chroma_client import LOCK_FILE, parse_location
from plugin.chroma_memory import PROGRESS_MIN, ChromaMemory, _to_rows
from plugin.embeddings import SentenceTransformerEmbedder
from plugin.errors import (
    IsolationError,
    StoreError,
    StoreUnavailableError,
    WrongSpaceError,
)
from tests.contracts.memory_contract import MemoryContract, MemoryFactory, record

ROOT = Path(__file__).resolve().parents[2]


def _name() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def opened() -> Iterator[list[ChromaMemory]]:
    memories: list[ChromaMemory] = []
    yield memories
    for memory in memories:
        memory.close()


class TestEmbedded(MemoryContract):
    """An embedded ``PersistentClient`` path in a temporary directory."""

    @pytest.fixture
    def make_memory(
        self, tmp_path: Path, embedder: SentenceTransformerEmbedder, opened: list[ChromaMemory]
    ) -> MemoryFactory:
        name = _name()

        def make(**kwargs: object) -> ChromaMemory:
            memory = ChromaMemory(tmp_path / "chroma", collection=name, embedder=embedder, **kwargs)
            opened.append(memory)
            return memory

        return make

    def test_memories_survive_closing_and_reopening(self, make_memory: MemoryFactory) -> None:
        with make_memory() as memory:
            memory.add([record("m1", "I keep bees.")])
        reopened = make_memory(create=False)
        assert [r.text for r in reopened.get(["m1"])] == ["I keep bees."]
        assert reopened.stats().size_bytes > 0


    def test_a_large_write_shows_progress_only_when_asked(
        self, make_memory: MemoryFactory, capsys: pytest.CaptureFixture[str]
    ) -> None:
        memory = make_memory()
        batch = [record(f"m{i}", f"note {i}: water the plants") for i in range(PROGRESS_MIN)]
        memory.add([record("small", "one note")], progress=True)  # below the threshold: no bar
        assert capsys.readouterr().err == ""
        memory.add(batch, progress=True)
        assert f"{PROGRESS_MIN}/{PROGRESS_MIN}" in capsys.readouterr().err
        memory.upsert(batch)  # not a TTY under pytest: no bar
        assert capsys.readouterr().err == "" and memory.count() == PROGRESS_MIN + 1


class TestInMemory(MemoryContract):
    """The in-process ``:memory:`` store (a fresh collection per test)."""

    @pytest.fixture
    def make_memory(
        self, embedder: SentenceTransformerEmbedder, opened: list[ChromaMemory]
    ) -> MemoryFactory:
        name = _name()

        def make(**kwargs: object) -> ChromaMemory:
            memory = ChromaMemory(":memory:", collection=name, embedder=embedder, **kwargs)
            opened.append(memory)
            return memory

        return make


class TestServer(MemoryContract):
    """A ``chroma run`` server over HTTP (a fresh collection per test)."""

    @pytest.fixture
    def make_memory(
        self, chroma_server: str, embedder: SentenceTransformerEmbedder, opened: list[ChromaMemory]
    ) -> MemoryFactory:
        name = _name()

        def make(**kwargs: object) -> ChromaMemory:
            memory = ChromaMemory(chroma_server, collection=name, embedder=embedder, **kwargs)
            opened.append(memory)
            return memory

        return make

    def test_two_clients_of_one_server_see_each_others_writes(
        self, make_memory: MemoryFactory
    ) -> None:
        writer, reader = make_memory(), make_memory()
        writer.add([record("m1", "I keep bees.")])
        assert [c.id for c in reader.candidates("bees", "ann")] == ["m1"]

    def test_an_l2_collection_on_the_server_is_refused(
        self, chroma_server: str, embedder: SentenceTransformerEmbedder
    ) -> None:
        where = parse_location(chroma_server)
        client = chromadb.HttpClient(
            host=where.host, port=where.port, settings=Settings(anonymized_telemetry=False)
        )
        name = _name()
        client.create_collection(name, embedding_function=None)
        with pytest.raises(WrongSpaceError, match="'l2' distance space"):
            ChromaMemory(chroma_server, collection=name, embedder=embedder)


# -------------------------------------------------------------------- embedded-only behaviour


def test_an_existing_l2_collection_is_refused_with_the_reason(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    client = chromadb.PersistentClient(
        path=str(tmp_path), settings=Settings(anonymized_telemetry=False)
    )
    client.create_collection("legacy", embedding_function=None)
    client.close()
    with pytest.raises(WrongSpaceError) as raised:
        ChromaMemory(tmp_path, collection="legacy", embedder=embedder)
    message = str(raised.value)
    assert "'l2'" in message and "cosine" in message and "--collection" in message
    # The refusal released the lock: a correct collection opens on the same path.
    with ChromaMemory(tmp_path, collection="fresh", embedder=embedder) as memory:
        assert memory.stats().space == "cosine"


def test_a_collection_filled_by_another_embedder_is_refused(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    ChromaMemory(tmp_path, embedder=embedder).close()

    class Renamed(SentenceTransformerEmbedder):
        @property
        def name(self) -> str:
            return "some-other-model"

    with pytest.raises(StoreError, match="'some-other-model'"):
        ChromaMemory(tmp_path, embedder=Renamed())


def test_reading_a_missing_store_or_collection_never_creates_one(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with pytest.raises(StoreUnavailableError, match="no memory store"):
        ChromaMemory(tmp_path / "absent", embedder=embedder, create=False)
    assert not (tmp_path / "absent").exists()
    ChromaMemory(tmp_path, collection="present", embedder=embedder).close()
    with pytest.raises(StoreError, match=r"no collection 'memories' .*present: present"):
        ChromaMemory(tmp_path, embedder=embedder, create=False)


_SECOND_PROCESS = textwrap.dedent(
    """
    import sys
    from plugin.chroma_memory import ChromaMemory
    from plugin.errors import StoreLockedError
    try:
        ChromaMemory(sys.argv[1]).close()
    except StoreLockedError as error:
        print(error)
        sys.exit(3)
    print("opened")
    """
)


def test_a_second_process_is_refused_with_a_pointer_to_server_mode(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    def second() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", _SECOND_PROCESS, str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )

    with ChromaMemory(tmp_path, embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees.")])
        refused = second()
        assert refused.returncode == 3, refused.stderr
        assert "in use by another process" in refused.stdout
        assert "--chroma http://" in refused.stdout and "chroma run" in refused.stdout
        assert memory.count() == 1  # the holder is unaffected
    assert (tmp_path / LOCK_FILE).exists()
    allowed = second()
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "opened"), allowed.stderr


def test_one_process_may_open_a_path_twice_and_the_lock_lasts_until_the_last_close(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    import fcntl
    import os

    def locked_by_someone() -> bool:
        fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    first = ChromaMemory(tmp_path, embedder=embedder)
    second = ChromaMemory(tmp_path, collection="other-one", embedder=embedder)
    first.close()
    assert locked_by_someone()
    second.close()
    second.close()
    assert not locked_by_someone()
    with pytest.raises(StoreError, match="closed"):
        first.count()


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("ftp://host:1", "http:// or https://"),
        ("http://", "HOST:PORT"),
        ("http://127.0.0.1:99999", "invalid port"),
        ("http://127.0.0.1:8000/api", "no path"),
        ("", "path, ':memory:' or a URL"),
    ],
)
def test_bad_locations_are_refused(location: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        parse_location(location)


def test_an_unreachable_server_is_a_clear_error(embedder: SentenceTransformerEmbedder) -> None:
    with pytest.raises(StoreUnavailableError, match=r"cannot reach a Chroma server .*chroma run"):
        ChromaMemory("http://127.0.0.1:9", embedder=embedder)


def test_bad_collection_names_are_refused_before_anything_opens(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="collection name"):
        ChromaMemory(tmp_path / "x", collection="a b")
    assert not (tmp_path / "x").exists()


# -------------------------------------------------------------------- the mapper


def _columns(distances: list[float], owners: list[str]) -> tuple[list, list, list, list]:
    ids = [f"m{i}" for i in range(len(distances))]
    metas = [
        {
            "user_id": owner,
            "timestamp": "2026-06-01T12:00:00.000000+00:00",
            "timestamp_epoch": 1780315200.0,
            "significance": 0.5,
            "emotional_valence": 0.0,
            "recall_count": 0,
            "episode": False,
        }
        for owner in owners
    ]
    return ids, [f"text {i}" for i in ids], metas, distances


def _candidates(*columns: object) -> list:
    return _to_rows(*columns).candidates()  # type: ignore[arg-type]


def test_the_mapper_clamps_float_noise_and_refuses_real_out_of_range_distances() -> None:
    (a, b) = _candidates(*_columns([-2.4e-7, 2.0000004], ["u", "u"]), "u")
    assert (a.distance, b.distance) == (0.0, 2.0)
    for bad in (-0.01, 2.5, float("nan"), float("inf")):
        with pytest.raises(StoreError, match="outside the cosine range"):
            _candidates(*_columns([0.1, bad], ["u", "u"]), "u")


def test_the_mapper_refuses_a_row_of_another_user() -> None:
    with pytest.raises(IsolationError, match="'m1' of another user"):
        _candidates(*_columns([0.1, 0.2], ["ann", "anna"]), "ann")


def test_the_mapper_refuses_rows_other_tools_wrote() -> None:
    ids, docs, metas, dists = _columns([0.1], ["u"])
    with pytest.raises(StoreError, match="lacks the affect-memory metadata key 'recall_count'"):
        _candidates(
            ids, docs, [{k: v for k, v in metas[0].items() if k != "recall_count"}], dists, "u"
        )
    malformed = (
        ("recall_count", 1.0),
        ("episode", 1),
        ("significance", 1.5),
        ("significance", "high"),
        ("timestamp_epoch", float("nan")),
        ("timestamp", 0),
    )
    for key, value in malformed:
        with pytest.raises(StoreError, match="malformed affect metadata"):
            _candidates(ids, docs, [{**metas[0], key: value}], dists, "u")
    with pytest.raises(StoreError, match="ragged"):
        _candidates(ids, docs, metas, [0.1, 0.2], "u")
    assert _candidates([], [], [], [], "u") == []


def test_the_mapper_returns_plain_python_values() -> None:
    (candidate,) = _candidates(*_columns(list(np.array([0.25], dtype=np.float32)), ["u"]), "u")
    assert type(candidate.distance) is float and candidate.distance == 0.25
