"""Shared pieces of the Chroma benchmarks: stage summaries, a machine record, a corpus, embedders.

The corpus is deterministic English templates, so runs and machines compare; the embedders
implement ``affect_memory.models.embeddings.Embedder`` for real, so benchmarks go through
``ChromaMemory``'s own write and query paths rather than around them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from affect_memory.models.embeddings import DelegatingEmbedder, Embedder, check_embeddings

__all__ = [
    "BENCH_NOW",
    "TableEmbedder",
    "TimedEmbedder",
    "add_json_option",
    "load_average",
    "machine",
    "memory_records",
    "print_report",
    "sentences",
    "summary_ms",
]

BENCH_NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
"""The fixed clock of synthetic memories and of reranking, so scores are reproducible."""

_WHEN = (
    "Yesterday", "Last week", "This morning", "On Sunday", "In March", "Two years ago",
    "Tonight", "At lunch", "After work", "Over the holidays", "Last summer", "On my birthday",
)  # fmt: skip
_WHO = (
    "my sister", "my brother", "my manager", "my neighbour", "my best friend", "my dad",
    "my mum", "my partner", "my landlord", "my dentist", "my coach", "a colleague",
    "my old roommate", "my daughter", "my son", "my grandmother", "the new intern", "my cat",
    "my dog", "my therapist", "a stranger on the bus", "my cousin", "the plumber", "my teacher",
)  # fmt: skip
_DID = (
    "told me about", "complained about", "got excited about", "forgot about", "asked about",
    "recommended", "argued with me about", "laughed about", "worried about", "planned",
    "cancelled", "finally finished", "started", "bought", "lost", "fixed", "painted",
    "wrote a song about", "cried about", "surprised me with", "borrowed", "returned",
    "photographed", "read about",
)  # fmt: skip
_WHAT = (
    "a trip to Lisbon", "the marathon", "a broken laptop", "the tax return", "a new job offer",
    "the wedding in June", "a pottery class", "the flat in Berlin", "a guitar",
    "the garden project", "a sourdough starter", "the car repair", "a chess club",
    "the hospital visit", "a concert ticket", "the birthday party", "a vegan cookbook",
    "the mortgage", "a puppy", "the night shift", "a chemistry exam", "the leaking roof",
    "a bike ride to the coast", "the school play", "an old photo album", "the climbing gym",
    "a job interview", "the family dinner", "a lost passport", "the piano lessons",
    "a surprise visit", "the vet bill", "a thesis draft", "the camping weekend",
    "a parking fine", "the new phone", "a knitting pattern", "the kitchen renovation",
    "a fishing trip", "the book club",
)  # fmt: skip
_WHERE = (
    "at home", "at the office", "in the park", "on the phone", "over coffee", "at the station",
    "in the car", "at the gym", "in the garden", "at the hospital", "on a video call",
    "at the market", "by the river", "in the kitchen", "at the pub", "on the train",
)  # fmt: skip
_FEEL = (
    "happy", "anxious", "relieved", "annoyed", "proud", "tired", "hopeful", "sad", "calm",
    "embarrassed", "grateful", "lonely", "excited", "nervous", "angry", "nostalgic",
)  # fmt: skip


def sentences(count: int, *, seed: int = 0) -> list[str]:
    """``count`` distinct first-person memory sentences, the same for the same seed."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = (
            f"{rng.choice(_WHEN)} {rng.choice(_WHO)} {rng.choice(_DID)} {rng.choice(_WHAT)} "
            f"{rng.choice(_WHERE)}, and I felt {rng.choice(_FEEL)}."
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def memory_records(
    texts: Sequence[str], *, users: int, seed: int = 0, prefix: str = "m"
) -> list[dict[str, Any]]:
    """Plausible record mappings for ``texts``: round-robin users, ages up to a year, affect."""
    rng = np.random.default_rng(seed)
    count = len(texts)
    ages = rng.uniform(0.0, 365.0, count)
    significance = rng.random(count).round(4)
    valences = rng.uniform(-1.0, 1.0, count).round(4)
    episodes = rng.random(count) < 0.1
    recalls = rng.geometric(0.4, count) - 1
    return [
        {
            "id": f"{prefix}{i:07d}",
            "text": text,
            "user_id": f"user-{i % users:02d}",
            "timestamp": (BENCH_NOW - timedelta(days=float(ages[i]))).isoformat(),
            "significance": float(significance[i]),
            "emotional_valence": float(valences[i]),
            "episode": bool(episodes[i]),
            "recall_count": int(recalls[i]),
        }
        for i, text in enumerate(texts)
    ]


class TableEmbedder:
    """An ``Embedder`` serving precomputed unit vectors for known texts (a size sweep or cache)."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, *, name: str) -> None:
        self._vectors = check_embeddings(vectors, len(texts))
        self._rows = {text: row for row, text in enumerate(texts)}
        self._name = name

    @property
    def name(self) -> str:
        """The name recorded on the collection (the real model's name for cached vectors)."""
        return self._name

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        return int(self._vectors.shape[1])

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """The stored vectors of ``texts``; an unknown text is a ``KeyError``."""
        picked: np.ndarray = self._vectors[[self._rows[text] for text in texts]]
        return picked

    def embed_query(self, text: str) -> np.ndarray:
        """The stored vector of one text."""
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


class TimedEmbedder(DelegatingEmbedder):
    """An ``Embedder`` that delegates and adds up the nanoseconds spent embedding."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.elapsed_ns = 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed through the wrapped embedder, timing the call."""
        start = time.perf_counter_ns()
        try:
            return self._inner.embed_documents(texts)
        finally:
            self.elapsed_ns += time.perf_counter_ns() - start

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query through ``embed_documents``."""
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


def summary_ms(samples: Sequence[float], *, per_ms: float = 1e6) -> dict[str, float]:
    """Median and p95 (nearest rank) of samples, in milliseconds.

    Samples are nanoseconds unless ``per_ms`` says how many of their unit make a millisecond.
    """
    if not samples:
        raise ValueError("no samples to summarize")
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median": round(statistics.median(ordered) / per_ms, 4),
        "p95": round(p95 / per_ms, 4),
    }


def load_average() -> float:
    """The 1-minute load average (-1 where the platform has none)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else -1.0


def machine(load_before: float) -> dict[str, Any]:
    """The machine and library versions a report was measured on, with the load around it."""
    import chromadb

    return {
        "python": platform.python_version(),
        "chromadb": chromadb.__version__,
        "numpy": np.__version__,
        "cpus": os.cpu_count() or 0,
        "load_average_1m_before": load_before,
        "load_average_1m_after": load_average(),
    }


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--json``: print the report as JSON instead of tables."""
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def print_report(
    report: dict[str, Any], *, as_json: bool, text: Callable[[dict[str, Any]], str]
) -> int:
    """Print a benchmark's report as indented JSON or as its text tables; exit status 0."""
    print(json.dumps(report, indent=2) if as_json else text(report))
    return 0
