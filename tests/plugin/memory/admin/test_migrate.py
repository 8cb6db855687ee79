"""``migrate``: the old shared collection moved into one collection per user, exactly once,
however often it is killed and rerun, with recall unchanged."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import LegacyLayoutError, MigrationError, StoreError
from affect_memory.memory.admin.migrate import migrate_store, remove_collection
from affect_memory.memory.chroma.collections import DEFAULT_HNSW
from affect_memory.memory.chroma.layout import MIGRATED_KEY
from affect_memory.memory.chroma.location import open_client, parse_location
from affect_memory.memory.chroma.rows import rows_of
from affect_memory.memory.settings import DENSE_RECALL
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import SentenceTransformerEmbedder
from tests.contracts.memory_contract import REFERENCE, record, sample_probes, sample_records

ROOT = Path(__file__).resolve().parents[4]
EXTRA_USERS = ["ünï cödé", "1.2.3.4", "x" * 300]
QUERIES = ["Where do I live?", "What do I drink in the morning?", "How do I get to work?"]


@contextmanager
def _client(location: str | Path) -> Iterator[Any]:
    """A raw Chroma client of the store, closed after: an embedded process caches what it
    read, and must not see a stale store once another process has migrated it."""
    client, lock = open_client(parse_location(str(location)))
    if lock is not None:
        lock.release()
    try:
        yield client
    finally:
        client.close()


def _corpus() -> list[dict[str, Any]]:
    """The sample corpus, plus some of its texts under awkward user ids; ids are unique across
    users, as they had to be in the old layout."""
    base = sample_records()
    extra = [
        {**row, "user_id": user, "id": f"u{number}-{row['id']}"}
        for number, user in enumerate(EXTRA_USERS)
        for row in base[: 12 + 5 * number]
    ]
    return base + extra


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> dict[str, Any]:
    """A per-user store of the corpus (some rows with recall counts), its rows as the old
    layout kept them, and its recall."""
    path = tmp_path_factory.mktemp("reference")
    records = _corpus()
    with ChromaMemory(path, embedder=embedder) as memory:
        memory.add(records)
        users = sorted({r["user_id"] for r in records})
        rows: dict[str, dict[str, Any]] = {}
        with _client(path) as client:
            for user in users:
                rows[user] = client.get_collection(memory.collection_for(user)).get(
                    include=["documents", "metadatas", "embeddings"]
                )
                # The old release's turn writes left list-valued metadata on recalled rows.
                for number, meta in enumerate(rows[user]["metadatas"][:3]):
                    meta["recall_turns"] = [f"turn-{number}", "turn-x"]
        results = _recall(memory, users)
    return {"rows": rows, "users": users, "results": results, "embedder": embedder.name}


def _recall(
    memory: ChromaMemory, users: list[str]
) -> dict[tuple[str, str], list[tuple[str, float]]]:
    probes = [p["query"] for p in sample_probes()[:4]] + QUERIES
    return {
        (user, query): [
            (hit.id, hit.score)
            for hit in memory.recall(query, user, now=REFERENCE, top_k=8).results
        ]
        for user in users
        for query in probes
    }


def _legacy_store(
    client: Any, reference: dict[str, Any], prefix: str = "memories", *, synced: bool = False
) -> Any:
    """The reference rows as the previous release kept them: one cosine collection named like
    the prefix, recording the embedder, every row naming its user (``synced``: its HNSW index
    written to disk on every write, as a big store's is)."""
    sync = {"sync_threshold": 2} if synced else {}
    shared = client.create_collection(
        prefix,
        configuration={"hnsw": {"space": "cosine", **DEFAULT_HNSW.model_dump(), **sync}},
        metadata={"embedder": reference["embedder"]},
        embedding_function=None,
    )
    for user in reference["users"]:
        got = reference["rows"][user]
        shared.add(
            ids=got["ids"],
            embeddings=np.asarray(got["embeddings"]),
            documents=got["documents"],
            metadatas=got["metadatas"],
        )
    return shared


def _build_legacy(
    path: Path | str, reference: dict[str, Any], prefix: str = "memories", *, synced: bool = False
) -> None:
    """A legacy store at ``path``, with nothing of it left open in this process."""
    with _client(path) as client:
        _legacy_store(client, reference, prefix, synced=synced)


def _expected_by_user(reference: dict[str, Any]) -> dict[str, set[str]]:
    return {
        user: {ident for ident in reference["rows"][user]["ids"]} for user in reference["users"]
    }


def _assert_migrated(path: Path | str, reference: dict[str, Any], embedder: Any) -> None:
    """Every memory is in its user's collection once, the old collection is gone, and each
    row (document, metadata, vector) is the one the old collection held."""
    with _client(path) as client:
        _assert_rows_moved(client, path, reference, embedder)


def _assert_rows_moved(
    client: Any, path: Path | str, reference: dict[str, Any], embedder: Any
) -> None:
    names = {c.name for c in client.list_collections()}
    assert "memories" not in names
    expected = _expected_by_user(reference)
    with ChromaMemory(path, embedder=embedder, create=False) as memory:
        stats = memory.stats()
        assert stats.users == {user: len(ids) for user, ids in expected.items()}
        for user in reference["users"]:
            got = client.get_collection(memory.collection_for(user)).get(
                include=["documents", "metadatas", "embeddings"]
            )
            assert sorted(got["ids"]) == sorted(expected[user])
            source = reference["rows"][user]
            by_id = {
                ident: (text, meta, vector)
                for ident, text, meta, vector in zip(
                    source["ids"], source["documents"], source["metadatas"], source["embeddings"],
                    strict=True,
                )
            }  # fmt: skip
            for ident, text, meta, vector in zip(
                got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
            ):
                want_text, want_meta, want_vector = by_id[ident]
                assert (text, meta) == (want_text, want_meta)
                # Chroma normalises a cosine collection's vectors as it stores them: last bits.
                np.testing.assert_allclose(vector, want_vector, rtol=0, atol=1e-6)


def _assert_same_recall(path: Path | str, reference: dict[str, Any], embedder: Any) -> None:
    with ChromaMemory(path, embedder=embedder, create=False) as memory:
        results = _recall(memory, reference["users"])
    for key, hits in reference["results"].items():
        got = results[key]
        assert [ident for ident, _ in got] == [ident for ident, _ in hits], key
        assert [score for _, score in got] == pytest.approx([s for _, s in hits], abs=1e-6)


# ---------------------------------------------------------------- the whole move


def test_an_old_store_is_refused_until_migrated_then_recalls_as_before(
    tmp_path: Path, reference: dict[str, Any], embedder: SentenceTransformerEmbedder
) -> None:
    # What the previous release's recall searched: a where-filtered query of the shared
    # collection, nearest first.
    before: dict[tuple[str, str], list[str]] = {}
    with _client(tmp_path / "chroma") as client:
        shared = _legacy_store(client, reference)
        for user in reference["users"]:
            for query in QUERIES:
                result = shared.query(
                    query_embeddings=np.asarray([embedder.embed_query(query)]),
                    n_results=32,
                    where={"user_id": user},
                    include=["documents", "metadatas", "distances"],
                )
                before[(user, query)] = rows_of(result, user)[0].ids
    with pytest.raises(LegacyLayoutError) as refused:
        ChromaMemory(tmp_path / "chroma", embedder=embedder)
    assert f"`affect-memory migrate --data-dir {tmp_path}`" in str(refused.value)
    report = migrate_store(parse_location(str(tmp_path / "chroma")), progress=False)
    expected = _expected_by_user(reference)
    assert report.users == {user: len(ids) for user, ids in expected.items()}
    assert (report.copied, report.already, report.removed) == (report.count, 0, True)
    _assert_migrated(tmp_path / "chroma", reference, embedder)
    _assert_same_recall(tmp_path / "chroma", reference, embedder)
    with ChromaMemory(tmp_path / "chroma", embedder=embedder, create=False) as memory:
        for (user, query), ids in before.items():
            nearest = memory.candidates(query, user, settings=DENSE_RECALL)  # Chroma's 32
            assert [c.id for c in sorted(nearest, key=lambda c: c.distance)] == ids
    again = migrate_store(parse_location(str(tmp_path / "chroma")), progress=False)
    assert again.status == "nothing" and again.users == report.users


def test_removing_the_old_collection_leaves_no_list_metadata_for_the_next_rows(
    tmp_path: Path,
) -> None:
    """chroma#7594: after a plain delete_collection, the next row written anywhere inherited
    the deleted rows' lists (here bob's first memory came back with alice's recall_turns);
    migrate deletes the records first."""
    with _client(tmp_path) as client:
        old = client.create_collection(
            "memories", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        old.add(
            ids=["a", "b"],
            embeddings=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
            documents=["x", "y"],
            metadatas=[{"user_id": "alice", "recall_turns": ["secret-turn"]},
                       {"user_id": "alice", "recall_turns": ["t2"]}],
        )  # fmt: skip
        remove_collection(client, old, page=1)
        new = client.create_collection(
            "bob", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        new.add(ids=["z"], embeddings=[[0.0, 0.0, 1.0]], documents=["bob"],
                metadatas=[{"user_id": "bob"}])  # fmt: skip
        assert new.get(include=["metadatas"])["metadatas"] == [{"user_id": "bob"}]
        assert "memories" not in {c.name for c in client.list_collections()}


# ---------------------------------------------------------------- killed at random points


def _migrate_process(path: Path, batch: int, *flags: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "affect_memory", "migrate", "--store", str(path), "--batch",
         str(batch), "--json", *flags],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


def _kill_part_way(process: subprocess.Popen[bytes], label: str, updates: int) -> bool:
    """SIGKILL ``process`` once its progress bar ``label`` has moved ``updates`` times (read
    from its stderr as it runs); False if it finished first."""
    assert process.stderr is not None
    seen = b""
    while True:
        ready, _, _ = select.select([process.stderr], [], [], 0.05)
        if ready:
            chunk = os.read(process.stderr.fileno(), 65536)
            if not chunk:
                process.wait(timeout=60)
                return False
            seen += chunk
            if seen.count(label.encode()) > updates:  # the bar repeats its label each refresh
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
                return True
        elif process.poll() is not None:
            return False


@pytest.mark.slow
def test_migrate_killed_at_random_points_and_rerun_moves_every_memory_once(
    tmp_path: Path, reference: dict[str, Any], embedder: SentenceTransformerEmbedder
) -> None:
    """Each run is killed at a random point of its copy or its removal (read from its own
    progress bar), up to 10 times; then one runs to the end."""
    store = tmp_path / "chroma"
    _build_legacy(store, reference)
    rng = random.Random(1313)
    kills: list[str] = []  # the phase each kill left the store in
    pages = -(-sum(len(rows["ids"]) for rows in reference["rows"].values()) // 3)
    for attempt in range(10):
        phase = _phase(store)
        if phase == "done":
            break
        # Six runs killed in the copy (each rescans from the start), then in the removal.
        label = "migrate: copy" if attempt < 6 and phase == "copying" else "migrate: remove old"
        process = _migrate_process(store, 3, "--progress")
        if _kill_part_way(process, label, rng.randint(0, pages)):
            kills.append(_phase(store))
    assert kills.count("copying") >= 3 and "removing" in kills, kills
    process = _migrate_process(store, 3, "--no-progress")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()
    report = json.loads(out)
    expected = _expected_by_user(reference)
    assert report["users"] == {user: len(ids) for user, ids in sorted(expected.items())}
    _assert_migrated(store, reference, embedder)
    _assert_same_recall(store, reference, embedder)


def _phase(path: Path) -> str:
    """Where a killed migration stopped: copying, removing, or done."""
    from chromadb.errors import NotFoundError

    with _client(path) as client:
        try:
            old = client.get_collection("memories")
        except NotFoundError:
            return "done"
        return "removing" if (old.metadata or {}).get(MIGRATED_KEY) else "copying"


def test_migrate_over_a_chroma_server(
    tmp_path: Path,
    chroma_server: str,
    reference: dict[str, Any],
    embedder: SentenceTransformerEmbedder,
) -> None:
    prefix = f"legacy-{tmp_path.name[-12:].strip('_-') or 'x'}"
    _build_legacy(chroma_server, reference, prefix=prefix)
    with pytest.raises(
        LegacyLayoutError,
        match=rf"`affect-memory migrate --chroma {chroma_server} --collection {prefix}`",
    ):
        ChromaMemory(chroma_server, collection=prefix, embedder=embedder)
    process = subprocess.run(
        [sys.executable, "-m", "affect_memory", "migrate", "--chroma", chroma_server,
         "--collection", prefix, "--batch", "50", "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )  # fmt: skip
    assert process.returncode == 0, process.stderr
    count = sum(len(ids) for ids in _expected_by_user(reference).values())
    assert process.stdout.strip() == (
        f"migrated {count:,} memories of {len(reference['users'])} users from collection "
        f"{prefix!r} into one collection per user at {chroma_server}; the old collection is "
        "removed"
    )
    with ChromaMemory(chroma_server, collection=prefix, embedder=embedder, create=False) as memory:
        assert memory.count() == count
        for user in reference["users"]:
            hits = memory.recall(QUERIES[0], user, now=REFERENCE, top_k=8).results
            want = reference["results"][(user, QUERIES[0])]
            assert [h.id for h in hits] == [i for i, _ in want]


# ---------------------------------------------------------------- refusals


def _one_row_store(client: Any, metadata: dict[str, Any], space: str = "cosine") -> Any:
    shared = client.create_collection(
        "memories", configuration={"hnsw": {"space": space}}, embedding_function=None
    )
    shared.add(
        ids=["ok", "bad"],
        embeddings=[[1.0] + [0.0] * 383, [0.0, 1.0] + [0.0] * 382],
        documents=["fine", "broken"],
        metadatas=[{"user_id": "ann", "timestamp": "2026-01-01"}, metadata],
    )
    return shared


@pytest.mark.parametrize("metadata", [{"timestamp": "2026-01-01"}, {"user_id": ""}, {"user_id": 7}])
def test_a_row_without_a_usable_user_stops_migrate_before_anything_is_removed(
    tmp_path: Path, metadata: dict[str, Any]
) -> None:
    with _client(tmp_path) as client:
        shared = _one_row_store(client, metadata)
        with pytest.raises(MigrationError, match="record 'bad' of the old collection") as raised:
            migrate_store(parse_location(str(tmp_path)), progress=False)
        assert "\n" not in str(raised.value) and "nothing was removed" in str(raised.value)
        assert shared.count() == 2


def test_a_different_row_under_the_same_id_stops_migrate(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    from affect_memory.memory.chroma.layout import collection_metadata, user_collection_name

    with _client(tmp_path) as client:
        shared = _one_row_store(client, {"user_id": "ann", "timestamp": "2026-01-02"})
        own = client.create_collection(
            user_collection_name("memories", "ann"),
            configuration={"hnsw": {"space": "cosine"}},
            metadata=collection_metadata("memories", "ann", None),
            embedding_function=None,
        )
        own.add(ids=["bad"], embeddings=[[0.0, 1.0] + [0.0] * 382], documents=["other"],
                metadatas=[{"user_id": "ann"}])  # fmt: skip
        with pytest.raises(MigrationError, match=r"memory 'bad' of user 'ann' .* differs"):
            migrate_store(parse_location(str(tmp_path)), progress=False)
        assert shared.count() == 2


def test_an_old_collection_in_another_space_is_not_migrated(tmp_path: Path) -> None:
    with _client(tmp_path) as client:
        _one_row_store(client, {"user_id": "ann"}, space="l2")
        with pytest.raises(MigrationError, match=r"'l2' distance space.* nothing was changed"):
            migrate_store(parse_location(str(tmp_path)), progress=False)


def test_migrate_from_the_shell_reports_one_line_errors(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "affect_memory", "migrate", *args], cwd=ROOT,
            capture_output=True, text=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            timeout=120,
        )  # fmt: skip

    missing = run("--data-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no memory store at" in missing.stderr
    (tmp_path / "chroma").mkdir()
    empty = run("--data-dir", str(tmp_path))
    assert empty.returncode == 2 and "no collection 'memories'" in empty.stderr
    bad = run("--data-dir", str(tmp_path), "--batch", "0")
    assert bad.returncode == 2 and "--batch must be a whole number" in bad.stderr
    both = run("--chroma", "http://127.0.0.1:1", "--store", str(tmp_path))
    assert both.returncode == 2 and "not both" in both.stderr


def test_a_store_already_in_the_new_layout_has_nothing_to_migrate(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with ChromaMemory(tmp_path, embedder=embedder) as memory:
        memory.add([record("m1", "I keep bees."), record("m1", "I ride.", user="bob")])
    report = migrate_store(parse_location(str(tmp_path)), progress=False)
    assert (report.status, report.users) == ("nothing", {"ann": 1, "bob": 1})


def test_bad_pages_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="page must be"):
        migrate_store(parse_location(str(tmp_path)), page=0)


# ---------------------------------------------------------------- a torn old collection


def _tear_old_segment(path: Path, name: str = "memories") -> None:
    """Truncate the old collection's HNSW metadata file to half, as a kill mid-rewrite does."""
    import sqlite3

    from affect_memory.memory.chroma.segment_repair import METADATA_FILE

    connection = sqlite3.connect(path / "chroma.sqlite3")
    try:
        (segment,) = connection.execute(
            "SELECT s.id FROM segments s JOIN collections c ON c.id = s.collection "
            "WHERE s.scope = 'VECTOR' AND c.name = ?",
            (name,),
        ).fetchone()
    finally:
        connection.close()
    pickle_file = path / segment / METADATA_FILE
    with open(pickle_file, "r+b") as handle:
        handle.truncate(pickle_file.stat().st_size // 2)


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "affect_memory", *args], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip


_KILLED_MIGRATE = """
import os, signal, sys
from affect_memory.memory.admin import migrate

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

def after(count, original):
    calls = [0]
    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] > count:
            die()
        return original(*args, **kwargs)
    return wrapped

point = sys.argv[2]
if point == "copy":  # two pages copied
    migrate._copy_page = after(2, migrate._copy_page)
elif point == "verify":  # every row copied, nothing verified or marked
    migrate._verify = after(0, migrate._verify)
elif point == "marked":  # verified and marked, nothing removed
    migrate.remove_collection = after(0, migrate.remove_collection)
else:  # two pages of the old collection deleted
    removing = migrate.remove_collection
    def remove_two_pages(client, collection, *, page, step=None):
        removing(client, collection, page=page, step=after(2, lambda n: None))
    migrate.remove_collection = remove_two_pages
migrate.migrate_store(sys.argv[1], page=10, progress=False)
"""


def _kill_migrate_at(store: Path, point: str) -> None:
    """Run migrate in a process that SIGKILLs itself at ``point`` (no timing involved)."""
    process = subprocess.run(
        [sys.executable, "-c", _KILLED_MIGRATE, str(store), point], cwd=ROOT,
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert process.returncode == -signal.SIGKILL, process.stderr


@pytest.mark.parametrize(
    ("point", "phase"),
    [
        ("copy", "copying"),
        ("verify", "copying"),
        ("marked", "removing"),
        ("remove-old", "removing"),
    ],
)
def test_a_torn_old_collection_after_a_kill_never_blocks_the_users_and_migrate_finishes(
    tmp_path: Path,
    reference: dict[str, Any],
    embedder: SentenceTransformerEmbedder,
    point: str,
    phase: str,
) -> None:
    """Issue 23: a kill in any phase of migrate, then the old collection's HNSW metadata torn;
    every user's recall and stats still run (once every row was verified), and a rerun drops
    the old collection (re-embedding only rows whose vectors the tear lost)."""
    store = tmp_path / "chroma"
    _build_legacy(store, reference, synced=True)
    _kill_migrate_at(store, point)
    assert _phase(store) == phase
    _tear_old_segment(store)
    data_dir = ["--store", str(store)]
    if phase == "removing":
        stats = _run_cli("stats", "--data-dir", str(tmp_path), "--json")
        assert stats.returncode == 0, stats.stderr
        # Reported once, in one line, with the fix.
        assert stats.stderr.count("\n") == 1 and "cannot be read" in stats.stderr
        assert "`affect-memory migrate --data-dir" in stats.stderr
        with ChromaMemory(store, embedder=embedder, create=False) as memory:
            expected = _expected_by_user(reference)
            assert memory.stats().users == {user: len(ids) for user, ids in expected.items()}
            for user in reference["users"]:
                assert memory.recall(QUERIES[0], user, now=REFERENCE, top_k=8).results
    else:
        refused = _run_cli("stats", "--data-dir", str(tmp_path))
        assert refused.returncode == 2 and "affect-memory migrate" in refused.stderr
        assert "Traceback" not in refused.stderr
    rerun = _run_cli("migrate", *data_dir, "--batch", "10", "--no-progress", "--json")
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    expected = _expected_by_user(reference)
    assert report["removed"] and report["users"] == {
        user: len(ids) for user, ids in sorted(expected.items())
    }
    assert _phase(store) == "done"
    if phase == "removing":  # every vector came across: recall is unchanged
        _assert_same_recall(store, reference, embedder)
    stats = _run_cli("stats", "--data-dir", str(tmp_path), "--json")
    assert stats.returncode == 0 and "cannot be read" not in stats.stderr, stats.stderr
    with ChromaMemory(store, embedder=embedder, create=False) as memory:
        for user in reference["users"]:
            assert memory.recall(QUERIES[0], user, now=REFERENCE, top_k=8).results
