"""The erasure's own steps: only bare segment directories of the store are removed, and the
opening of a store finishes an erasure a killed process left, unless a live eraser holds the
user or the erasure is another prefix's.

Killing the real ``erase`` command after each step is ``test_erasure_kills.py``'s; erasing
among other writes and kills, the index state machine's (``index/consistency``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from affect_memory.memory.erasure import finish_pending_erasures, record_intent, remove_segments
from affect_memory.memory.index.storage.opening import IndexTarget, open_backend
from affect_memory.memory.store import ChromaMemory
from tests.plugin.memory.hashing_embedder import HashingEmbedder

STAMP = "2025-03-01T12:00:00Z"


def _collections(path: Path | None) -> Any:
    """What ``remove_segments`` reads of a store's collections: where the store lives."""
    kind = "path" if path is not None else "url"
    return SimpleNamespace(location=SimpleNamespace(kind=kind, path=path))


def test_only_bare_segment_directories_and_their_damaged_copies_are_removed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "chroma"
    for name in ("seg1", "seg1.damaged-1", "seg1.damaged-2", "seg2", ".hidden", "keep"):
        (store / name).mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    asked = ["seg1", "seg2", "../outside", ".hidden", "", "missing"]
    assert remove_segments(_collections(store), asked) == 4
    assert sorted(p.name for p in store.iterdir()) == [".hidden", "keep"]
    assert (tmp_path / "outside").is_dir()
    assert remove_segments(_collections(None), ["keep"]) == 0  # a server keeps its own files


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    with ChromaMemory(
        tmp_path / "chroma", embedder=HashingEmbedder(), index=tmp_path / "index.sqlite3"
    ) as opened:
        opened.add(
            [
                {"id": "m1", "text": "bees", "user_id": user, "timestamp": STAMP}
                for user in ("ann", "bob")
            ]
        )
        yield opened


def test_an_erasure_left_behind_is_finished_unless_a_live_eraser_holds_the_user(
    memory: ChromaMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key, name = memory.index.user_key("ann")
    record_intent(memory.index.backend, key, "ann", name, [])  # a killed eraser's first step
    live = open_backend(IndexTarget("file", path=tmp_path / "index.sqlite3"), lock_timeout=5)
    try:
        with live.lock(name, timeout=5):
            assert finish_pending_erasures(memory._collections, memory.index) == []
            assert memory.count("ann") == 1
    finally:
        live.close()
    with caplog.at_level(logging.WARNING):
        assert finish_pending_erasures(memory._collections, memory.index) == ["ann"]
    assert "finished the erasure of user 'ann'" in caplog.text
    assert (memory.count("ann"), memory.count("bob")) == (0, 1)
    assert finish_pending_erasures(memory._collections, memory.index) == []  # nothing owed


def test_an_erasure_of_another_prefix_is_left_to_its_store(
    memory: ChromaMemory, tmp_path: Path
) -> None:
    with ChromaMemory(
        tmp_path / "chroma",
        collection="other",
        embedder=HashingEmbedder(),
        index=tmp_path / "index.sqlite3",
    ) as other:
        other.add([{"id": "m1", "text": "piano", "user_id": "ann", "timestamp": STAMP}])
        key, name = other.index.user_key("ann")
        record_intent(other.index.backend, key, "ann", name, [])
        assert finish_pending_erasures(memory._collections, memory.index) == []
        assert (memory.count("ann"), other.count("ann")) == (1, 1)
        assert finish_pending_erasures(other._collections, other.index) == ["ann"]
        assert (memory.count("ann"), other.count("ann")) == (1, 0)
