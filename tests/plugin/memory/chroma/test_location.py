"""Store locations: a relative path names the directory it names now, whatever cwd becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from affect_memory.memory.chroma.location import parse_location
from affect_memory.memory.store import ChromaMemory
from affect_memory.models.embeddings import Embedder
from tests.contracts.memory_contract import record


def test_a_relative_path_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    location = parse_location("data")
    assert location.path == tmp_path / "data"
    assert location.path is not None and location.path.is_absolute()


def test_one_relative_path_from_two_directories_opens_two_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Embedder
) -> None:
    """chromadb keeps a client per path string: ``data`` opened again from another directory
    must not reach the first directory's memories (beside the second one's index)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    first = ChromaMemory("data", embedder=embedder)
    try:
        first.add([record("m1", "the first directory memory", user="u")])
        monkeypatch.chdir(tmp_path / "b")
        with ChromaMemory("data", embedder=embedder) as second:
            assert second.count("u") == 0
            assert second.location == str(tmp_path / "b" / "data")
            assert second.recall("memory", "u").results == ()
        assert first.count("u") == 1
    finally:
        first.close()
