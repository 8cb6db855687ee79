"""The model tests' fixtures: the bundled model on sentence-transformers (torch), loaded once."""

from __future__ import annotations

import pytest

from affect_memory.models.embeddings import SentenceTransformerEmbedder


@pytest.fixture(scope="session")
def st_embedder() -> SentenceTransformerEmbedder:
    """The bundled all-MiniLM-L6-v2 on sentence-transformers and torch (the reference)."""
    model = SentenceTransformerEmbedder()
    assert model.dimension == 384
    return model
