"""The exemplar vectors on disk: computed once per model and texts, damaged files recomputed,
and a gate in a new process classifying exactly as the first without embedding the preset."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.gate.vector_cache import cached_vectors, vectors_path
from affect_memory.models.cache import CACHE_ENV
from tests.plugin.gate.helpers import CountingEmbedder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(path))
    return path


class Counter:
    """An ``embed`` callable that counts its calls and returns fixed unit rows."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = np.array([[len(text), 1.0, 2.0] for text in texts], dtype=np.float32)
        result: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return result


def test_vectors_are_computed_once_per_key_and_texts(cache: Path) -> None:
    embed = Counter()
    first = cached_vectors("model-a", ["one", "three"], embed)
    again = cached_vectors("model-a", ["one", "three"], embed)
    assert embed.calls == 1
    np.testing.assert_array_equal(again, first)
    cached_vectors("model-b", ["one", "three"], embed)  # another model
    cached_vectors("model-a", ["one", "three", "four"], embed)  # other texts
    cached_vectors("model-a", ["onethree"], embed)  # not the same list joined differently
    assert embed.calls == 4
    assert len(list((cache / "vectors").iterdir())) == 4


@pytest.mark.parametrize(
    "damage",
    [
        b"not a numpy file",
        b"",
        "wrong shape",
        "wrong dtype",
    ],
)
def test_a_damaged_or_mismatched_file_is_recomputed_and_replaced(
    cache: Path, caplog: pytest.LogCaptureFixture, damage: bytes | str
) -> None:
    texts = ["alpha", "beta"]
    embed = Counter()
    expected = cached_vectors("key", texts, embed)
    path = vectors_path("key", texts)
    if damage == "wrong shape":
        np.save(path, np.zeros((3, 3), dtype=np.float32))
    elif damage == "wrong dtype":
        np.save(path, expected.astype(np.float64))
    else:
        assert isinstance(damage, bytes)
        path.write_bytes(damage)
    with caplog.at_level(logging.WARNING, logger="affect_memory.gate.vector_cache"):
        recomputed = cached_vectors("key", texts, embed)
    assert embed.calls == 2 and "recomputing them" in caplog.text
    np.testing.assert_array_equal(recomputed, expected)
    np.testing.assert_array_equal(np.load(path), expected)


def test_an_unwritable_cache_only_means_recomputing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "/dev/null/affect-memory")
    embed = Counter()
    cached_vectors("key", ["a"], embed)
    cached_vectors("key", ["a"], embed)
    assert embed.calls == 2


class KeyedEmbedder(CountingEmbedder):
    """A counting wrapper that also names its vectors, as ``OnnxEmbedder`` does."""

    @property
    def cache_key(self) -> str:
        return str(self.inner.cache_key)


def test_a_new_process_gate_reads_the_exemplars_from_disk_and_classifies_alike(
    cache: Path, embedder: Any
) -> None:
    texts = ["I'm so sorry about yesterday", "why is the sky blue?", "you are useless", "ok"]
    first_process = KeyedEmbedder(embedder)
    gate = EmbeddingIntentGate(embedder=first_process)
    first = gate.classify_many(texts)
    preset = sum(len(examples) for examples in gate.exemplars.intents.values())
    assert first_process.batches == [preset, len(texts)]
    # A new embedder object stands for a new process: nothing in memory is shared with it.
    next_process = KeyedEmbedder(embedder)
    again = EmbeddingIntentGate(embedder=next_process).classify_many(texts)
    assert next_process.batches == [len(texts)]  # only the messages: the preset came from disk
    assert again == first
    assert len(list((cache / "vectors").iterdir())) == 1


def test_an_embedder_without_a_cache_key_keeps_nothing_on_disk(cache: Path, embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    EmbeddingIntentGate(embedder=counting).classify("hello there")
    assert not (cache / "vectors").exists()
