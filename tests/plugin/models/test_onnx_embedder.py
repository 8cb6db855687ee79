"""The ONNX embedder against sentence-transformers: same tokens, same vectors, same stores."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import EmbeddingError
from affect_memory.memory.store import ChromaMemory
from affect_memory.models import onnx_embedder
from affect_memory.models.embeddings import Embedder, SentenceTransformerEmbedder
from affect_memory.models.onnx_embedder import (
    BATCH_THREADS_ENV,
    QUERY_TEXTS,
    THREADS_ENV,
    OnnxEmbedder,
    every_core,
)
from tests.plugin.models.helpers import EDGE_CASES, LONG_TEXTS, model_copy, parity_corpus

PARITY = 1e-5
"""The issue's bound on 1 - cosine between the two backends' vectors of a text."""


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return parity_corpus()


@pytest.fixture(scope="module")
def reference(corpus: list[str], st_embedder: SentenceTransformerEmbedder) -> np.ndarray:
    """sentence-transformers' vectors of the corpus."""
    return st_embedder.embed_documents(corpus)


def _worst_cosine_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    cosines = (ours * theirs).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    )
    return float((1.0 - cosines).max())


@pytest.mark.parametrize(("batch_size", "threads"), [(1, 1), (7, 2), (64, 1), (64, 0)])
def test_vectors_match_sentence_transformers_within_1e_5_cosine(
    corpus: list[str], reference: np.ndarray, batch_size: int, threads: int
) -> None:
    model = OnnxEmbedder(batch_size=batch_size, threads=threads, batch_threads=threads)
    ours = model.embed_documents(corpus)
    assert ours.shape == reference.shape and ours.dtype == np.float32
    assert _worst_cosine_gap(ours, reference) <= PARITY
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_single_queries_match_too(
    embedder: Embedder, st_embedder: SentenceTransformerEmbedder
) -> None:
    for text in [*EDGE_CASES[:12], *LONG_TEXTS[-3:], "Where did I go on holiday?"]:
        ours, theirs = embedder.embed_query(text), st_embedder.embed_query(text)
        assert _worst_cosine_gap(ours[None, :], theirs[None, :]) <= PARITY, text[:40]


def test_the_input_order_is_kept_whatever_the_lengths(embedder: Embedder) -> None:
    texts = ["short", " ".join(["long"] * 300), "medium length text here", ""]
    batched = embedder.embed_documents(texts)
    for row, text in enumerate(texts):
        np.testing.assert_allclose(batched[row], embedder.embed_query(text), atol=1e-6)


def test_word_pieces_are_sentence_transformers_own_cut_at_256(
    corpus: list[str], st_embedder: SentenceTransformerEmbedder
) -> None:
    ours = OnnxEmbedder()
    tokenizer, _session = ours._ready()
    encoded = st_embedder._loaded().tokenize(corpus)
    theirs = [
        ids[mask.bool()].tolist()
        for ids, mask in zip(encoded["input_ids"], encoded["attention_mask"], strict=True)
    ]
    assert [encoding.ids for encoding in tokenizer.encode_batch(corpus)] == theirs
    cut = [len(tokenizer.encode(text).ids) for text in LONG_TEXTS[-3:]]
    assert cut == [256, 256, 256]  # the bundled tokenizer.json alone would cut at 128


def test_a_store_filled_by_sentence_transformers_is_recalled_on_onnx(
    tmp_path: Path, st_embedder: SentenceTransformerEmbedder
) -> None:
    # Same name, interchangeable vectors: an existing store needs no re-embedding.
    texts = [
        "I adopted a grey cat called Miso.",
        "My brother moved to Lisbon last spring.",
        "The dentist said my teeth are fine.",
    ]
    now = datetime(2026, 12, 1, tzinfo=UTC).isoformat()
    records = [
        {"id": f"m{i}", "text": text, "user_id": "alice", "timestamp": now}
        for i, text in enumerate(texts)
    ]
    with ChromaMemory(tmp_path / "chroma", embedder=st_embedder, progress=False) as old:
        old.add(records)
        before = old.recall("tell me about my pet", "alice", now=now, top_k=3)
    with ChromaMemory(tmp_path / "chroma", progress=False) as reopened:
        assert isinstance(reopened.embedder, OnnxEmbedder)
        after = reopened.recall("tell me about my pet", "alice", now=now, top_k=3)
    assert [hit.id for hit in after.results] == [hit.id for hit in before.results]
    assert after.results[0].id == "m0"
    for new, old_hit in zip(after.results, before.results, strict=True):
        assert new.distance == pytest.approx(old_hit.distance, abs=1e-5)


def test_models_the_graph_does_not_reproduce_are_refused(tmp_path: Path) -> None:
    cls = model_copy(
        tmp_path / "cls",
        pooling={"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
    )
    with pytest.raises(EmbeddingError, match=r"pooling \['pooling_mode_cls_token'\].*Sentence"):
        OnnxEmbedder(cls).embed_query("hello")
    lower = model_copy(tmp_path / "lower", **{"sentence_bert_config.json": {"do_lower_case": True}})
    with pytest.raises(EmbeddingError, match="do_lower_case"):
        OnnxEmbedder(lower).embed_query("hello")
    long = model_copy(tmp_path / "long", **{"sentence_bert_config.json": {"max_seq_length": 600}})
    with pytest.raises(EmbeddingError, match=r"max_seq_length 600 is outside 2\.\.512"):
        OnnxEmbedder(long).embed_query("hello")


def test_missing_model_files_are_named(tmp_path: Path) -> None:
    copy = model_copy(tmp_path / "copy")
    (copy / "tokenizer.json").unlink()
    (copy / "model.safetensors").unlink()
    with pytest.raises(EmbeddingError, match=r"lacks model\.safetensors, tokenizer\.json"):
        OnnxEmbedder(copy).embed_query("hello")


def test_another_model_directory_is_named_by_its_path(tmp_path: Path) -> None:
    copy = model_copy(tmp_path / "copy")
    other = OnnxEmbedder(copy)
    assert other.name == str(copy) and other.dimension == 384
    assert OnnxEmbedder().name == "all-MiniLM-L6-v2"


def test_threads_come_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert OnnxEmbedder().threads == 1
    monkeypatch.setenv(THREADS_ENV, "3")
    assert OnnxEmbedder().threads == 3 and OnnxEmbedder(threads=0).threads == 0
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(EmbeddingError, match=f"{THREADS_ENV} must be an integer >= 0.*'many'"):
        OnnxEmbedder()
    for bad in (-1, True, 1.5):
        with pytest.raises(EmbeddingError, match="threads must be an integer >= 0"):
            OnnxEmbedder(threads=bad)  # type: ignore[arg-type]
        with pytest.raises(EmbeddingError, match="batch_threads must be an integer >= 0"):
            OnnxEmbedder(threads=1, batch_threads=bad)  # type: ignore[arg-type]
    monkeypatch.delenv(THREADS_ENV)
    monkeypatch.delenv(BATCH_THREADS_ENV, raising=False)
    assert OnnxEmbedder().batch_threads == 0  # every core
    monkeypatch.setenv(BATCH_THREADS_ENV, "2")
    assert OnnxEmbedder().batch_threads == 2 and OnnxEmbedder(batch_threads=1).batch_threads == 1
    monkeypatch.setenv(BATCH_THREADS_ENV, "all")
    with pytest.raises(EmbeddingError, match=f"{BATCH_THREADS_ENV} must be an integer >= 0"):
        OnnxEmbedder()
    with pytest.raises(EmbeddingError, match="query_texts must be an integer >= 0"):
        OnnxEmbedder(query_texts=-1)


def test_a_call_of_a_few_texts_runs_on_the_query_threads_and_a_larger_one_side_by_side(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[int] = []
    shared: list[tuple[int, int]] = []
    session, run_all = onnx_embedder._session, onnx_embedder._run_all

    def recorded_session(model_dir: Path, key: str, threads: int) -> object:
        opened.append(threads)
        return session(model_dir, key, threads)

    def recorded_run_all(run: Any, batches: list[np.ndarray], workers: int) -> None:
        shared.append((workers, len(batches)))
        run_all(run, batches, workers)

    texts = [f"where did I park on day {day}?" for day in range(64)]
    alone = OnnxEmbedder(threads=1, batch_threads=1).embed_documents(texts)
    monkeypatch.setattr(onnx_embedder, "_session", recorded_session)
    monkeypatch.setattr(onnx_embedder, "_run_all", recorded_run_all)
    model = OnnxEmbedder(threads=2, batch_threads=3)
    for count in (1, QUERY_TEXTS, QUERY_TEXTS + 1, 64):
        np.testing.assert_allclose(model.embed_documents(texts[:count]), alone[:count], atol=1e-6)
    model.embed_query("where did I park?")
    # a query: two intra-op threads, one batch; a larger call: the one-thread session on three
    # threads, taking sub-batches of at least 8 texts (about four each)
    assert opened == [2, 2, 1, 1, 2]
    assert shared == [(1, 1), (1, 1), (3, 1), (3, 8), (1, 1)]
    assert [model.threads_for(n) for n in (1, QUERY_TEXTS, QUERY_TEXTS + 1, 512)] == [2, 2, 3, 3]
    assert OnnxEmbedder(threads=1, batch_threads=0).threads_for(512) == every_core()
    assert OnnxEmbedder(threads=1, batch_threads=2, query_texts=0).threads_for(1) == 2


def test_a_failed_sub_batch_is_raised_once_no_other_is_still_running() -> None:
    running: list[int] = []
    done: list[int] = []

    def run(rows: np.ndarray) -> None:
        running.append(int(rows[0]))
        try:
            if int(rows[0]) == 2:
                raise EmbeddingError("the graph failed")
            done.append(int(rows[0]))
        finally:
            running.remove(int(rows[0]))

    batches = [np.array([number]) for number in range(40)]
    with pytest.raises(EmbeddingError, match="the graph failed"):
        onnx_embedder._run_all(run, batches, 3)
    assert running == [] and 2 not in done
    onnx_embedder._run_all(run, batches[3:], 3)  # the pool takes the next call as before
    assert sorted(done)[-37:] == list(range(3, 40))
