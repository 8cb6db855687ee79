"""An offline intent gate: classify a message by embedding similarity to labelled exemplars.

Scoring (chosen on exemplar leave-one-out and the tune split of ``fixtures/intent_eval.jsonl``;
see docs/guides/intent-gate.md for the numbers). For a message vector ``x`` and an
intent ``c`` with unit exemplar vectors ``e``::

    score(c)   = w × cos(x, centroid(c)) + (1 - w) × mean of the top-k cos(x, e)   (w=0.5, k=3)
    confidence = softmax(score / temperature)[intent]                              (T=0.05)

The winner falls back to CASUAL when its score is below ``threshold`` (nothing is close) or its
confidence is below ``min_confidence`` (no intent clearly wins); a message with no letter or
digit is CASUAL with confidence 0 without consulting the model. ``should_retrieve`` is true for
a question, a reference to earlier conversation or the past, or a retrieval intent
(VULNERABILITY, CURIOSITY) predicted with at least ``retrieve_threshold`` confidence.
"""

from __future__ import annotations

import asyncio
import re
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from affect_memory.cues import DEFAULT_RETRIEVAL_RULE, RetrievalRule
from affect_memory.gate.exemplars import IntentExemplars, load_exemplars
from affect_memory.gate.params import DEFAULT_GATE_PARAMS, GateParams
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.protocols import GateInput, GateResult

if TYPE_CHECKING:
    from affect_memory.models.embeddings import Embedder

__all__ = ["EmbeddingIntentGate", "IntentPrediction"]

_CONTENT = re.compile(r"[^\W_]")
"""A letter or digit in any script: a message without one has nothing to classify."""


_VECTOR_CACHE: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], np.ndarray]] = (
    weakref.WeakKeyDictionary()
)
"""Exemplar vectors per embedder object and exemplar tuple, shared by gates on one embedder."""
_VECTOR_CACHE_LOCK = threading.Lock()
_EMBED_LOCK = threading.Lock()
"""Serializes the gate's embedding calls: ``gate`` runs in worker threads, and a shared
Hugging Face fast tokenizer is not documented as safe to call from several at once."""
_VECTOR_CACHE_SETS = 8
"""Exemplar sets kept per embedder; the oldest is dropped beyond this."""



# -- predictions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntentPrediction:
    """One classified message: the intent, its confidence, retrieval, and per-intent scores.

    ``confidence`` is the softmax probability of ``intent`` over all intents' scores; after a
    fallback it is CASUAL's own probability (0.0 for a message with nothing to classify).
    """

    intent: str
    confidence: float
    should_retrieve: bool
    scores: Mapping[str, float]
    fallback: bool = False
    """True when the intent is CASUAL by fallback rather than by winning."""

    def to_json(self, text: str) -> dict[str, Any]:
        """The CLI's line: ``{"text", "intent", "confidence", "should_retrieve"}``."""
        return {
            "text": text,
            "intent": self.intent,
            "confidence": self.confidence,
            "should_retrieve": self.should_retrieve,
        }


def _softmax(scores: np.ndarray, temperature: float) -> np.ndarray:
    shifted = (scores - scores.max(axis=1, keepdims=True)) / temperature
    weights = np.exp(shifted)
    result: np.ndarray = weights / weights.sum(axis=1, keepdims=True)
    return result


@dataclass(frozen=True)
class _Index:
    labels: tuple[str, ...]
    vectors: np.ndarray
    """Unit exemplar vectors, grouped by label in ``labels`` order."""
    bounds: tuple[tuple[int, int], ...]
    centroids: np.ndarray
    """Unit centroid per label."""


class EmbeddingIntentGate:
    """Classifies messages into intents by similarity to labelled exemplars, offline.

    The embedder defaults to the bundled all-MiniLM-L6-v2 (``default_embedder()``); exemplars
    default to the English preset. Exemplars are embedded lazily on first use, at most once per
    gate; gates sharing one embedder object reuse the vectors of an identical exemplar set, and
    an embedder with a ``cache_key`` keeps them on disk for the next process. The gate ignores
    history and state, and never chooses silence (``should_respond`` is always true).
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        exemplars: IntentExemplars | Mapping[str, Sequence[str]] | str | Path | None = None,
        *,
        threshold: float | None = None,
        retrieve_threshold: float | None = None,
        custom_intents: Mapping[str, Sequence[str]] | None = None,
        params: GateParams = DEFAULT_GATE_PARAMS,
        retrieval: RetrievalRule = DEFAULT_RETRIEVAL_RULE,
    ) -> None:
        if not isinstance(params, GateParams):
            raise InvalidInputError(f"params must be a GateParams, got {shown(params)}")
        if not isinstance(retrieval, RetrievalRule):
            raise InvalidInputError(f"retrieval must be a RetrievalRule, got {shown(retrieval)}")
        if threshold is not None:
            params = replace(params, threshold=threshold)
        if retrieve_threshold is not None:
            params = replace(params, retrieve_threshold=retrieve_threshold)
        if exemplars is None:
            exemplars = load_exemplars()
        elif isinstance(exemplars, str | Path):
            exemplars = load_exemplars(exemplars)
        elif not isinstance(exemplars, IntentExemplars):
            exemplars = IntentExemplars.from_mapping(exemplars)
        for label, texts in (custom_intents or {}).items():
            exemplars = exemplars.with_intent(label, texts)
        self._embedder = embedder
        self._exemplars = exemplars
        self._params = params
        self._retrieval = retrieval
        self._index: _Index | None = None
        self._lock = threading.Lock()

    @property
    def params(self) -> GateParams:
        """The scoring, confidence and fallback parameters."""
        return self._params

    @property
    def exemplars(self) -> IntentExemplars:
        """The exemplar set in use, custom intents included."""
        return self._exemplars

    @property
    def labels(self) -> tuple[str, ...]:
        """Every intent this gate can return, built-ins first."""
        return self._exemplars.labels

    def register_intent(self, label: str, exemplars: Sequence[str]) -> None:
        """Add a custom intent with its own exemplars; embeddings are rebuilt on next use."""
        with self._lock:
            self._exemplars = self._exemplars.with_intent(label, exemplars)
            self._index = None

    def _get_embedder(self) -> Embedder:
        if self._embedder is None:
            from affect_memory.models.embeddings import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        from affect_memory.errors import EmbeddingError
        from affect_memory.models.embeddings import check_embeddings

        embedder = self._get_embedder()
        with _EMBED_LOCK:
            raw = embedder.embed_documents(texts)
        vectors = check_embeddings(raw, len(texts))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(norms > 0):
            raise EmbeddingError("the embedder returned a zero vector; it cannot be compared")
        result: np.ndarray = vectors / norms
        return result

    def _exemplar_vectors(self, texts: tuple[str, ...]) -> np.ndarray:
        embedder = self._get_embedder()
        with _VECTOR_CACHE_LOCK:
            try:
                cached = _VECTOR_CACHE.get(embedder, {}).get(texts)
            except TypeError:  # an embedder that cannot be weakly referenced is not cached
                cached = None
        if cached is not None:
            return cached
        cache_key = getattr(embedder, "cache_key", None)
        if isinstance(cache_key, str):  # the embedder names its vectors exactly: use the disk
            from affect_memory.gate.vector_cache import cached_vectors

            vectors = cached_vectors(cache_key, texts, self._embed)
        else:
            vectors = self._embed(texts)
        vectors.setflags(write=False)
        with _VECTOR_CACHE_LOCK:
            try:
                sets = _VECTOR_CACHE.setdefault(embedder, {})
            except TypeError:
                return vectors
            sets[texts] = vectors
            while len(sets) > _VECTOR_CACHE_SETS:
                del sets[next(iter(sets))]
        return vectors

    def _get_index(self) -> _Index:
        from affect_memory.models.embeddings import group_centroids

        with self._lock:
            if self._index is None:
                labels = self._exemplars.labels
                texts = tuple(t for label in labels for t in self._exemplars.intents[label])
                vectors = self._exemplar_vectors(texts)
                bounds: list[tuple[int, int]] = []
                start = 0
                for label in labels:
                    end = start + len(self._exemplars.intents[label])
                    bounds.append((start, end))
                    start = end
                centroids = group_centroids(vectors, bounds)
                self._index = _Index(labels, vectors, tuple(bounds), centroids)
            return self._index

    def _scores(self, queries: np.ndarray, index: _Index) -> np.ndarray:
        params = self._params
        similarity = queries @ index.vectors.T
        scores = np.empty((queries.shape[0], len(index.labels)), dtype=np.float64)
        for column, (start, end) in enumerate(index.bounds):
            block = np.sort(similarity[:, start:end], axis=1)
            k = min(params.top_k, end - start)
            scores[:, column] = block[:, -k:].mean(axis=1)
        centroid = queries @ index.centroids.T
        w = params.centroid_weight
        blended: np.ndarray = w * centroid + (1.0 - w) * scores
        return blended

    def classify(self, text: str) -> IntentPrediction:
        """Classify one message."""
        return self.classify_many([text])[0]

    def classify_many(self, texts: Iterable[str]) -> list[IntentPrediction]:
        """Classify messages in one embedding batch; results follow the input order."""
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInputError(f"texts[{i}] must be a string, got {shown(text)}")
        if not texts:
            return []
        # A message without a letter or digit has nothing to classify: CASUAL, confidence 0,
        # and when no message has one, the model is not even loaded.
        live = [i for i, text in enumerate(texts) if _CONTENT.search(text)]
        index = self._get_index() if live else None
        labels = self.labels if index is None else index.labels
        casual = labels.index("CASUAL")
        zeros = MappingProxyType(dict.fromkeys(labels, 0.0))
        empty = IntentPrediction("CASUAL", 0.0, False, zeros, fallback=True)
        results: list[IntentPrediction] = [empty] * len(texts)
        if index is not None:
            scores = self._scores(self._embed([texts[i] for i in live]), index)
            probabilities = _softmax(scores, self._params.temperature)
            for row, i in enumerate(live):
                results[i] = self._decide(texts[i], labels, scores[row], probabilities[row], casual)
        return results

    def _decide(
        self,
        text: str,
        labels: tuple[str, ...],
        scores: np.ndarray,
        probabilities: np.ndarray,
        casual: int,
    ) -> IntentPrediction:
        # argmax takes the first maximum, so ties go to the earlier label: deterministic.
        best = int(np.argmax(scores))
        fallback = (
            scores[best] < self._params.threshold
            or probabilities[best] < self._params.min_confidence
        ) and best != casual
        chosen = casual if fallback else best
        intent = labels[chosen]
        confidence = round(float(probabilities[chosen]), 4)
        retrieve = self._retrieval.decide(text, intent, confidence, self._params.retrieve_threshold)
        rounded = MappingProxyType(
            {label: round(float(value), 4) for label, value in zip(labels, scores, strict=True)}
        )
        return IntentPrediction(intent, confidence, retrieve, rounded, fallback=fallback)

    async def gate(self, request: GateInput) -> GateResult:
        """Classify ``request.message``; embedding runs in a worker thread, off the event loop."""
        prediction = await asyncio.to_thread(self.classify, request.message)
        return GateResult(
            intent=prediction.intent,
            should_respond=True,
            should_retrieve=prediction.should_retrieve,
        )

    def __repr__(self) -> str:
        return (
            f"EmbeddingIntentGate(embedder={self._embedder!r}, "
            f"exemplars={self._exemplars.source!r}, intents={len(self.labels)}, "
            f"params={self._params!r})"
        )
