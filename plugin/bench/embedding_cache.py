"""An embedder that keeps every vector it computes in a file, so a benchmark embeds a text once.

Every system a benchmark compares then reads the same vector for the same text (the runs are
paired on the same embeddings), and a second run embeds nothing. The file holds the texts
and their vectors (``.npz``), is named after the model, and is replaced whole on ``save``.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from affect_memory.models.embeddings import DelegatingEmbedder, Embedder, check_embeddings

__all__ = ["CachedEmbedder"]


class CachedEmbedder(DelegatingEmbedder):
    """An ``Embedder`` that serves known texts from its cache and embeds only new ones."""

    def __init__(self, inner: Embedder, directory: Path) -> None:
        """Wrap ``inner``, keeping its vectors in ``directory`` (created on ``save``)."""
        super().__init__(inner)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", inner.name)[:60]
        digest = hashlib.sha256(inner.name.encode("utf-8")).hexdigest()[:12]
        self.path = directory / f"{slug}-{digest}.npz"
        self._rows: dict[str, int] = {}
        self._vectors = np.zeros((0, inner.dimension), dtype=np.float32)
        self._dirty = False
        self.embedded = 0
        """Texts this process had to embed (not found in the cache)."""
        if self.path.exists():
            with np.load(self.path, allow_pickle=False) as stored:
                texts = [str(text) for text in stored["texts"]]
                vectors = np.asarray(stored["vectors"], dtype=np.float32)
            if vectors.shape == (len(texts), inner.dimension):
                self._rows = {text: row for row, text in enumerate(texts)}
                self._vectors = vectors

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts``: cached ones as stored, new ones embedded once."""
        missing = list(dict.fromkeys(text for text in texts if text not in self._rows))
        if missing:
            fresh = check_embeddings(self._inner.embed_documents(missing), len(missing))
            start = len(self._vectors)
            self._vectors = np.concatenate([self._vectors, fresh.astype(np.float32)])
            self._rows.update((text, start + offset) for offset, text in enumerate(missing))
            self.embedded += len(missing)
            self._dirty = True
        picked: np.ndarray = self._vectors[[self._rows[text] for text in texts]]
        return picked

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one text."""
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector

    def save(self) -> None:
        """Write the cache if anything new was embedded (a temporary file, then a rename)."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = np.array(sorted(self._rows, key=self._rows.__getitem__), dtype=np.str_)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with temporary.open("wb") as handle:
            np.savez(handle, texts=texts, vectors=self._vectors)
        os.replace(temporary, self.path)
        self._dirty = False
