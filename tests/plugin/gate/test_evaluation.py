"""The labelled data, and the gate's accuracy on it per split and per intent."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.gate.evaluation import evaluate
from affect_memory.gate.exemplars import load_exemplars
from affect_memory.gate.params import GateParams
from affect_memory.kernel.appraisal import BUILTIN_INTENTS
from affect_memory.kernel.errors import AffectMemoryError
from tests.plugin.gate.helpers import (
    MIN_ACCURACY,
    eval_rows,
)

# -- data --------------------------------------------------------------------------------------


def test_preset_has_every_builtin_intent_with_at_least_25_exemplars() -> None:
    exemplars = load_exemplars()
    assert exemplars.labels == BUILTIN_INTENTS
    for label in BUILTIN_INTENTS:
        assert len(exemplars.intents[label]) >= 25, label


def test_eval_set_has_20_per_intent_and_shares_no_text_with_the_exemplars() -> None:
    rows = eval_rows()
    assert all(set(row) <= {"text", "intent", "split"} for row in rows)
    counts = Counter(row["intent"] for row in rows)
    assert set(counts) == set(BUILTIN_INTENTS)
    assert min(counts.values()) >= 20
    normalized = {
        " ".join(t.casefold().strip(" .!?").split())
        for texts in load_exemplars().intents.values()
        for t in texts
    }
    copies = [
        r["text"]
        for r in rows
        if " ".join(r["text"].casefold().strip(" .!?").split()) in normalized
    ]
    assert copies == []


def test_eval_set_holds_no_near_copy_of_an_exemplar(embedder: Any) -> None:
    # With top_k=1 and no centroid, an intent's score is the cosine to its nearest exemplar.
    nearest = EmbeddingIntentGate(
        embedder=embedder, params=GateParams(top_k=1, centroid_weight=0.0)
    )
    texts = [row["text"] for row in eval_rows()]
    closest = [max(p.scores.values()) for p in nearest.classify_many(texts)]
    assert max(closest) < 0.90, texts[int(np.argmax(closest))]


# -- accuracy ----------------------------------------------------------------------------------


def test_accuracy_on_the_labelled_set_is_at_least_090_overall_and_per_split(
    gate: EmbeddingIntentGate,
) -> None:
    rows = eval_rows()
    report = evaluate(
        gate, [r["text"] for r in rows], [r["intent"] for r in rows], [r["split"] for r in rows]
    )
    assert report.total == len(rows)
    assert report.accuracy >= MIN_ACCURACY, report.errors
    assert set(report.groups) == {"tune", "heldout", "stress"}
    for name, (correct, total) in report.groups.items():
        assert correct / total >= MIN_ACCURACY, name
    for label, values in report.per_intent().items():
        assert values["recall"] >= 0.80, label
        assert values["precision"] >= 0.80, label


def test_evaluation_report_counts_match_the_confusion_matrix(gate: EmbeddingIntentGate) -> None:
    texts = ["you absolute moron", "I'm sorry for shouting at you", "you absolute moron"]
    report = evaluate(gate, texts, ["ABUSE", "APOLOGY", "CASUAL"])
    abuse, apology, casual = (BUILTIN_INTENTS.index(x) for x in ("ABUSE", "APOLOGY", "CASUAL"))
    assert report.confusion[abuse][abuse] == 1
    assert report.confusion[apology][apology] == 1
    assert report.confusion[casual][abuse] == 1
    assert (report.correct, report.total) == (2, 3)
    assert report.errors == (("you absolute moron", "CASUAL", "ABUSE", report.errors[0][3]),)
    assert report.per_intent()["ABUSE"]["precision"] == 0.5
    with pytest.raises(AffectMemoryError, match="not an intent"):
        evaluate(gate, ["hi"], ["GREETING"])


