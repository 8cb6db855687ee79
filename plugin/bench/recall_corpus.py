"""The recall benchmark's corpora and the exact search its recall@k is judged against.

* random: unit vectors over 10 users (so the user filter matches ~10%), queried with random
  unit vectors;
* real: N templated sentences embedded by the bundled model (cached as ``.npy`` beside the
  store), queried with held-out sentences.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from affect_memory.bench.common import memory_records, sentences
from affect_memory.memory.chroma.collections import HnswParams
from affect_memory.models.embeddings import Embedder, check_embeddings

__all__ = [
    "DIMENSION",
    "RANDOM_EMBEDDER",
    "WARMUP_QUERIES",
    "Corpus",
    "Exact",
    "hnsw_tag",
    "progress_bar",
    "random_corpus",
    "real_corpus",
    "recall_fraction",
    "unit_vectors",
]

DIMENSION = 384
"""The bundled model's vector length, which random vectors take too."""
WARMUP_QUERIES = 3
"""Queries run first and not measured."""
RANDOM_EMBEDDER = "random-unit-vectors-384"
"""The embedder name recorded on random-vector collections."""


@contextmanager
def progress_bar(
    total: int, enabled: bool, label: str, unit: str
) -> Iterator[Callable[[int], None]]:
    """A tqdm bar on stderr (shown only on a terminal), or a no-op."""
    if not enabled:
        yield lambda count: None
        return
    from tqdm import tqdm

    with tqdm(
        total=total, desc=label, unit=unit, file=sys.stderr, leave=False, disable=None
    ) as bar:
        yield bar.update


def unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` random unit vectors of the model's dimension."""
    vectors = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def hnsw_tag(hnsw: HnswParams) -> str:
    """A short name of HNSW settings, for collection names."""
    return f"c{hnsw.ef_construction}-s{hnsw.ef_search}-m{hnsw.max_neighbors}"


@dataclass(frozen=True)
class Corpus:
    """Stored texts, ids, owners and vectors, and the queries asked of them."""

    kind: str
    texts: list[str]
    ids: np.ndarray
    owners: np.ndarray
    vectors: np.ndarray
    query_texts: list[str]
    query_vectors: np.ndarray | None
    """Vectors of the queries; None means the query text's real embedding is the query."""
    records: Callable[[], list[dict[str, Any]]]
    embedder_name: str


def random_corpus(n: int, *, queries: int, users: int, seed: int) -> Corpus:
    """``n`` random unit vectors over ``users`` users, and random query vectors."""
    rng = np.random.default_rng([seed, n])
    texts = [f"synthetic memory {i}" for i in range(n)]
    return Corpus(
        kind="random",
        texts=texts,
        ids=np.array([f"m{i:07d}" for i in range(n)]),
        owners=np.array([f"user-{i % users:02d}" for i in range(n)]),
        vectors=unit_vectors(rng, n),
        query_texts=sentences(queries + WARMUP_QUERIES, seed=seed + 1),
        query_vectors=unit_vectors(rng, queries + WARMUP_QUERIES),
        records=lambda: memory_records(texts, users=users, seed=seed),
        embedder_name=RANDOM_EMBEDDER,
    )


def real_corpus(
    n: int, *, queries: int, users: int, seed: int, model: Embedder, root: Path, progress: bool
) -> tuple[Corpus, float | None]:
    """N sentences, embedded once and cached beside the store, and held-out query sentences.

    ``sentences`` draws in order, so the first N of a longer draw are the corpus and the rest
    are queries no memory repeats; only the corpus is cached (queries are the embed stage).
    """
    texts = sentences(n + queries + WARMUP_QUERIES, seed=seed)
    stored, asked = texts[:n], texts[n:]
    digest = hashlib.sha256("\n".join(stored).encode()).hexdigest()[:12]
    cache = root / f"real-{n}-{digest}.npy"
    seconds: float | None = None
    if cache.exists():
        vectors = check_embeddings(np.load(cache), n)
    else:
        start = time.perf_counter()
        parts = []
        with progress_bar(n, progress, "embed real corpus", "memory") as step:
            for first in range(0, n, 512):
                chunk = stored[first : first + 512]
                parts.append(check_embeddings(model.embed_documents(chunk), len(chunk)))
                step(len(chunk))
        vectors = np.concatenate(parts)
        seconds = time.perf_counter() - start
        partial = cache.with_name(cache.name + ".partial.npy")
        np.save(partial, vectors)
        partial.replace(cache)  # never leave a half-written cache behind
    corpus = Corpus(
        kind="real",
        texts=stored,
        ids=np.array([f"m{i:07d}" for i in range(n)]),
        owners=np.array([f"user-{i % users:02d}" for i in range(n)]),
        vectors=vectors,
        query_texts=asked,
        query_vectors=None,
        records=lambda: memory_records(stored, users=users, seed=seed),
        embedder_name=model.name,
    )
    return corpus, seconds


class Exact:
    """Brute-force cosine top-k over the stored vectors, overall or within one user's rows."""

    def __init__(self, corpus: Corpus) -> None:
        """Index the corpus's vectors by owner."""
        self._vectors = corpus.vectors
        self._ids = corpus.ids
        self._by_user = {
            user: np.flatnonzero(corpus.owners == user) for user in np.unique(corpus.owners)
        }

    def top(self, vector: np.ndarray, k: int, user: str | None) -> set[str]:
        """The ids of the k nearest rows (of ``user`` when given)."""
        rows = self._by_user[user] if user is not None else None
        matrix = self._vectors if rows is None else self._vectors[rows]
        similarity = matrix @ vector
        k = min(k, similarity.shape[0])
        best = np.argpartition(-similarity, k - 1)[:k]
        picked = best if rows is None else rows[best]
        return set(self._ids[picked].tolist())


def recall_fraction(found: Sequence[str], exact: set[str]) -> float:
    """The share of the exact top k that ``found`` holds."""
    return len(exact.intersection(found)) / len(exact) if exact else 1.0
