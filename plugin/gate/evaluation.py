"""How well a gate classifies a labelled set: accuracy, per-intent precision and recall, the
confusion matrix, and every miss."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = ["EvaluationReport", "evaluate"]


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
