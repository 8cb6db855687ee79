"""ChromaMemory against an embedded path, the in-process store and a real ``chroma run`` server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from affect_memory.errors import (
    StoreError,
    StoreUnavailableError,
    WrongSpaceError,
)
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.chroma.locks import LOCK_FILE
from affect_memory.memory.chroma.writes import PROGRESS_MIN
from affect_memory.memory.recall.plan import default_analyser, form_weights
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.timestamps import now_moment
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from tests.contracts.memory_contract import MemoryContract, MemoryFactory, record, request
from tests.plugin.memory.hashing_embedder import HashingEmbedder

ROOT = Path(__file__).resolve().parents[3]


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
        assert [r.text for r in reopened.get(["m1"], user_id="ann")] == ["I keep bees."]
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

    def test_a_stopped_server_fails_within_the_timeout_and_recovers(
        self,
        own_chroma_server: tuple[str, int],
        embedder: SentenceTransformerEmbedder,
        opened: list[ChromaMemory],
    ) -> None:
        url, pid = own_chroma_server
        memory = ChromaMemory(url, collection=_name(), embedder=embedder, timeout=1.5)
        opened.append(memory)
        memory.add([record("m1", "I keep bees.")])
        os.kill(pid, signal.SIGSTOP)  # as if the server hung
        try:
            started = time.monotonic()
            # Before: no timeout at all; a turn waited as long as the server did (45 s seen).
            with pytest.raises(StoreUnavailableError) as raised:
                memory.recall("bees", "ann")
            assert f"the Chroma server at {url} did not answer within 1.5 s" in str(raised.value)
            with pytest.raises(StoreUnavailableError, match=r"did not answer within 1\.5 s"):
                asyncio.run(memory.retrieve(request("bees"), user_id="ann"))
            with pytest.raises(StoreUnavailableError, match=r"did not answer within 1\.5 s"):
                ChromaMemory(url, collection=_name(), embedder=embedder, timeout=1.5)
            assert time.monotonic() - started < 60  # three bounded waits, not a hang
        finally:
            os.kill(pid, signal.SIGCONT)
        assert [hit.id for hit in memory.recall("bees", "ann").results] == ["m1"]


# -------------------------------------------------------------------- embedded-only behaviour


def test_an_existing_l2_collection_is_refused_with_the_reason(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, collection="legacy", embedder=embedder) as memory:
        name = memory.collection_for("ann")
    client = chromadb.PersistentClient(
        path=str(tmp_path), settings=Settings(anonymized_telemetry=False)
    )
    metadata = {
        "affect_memory_layout": "user-1",
        "affect_memory_prefix": "legacy",
        "affect_memory_user": "ann",
    }
    client.create_collection(name, metadata=metadata, embedding_function=None)
    client.close()
    with ChromaMemory(tmp_path, collection="legacy", embedder=embedder) as memory:
        with pytest.raises(WrongSpaceError) as raised:
            memory.add([record("m1", "I keep bees.")])
        message = str(raised.value)
        assert "'l2'" in message and "cosine" in message and "--collection" in message
        # Other users' collections are created cosine on the same path.
        memory.add([record("m1", "I keep bees.", user="bob")])
        assert memory.recall("I keep bees.", "bob").results[0].distance < 0.01
        with pytest.raises(WrongSpaceError):
            memory.stats()  # stats lists every user, and ann's collection is unusable


def test_a_collection_filled_by_another_embedder_is_refused(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees.")])

    class Renamed:
        """The session's model under another name (loading a second model costs ~15 s)."""

        name = "some-other-model"
        dimension = embedder.dimension
        embed_documents = staticmethod(embedder.embed_documents)
        embed_query = staticmethod(embedder.embed_query)

    with (
        ChromaMemory(tmp_path, embedder=Renamed()) as other,
        pytest.raises(StoreError, match="'some-other-model'"),
    ):
        other.recall("bees", "ann")


def test_reading_a_missing_store_or_collection_never_creates_one(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with pytest.raises(StoreUnavailableError, match="no memory store"):
        ChromaMemory(tmp_path / "absent", embedder=embedder, create=False)
    assert not (tmp_path / "absent").exists()
    with ChromaMemory(tmp_path, collection="present", embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees.")])
    with pytest.raises(StoreError, match=r"no collection 'memories' .*present: present"):
        ChromaMemory(tmp_path, embedder=embedder, create=False)
    with ChromaMemory(tmp_path, collection="present", embedder=embedder, create=False) as memory:
        assert memory.recall("bees", "nobody").results == ()  # an unknown user reads nothing
        assert memory.count() == 1


def test_opening_creates_no_collection_until_a_user_writes(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, embedder=embedder) as memory:
        client, lock = open_client(parse_location(tmp_path))  # this process shares the lock
        assert memory.recall("bees", "ann").results == () and memory.count() == 0
        assert memory.forget(["m1"], user_id="ann") == () and memory.get(["m1"], user_id="a") == ()
        assert client.list_collections() == []
        memory.add([record("m1", "I keep bees.")])
        (only,) = client.list_collections()
        assert lock is not None
        lock.release()
        assert only.name == memory.collection_for("ann")
        assert only.name.startswith("memories.ann.") and len(only.name) == len("memories.ann.") + 32
        assert only.metadata["affect_memory_user"] == "ann"


_SECOND_PROCESS = textwrap.dedent(
    """
    import sys
    from affect_memory.memory.store import ChromaMemory
    from affect_memory.errors import StoreLockedError
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


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5", 3601])
def test_bad_timeouts_are_refused(timeout: object, embedder: SentenceTransformerEmbedder) -> None:
    with pytest.raises(StoreError, match="timeout must be a number of seconds in"):
        ChromaMemory(":memory:", embedder=embedder, timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["a b", "ab", "a..b", "1.2.3.4", "-ab", "x" * 129, 7])
def test_bad_collection_prefixes_are_refused_before_anything_opens(
    tmp_path: Path, prefix: object
) -> None:
    with pytest.raises(StoreError, match="collection name"):
        ChromaMemory(tmp_path / "x", collection=prefix)  # type: ignore[arg-type]
    assert not (tmp_path / "x").exists()


def test_a_query_vector_averages_its_plans_texts_as_the_users_memories_name_them(
    tmp_path: Path,
) -> None:
    """Two of ann's three memories call her "the user", one says "I": a question about the
    user is embedded as the unit mean of its first- and third-person forms weighted 1/3 and
    2/3 (and by her name, which none says, 0), as numpy's weighted average gives it."""
    now = "2026-06-01T12:00:00Z"
    question = "Where does the user live now?"
    texts = ["The user lives in Porto.", "The user moved flats in May.", "I like the sea."]
    embedder = HashingEmbedder()
    with ChromaMemory(
        tmp_path / "chroma", embedder=embedder, index=tmp_path / "index.sqlite3"
    ) as memory:
        memory.add([record(f"m{i}", text) for i, text in enumerate(texts)])
        analyser = default_analyser()
        plan = analyser.plan(question, "ann", now_moment(now))
        terms = analyser.form_terms("ann")
        flat = [term for group in terms.values() for term in group]
        memories, counts = memory.index.document_frequencies("ann", flat)
        holding = dict(zip(flat, counts, strict=True))
        weights = form_weights(plan.embed_forms, terms, memories, holding)
        assert sorted(weights) == pytest.approx([0, 1 / 3, 2 / 3])
        forms = embedder.embed_documents(list(plan.embed_texts)).astype(np.float64)
        mean = np.average(forms, axis=0, weights=weights)
        got = memory.query_vectors([question], "ann", now=now)
        np.testing.assert_allclose(got, [mean / np.linalg.norm(mean)], rtol=0, atol=1e-12)


class _RecordingEmbedder(HashingEmbedder):
    """``HashingEmbedder``, keeping every batch of texts it was asked to embed."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Record ``texts``, then embed them."""
        self.batches.append(list(texts))
        return super().embed_documents(texts)


@pytest.mark.parametrize(
    ("texts", "forms"),
    [
        (["I live in Porto.", "I moved flats in May."], ["first"]),
        (["The user lives in Porto.", "The user moved flats in May."], ["third"]),
        (["I live in Porto.", "The user moved flats in May."], ["first", "third"]),
    ],
    ids=["first-person", "third-person", "both"],
)
def test_a_way_of_naming_the_owner_no_memory_uses_is_not_embedded(
    tmp_path: Path, texts: list[str], forms: list[str]
) -> None:
    """ann's name is in none of her memories, so a question about her never embeds its
    by-name form; a form her memories do not use weighs 0 and is not embedded either (the
    vector is the weighted mean of the forms that weigh, as the test above checks)."""
    now = "2026-06-01T12:00:00Z"
    question = "Where does the user live now?"
    plan = default_analyser().plan(question, "ann", now_moment(now))
    written = dict(zip(plan.embed_forms, plan.embed_texts, strict=True))
    assert sorted(written) == ["first", "name", "third"]
    embedder = _RecordingEmbedder()
    with ChromaMemory(
        tmp_path / "chroma", embedder=embedder, index=tmp_path / "index.sqlite3"
    ) as memory:
        memory.add([record(f"m{i}", text) for i, text in enumerate(texts)])
        embedder.batches.clear()
        memory.query_vectors([question], "ann", now=now)
        assert embedder.batches == [[written[form] for form in forms]]
        weighed = memory.query_forms([question], "ann", now=now)[0]
        assert [text for text, _ in weighed] == [written[form] for form in forms]
        assert sum(weight for _, weight in weighed) == pytest.approx(1.0)
        embedder.batches.clear()
        found = memory.recall(question, "ann", now=now, top_k=2)
        # the first current-state question also embeds the life topics, once per store
        asked = [
            batch
            for batch in embedder.batches
            if written["first"] in batch or written["third"] in batch
        ]
        assert asked == [[written[form] for form in forms]] and len(found.results) == 2
