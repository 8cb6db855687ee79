"""An offline intent gate: classify a message by embedding similarity to labelled exemplars.

Scoring (chosen on exemplar leave-one-out and the tune split of ``fixtures/intent_eval.jsonl``;
see the README's "Intent gate" section for the numbers). For a message vector ``x`` and an
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
import json
import math
import re
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from kernel.appraisal import BUILTIN_INTENTS
from kernel.errors import InvalidInputError, shown
from kernel.protocols import GateInput, GateResult

if TYPE_CHECKING:
    from plugin.models.embeddings import Embedder

__all__ = [
    "CUSTOM_INTENT_PATTERN",
    "DEFAULT_EXEMPLARS_PATH",
    "DEFAULT_GATE_PARAMS",
    "DEFAULT_RETRIEVAL_RULE",
    "EmbeddingIntentGate",
    "EvaluationReport",
    "ExemplarError",
    "GateParams",
    "IntentExemplars",
    "IntentPrediction",
    "RetrievalRule",
    "evaluate",
    "load_exemplars",
]

DEFAULT_EXEMPLARS_PATH = (
    Path(__file__).resolve().parents[2] / "fixtures" / "intent_exemplars.json"
)
"""The English preset of labelled exemplars."""

CUSTOM_INTENT_PATTERN = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
"""What a custom intent label must match in full (the kernel's allowlist rule)."""

MAX_EXEMPLAR_CHARS = 1000
"""Longest exemplar accepted; the model reads about 256 word pieces anyway."""

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


class ExemplarError(InvalidInputError):
    """An exemplar set or custom intent is malformed; the message names the place and the value."""


# -- parameters --------------------------------------------------------------------------------


def _check_unit(name: str, value: float, *, low: float = 0.0, high: float = 1.0) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    if not low <= value <= high:
        raise InvalidInputError(f"{name} must be within [{low}, {high}], got {shown(value)}")


@dataclass(frozen=True, kw_only=True)
class GateParams:
    """Tunable numbers of the gate's scoring, confidence and fallback."""

    centroid_weight: float = 0.5
    """Weight of the centroid similarity against the top-k exemplar similarity (tuned)."""
    top_k: int = 3
    """How many nearest exemplars of an intent are averaged (tuned)."""
    temperature: float = 0.05
    """Softmax temperature turning scores into confidences (tuned for spread, arbitrary)."""
    threshold: float = 0.20
    """Below this winning score the message is CASUAL: nothing in the exemplars is close."""
    min_confidence: float = 0.35
    """Below this winning confidence the message is CASUAL: no intent clearly wins."""
    retrieve_threshold: float = 0.50
    """Confidence a retrieval intent needs to trigger retrieval on its own."""

    def __post_init__(self) -> None:
        _check_unit("centroid_weight", self.centroid_weight)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise InvalidInputError(f"top_k must be an integer >= 1, got {shown(self.top_k)}")
        _check_unit("temperature", self.temperature, low=1e-6, high=10.0)
        _check_unit("threshold", self.threshold, low=-1.0)
        _check_unit("min_confidence", self.min_confidence)
        _check_unit("retrieve_threshold", self.retrieve_threshold)


DEFAULT_GATE_PARAMS = GateParams()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_QUESTION_WORDS = _words(
    "what what's whats why how how's hows where where's who who's whom whose which"
)
"""Wh-words that open a question on their own ("when" is left out: it mostly opens a clause)."""

_AUXILIARIES = _words(
    "do does did is are am was were can could would will should shall may have has"
)
"""Verbs that open a question when a subject follows ("can you ...", not "can't talk")."""

_SUBJECTS = _words(
    "you u ya i we they he she it there this that these those my your our his her their "
    "anyone anybody someone somebody anything"
)
"""Words that, right after an auxiliary, make the message a question ("is it ...", "do you ...")."""

_REQUESTS = ("tell me", "explain", "any idea", "any ideas", "i wonder", "i'm curious", "im curious")
"""Openers that ask for information without a question mark."""

_PAST_REFERENCE = re.compile(
    r"\b(?:"
    r"remember|remembered|recall|remind|reminded|"
    r"last\s+(?:time|night|week|weekend|month|year|summer|winter|spring|fall|autumn|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"yesterday|the\s+other\s+day|earlier|previously|ago|again|still|used\s+to|"
    r"back\s+(?:when|then)|(?:you|i|we)\s+(?:said|told|mentioned|suggested|recommended|promised)|"
    r"did\s+i\s+(?:tell|mention|say)|we\s+(?:talked|spoke|discussed|chatted)|"
    r"our\s+(?:last\s+)?(?:conversation|chat|talk)|as\s+(?:i|we|you)\s+(?:said|mentioned)|"
    r"like\s+i\s+said|mentioned"
    r")\b",
    re.IGNORECASE,
)
"""English cues that a message leans on something said or lived before."""


@dataclass(frozen=True, kw_only=True)
class RetrievalRule:
    """When the gate asks for memory retrieval: questions, past references, retrieval intents.

    Generic past tense is deliberately not a cue: "-ed" words are in most messages and would
    make nearly every turn retrieve.
    """

    questions: bool = True
    """Retrieve for a question: a ``?``, a wh-word, an auxiliary + subject, or a request opener."""
    question_words: frozenset[str] = _QUESTION_WORDS
    auxiliaries: frozenset[str] = _AUXILIARIES
    subjects: frozenset[str] = _SUBJECTS
    requests: tuple[str, ...] = _REQUESTS
    past_references: bool = True
    """Retrieve when ``past_reference`` matches (remember, last time, yesterday, you said ...)."""
    past_reference: re.Pattern[str] = _PAST_REFERENCE
    intents: frozenset[str] = frozenset({"VULNERABILITY", "CURIOSITY"})
    """Intents that retrieve on their own, at confidence >= ``GateParams.retrieve_threshold``."""

    def is_question(self, text: str) -> bool:
        """Whether ``text`` reads as a question."""
        if "?" in text:
            return True
        words = re.findall(r"[^\W\d_][\w']*", text.lower().replace("’", "'"))
        if not words:
            return False
        if words[0] in self.question_words:
            return True
        if words[0] in self.auxiliaries and len(words) > 1 and words[1] in self.subjects:
            return True
        opening = " ".join(words[:3])
        return any(opening == r or opening.startswith(r + " ") for r in self.requests)

    def refers_to_past(self, text: str) -> bool:
        """Whether ``text`` refers to earlier conversation or past events."""
        return self.past_reference.search(text) is not None

    def decide(self, text: str, intent: str, confidence: float, threshold: float) -> bool:
        """Whether to retrieve for ``text`` classified as ``intent`` with ``confidence``."""
        if self.questions and self.is_question(text):
            return True
        if self.past_references and self.refers_to_past(text):
            return True
        return intent in self.intents and confidence >= threshold


DEFAULT_RETRIEVAL_RULE = RetrievalRule()


# -- exemplars ---------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _check_label(label: object, where: str) -> str:
    if not isinstance(label, str) or CUSTOM_INTENT_PATTERN.fullmatch(label) is None:
        raise ExemplarError(
            f"{where}: intent label must match [A-Z][A-Z0-9_]{{0,63}} "
            f"(upper-case letter first, then upper-case letters, digits or _), got {shown(label)}"
        )
    return label


def _check_texts(texts: object, source: str, label: str) -> tuple[str, ...]:
    where = f"{source}: intents.{label}"
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise ExemplarError(f"{where} must be a list of strings, got {type(texts).__name__}")
    if not texts:
        raise ExemplarError(f"{where} must hold at least one exemplar")
    seen: dict[str, int] = {}
    out: list[str] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ExemplarError(f"{where}[{i}] must be a non-empty string, got {shown(text)}")
        if len(text) > MAX_EXEMPLAR_CHARS:
            raise ExemplarError(
                f"{where}[{i}] is {len(text)} characters, more than {MAX_EXEMPLAR_CHARS}"
            )
        key = _norm(text)
        if key in seen:
            raise ExemplarError(f"{where}[{i}] repeats intents.{label}[{seen[key]}]: {shown(text)}")
        seen[key] = i
        out.append(text.strip())
    return tuple(out)


@dataclass(frozen=True)
class IntentExemplars:
    """Labelled exemplar texts per intent: every built-in intent, then any custom ones."""

    intents: Mapping[str, tuple[str, ...]]
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    source: str = "<mapping>"

    @classmethod
    def from_mapping(
        cls,
        intents: Mapping[str, Sequence[str]],
        *,
        meta: Mapping[str, Any] | None = None,
        source: str = "<mapping>",
    ) -> IntentExemplars:
        """Validate ``intents`` strictly: all seven built-ins, valid labels, no repeated text."""
        if not isinstance(intents, Mapping):
            raise ExemplarError(
                f"{source}: intents must be an object, got {type(intents).__name__}"
            )
        missing = [label for label in BUILTIN_INTENTS if label not in intents]
        if missing:
            raise ExemplarError(f"{source}: intents is missing built-in intent(s) {missing}")
        checked: dict[str, tuple[str, ...]] = {}
        owner: dict[str, str] = {}
        ordered = [*BUILTIN_INTENTS, *(label for label in intents if label not in BUILTIN_INTENTS)]
        for label in ordered:
            _check_label(label, f"{source}: intents")
            texts = _check_texts(intents[label], source, label)
            for text in texts:
                other = owner.setdefault(_norm(text), label)
                if other != label:
                    raise ExemplarError(
                        f"{source}: exemplar {shown(text)} is labelled both {other} and {label}"
                    )
            checked[label] = texts
        return cls(MappingProxyType(checked), MappingProxyType(dict(meta or {})), source)

    def with_intent(self, label: str, texts: Sequence[str]) -> IntentExemplars:
        """A copy with one more custom intent; built-in and existing labels are refused."""
        _check_label(label, "custom intent")
        if label in BUILTIN_INTENTS:
            raise ExemplarError(
                f"custom intent {shown(label)} is a built-in intent; "
                "replace the exemplar set instead"
            )
        if label in self.intents:
            raise ExemplarError(f"custom intent {shown(label)} is already registered")
        return IntentExemplars.from_mapping(
            {**self.intents, label: texts}, meta=self.meta, source=self.source
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """Every intent label, built-ins first."""
        return tuple(self.intents)

    def __len__(self) -> int:
        return sum(len(texts) for texts in self.intents.values())


def load_exemplars(path: str | Path = DEFAULT_EXEMPLARS_PATH) -> IntentExemplars:
    """Read and strictly validate an exemplar file ``{"_meta": {...}, "intents": {...}}``."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ExemplarError(f"{path}: cannot read exemplar file: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ExemplarError(f"{path}: exemplar file is not UTF-8 ({error.reason})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ExemplarError(
            f"{path}: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    if not isinstance(data, dict):
        raise ExemplarError(f"{path}: top level must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - {"_meta", "intents"})
    if unknown:
        raise ExemplarError(f"{path}: unknown top-level key(s) {unknown}; allowed: _meta, intents")
    for key in ("_meta", "intents"):
        if key not in data:
            raise ExemplarError(f"{path}: missing top-level key {shown(key)}")
        if not isinstance(data[key], dict):
            raise ExemplarError(f"{path}: {key} must be an object, got {type(data[key]).__name__}")
    return IntentExemplars.from_mapping(data["intents"], meta=data["_meta"], source=str(path))


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

    The embedder defaults to the bundled all-MiniLM-L6-v2; exemplars default to the English
    preset. Exemplars are embedded lazily on first use, at most once per gate; gates sharing one
    embedder object reuse the vectors of an identical exemplar set. The gate ignores history and
    state, and never chooses silence (``should_respond`` is always true).
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
            from plugin.models.embeddings import SentenceTransformerEmbedder

            self._embedder = SentenceTransformerEmbedder()
        return self._embedder

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        from plugin.errors import EmbeddingError
        from plugin.models.embeddings import check_embeddings

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
                centroids = np.stack([vectors[a:b].mean(axis=0) for a, b in bounds])
                centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
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
        index = self._get_index()
        labels = index.labels
        casual = labels.index("CASUAL")
        # A message without a letter or digit has nothing to classify: CASUAL, confidence 0.
        zeros = MappingProxyType(dict.fromkeys(labels, 0.0))
        empty = IntentPrediction("CASUAL", 0.0, False, zeros, fallback=True)
        results: list[IntentPrediction] = [empty] * len(texts)
        live = [i for i, text in enumerate(texts) if _CONTENT.search(text)]
        if live:
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


# -- evaluation --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvaluationReport:
    """Accuracy, per-intent precision and recall, and the confusion matrix of a labelled set."""

    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    """``confusion[i][j]``: messages labelled ``labels[i]`` predicted as ``labels[j]``."""
    errors: tuple[tuple[str, str, str, float], ...]
    """(text, expected, predicted, confidence) of every miss, in input order."""
    groups: Mapping[str, tuple[int, int]] = field(default_factory=lambda: MappingProxyType({}))
    """Correct and total counts per ``split`` value, when the examples carry one."""

    @property
    def total(self) -> int:
        """How many messages were classified."""
        return sum(sum(row) for row in self.confusion)

    @property
    def correct(self) -> int:
        """How many were classified as labelled."""
        return sum(self.confusion[i][i] for i in range(len(self.labels)))

    @property
    def accuracy(self) -> float:
        """Correct over total (0.0 for an empty set)."""
        return self.correct / self.total if self.total else 0.0

    def per_intent(self) -> dict[str, dict[str, float]]:
        """Precision, recall, F1 and support per intent (0.0 where undefined)."""
        matrix = np.array(self.confusion, dtype=np.int64).reshape(len(self.labels), -1)
        out: dict[str, dict[str, float]] = {}
        for i, label in enumerate(self.labels):
            hit = float(matrix[i, i])
            predicted = float(matrix[:, i].sum())
            support = float(matrix[i, :].sum())
            precision = hit / predicted if predicted else 0.0
            recall = hit / support if support else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            out[label] = {
                "precision": round(precision, 4),
                "recall": round(recall, 4),
                "f1": round(f1, 4),
                "support": support,
            }
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON values."""
        return {
            "total": self.total,
            "correct": self.correct,
            "accuracy": round(self.accuracy, 4),
            "splits": {
                name: {"correct": c, "total": n, "accuracy": round(c / n, 4) if n else 0.0}
                for name, (c, n) in self.groups.items()
            },
            "per_intent": {
                label: {**values, "support": int(values["support"])}
                for label, values in self.per_intent().items()
            },
            "labels": list(self.labels),
            "confusion": [list(row) for row in self.confusion],
            "errors": [
                {"text": t, "intent": e, "predicted": p, "confidence": c}
                for t, e, p, c in self.errors
            ],
        }


def evaluate(
    gate: EmbeddingIntentGate,
    texts: Sequence[str],
    intents: Sequence[str],
    splits: Sequence[str | None] | None = None,
) -> EvaluationReport:
    """Classify labelled messages in one batch and tally accuracy, per split when given."""
    labels = gate.labels
    position = {label: i for i, label in enumerate(labels)}
    if len(texts) != len(intents) or (splits is not None and len(splits) != len(texts)):
        raise InvalidInputError("texts, intents and splits must have the same length")
    for i, intent in enumerate(intents):
        if intent not in position:
            raise InvalidInputError(
                f"example {i} is labelled {shown(intent)}, "
                f"not an intent of this gate {list(labels)}"
            )
    predictions = gate.classify_many(texts)
    matrix = [[0] * len(labels) for _ in labels]
    errors: list[tuple[str, str, str, float]] = []
    groups: dict[str, list[int]] = {}
    for i, prediction in enumerate(predictions):
        expected = intents[i]
        matrix[position[expected]][position[prediction.intent]] += 1
        hit = prediction.intent == expected
        if not hit:
            errors.append((texts[i], expected, prediction.intent, prediction.confidence))
        split = splits[i] if splits is not None else None
        if split is not None:
            tally = groups.setdefault(split, [0, 0])
            tally[0] += int(hit)
            tally[1] += 1
    return EvaluationReport(
        labels,
        tuple(tuple(row) for row in matrix),
        tuple(errors),
        MappingProxyType({name: (c, n) for name, (c, n) in groups.items()}),
    )
