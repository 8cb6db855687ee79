"""A small fixed embedder for store tests that need no model: words hashed to directions."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence

import numpy as np

__all__ = ["HashingEmbedder"]


class HashingEmbedder:
    """Each word a seeded random direction, a text the unit sum of its words' (16 dimensions).

    Deterministic across processes and runs; texts sharing words are near each other.
    """

    name = "hashing-16"
    dimension = 16

    @staticmethod
    @functools.cache
    def _word(word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        vector: np.ndarray = np.random.default_rng(seed).standard_normal(HashingEmbedder.dimension)
        return vector

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """One unit float32 vector per text (an empty text: the first axis)."""
        rows = []
        for text in texts:
            total = sum((self._word(w) for w in text.lower().split()), np.zeros(self.dimension))
            norm = float(np.linalg.norm(total))
            rows.append(total / norm if norm > 0 else np.eye(self.dimension)[0])
        return np.asarray(rows, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of one query."""
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector
