"""The embedding gate: scoring, confidence, determinism, fallback, the seam, custom intents."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from affect_memory.errors import ExemplarError
from affect_memory.gate.classifier import EmbeddingIntentGate
from affect_memory.gate.exemplars import DEFAULT_EXEMPLARS_PATH, load_exemplars
from affect_memory.gate.params import GateParams
from affect_memory.kernel.appraisal import BUILTIN_INTENTS
from affect_memory.kernel.errors import AffectMemoryError, InvalidInputError
from affect_memory.kernel.models import AffectState
from affect_memory.kernel.protocols import GateInput, GateResult
from tests.plugin.gate.helpers import (
    SCHEDULING,
    CountingEmbedder,
    TableEmbedder,
)

# -- scoring, confidence, determinism ----------------------------------------------------------


def _table_gate(**params: Any) -> EmbeddingIntentGate:
    vectors = {
        "a1": [1, 0, 0],
        "a2": [0.8, 0.6, 0],
        "b1": [0, 1, 0],
        "query": [0.6, 0.8, 0],
    }
    intents = {label: [f"{label.lower()} filler"] for label in BUILTIN_INTENTS}
    intents["ABUSE"] = ["a1", "a2"]
    intents["APOLOGY"] = ["b1"]
    for label in BUILTIN_INTENTS:
        vectors.setdefault(f"{label.lower()} filler", [0, 0, 1])
    return EmbeddingIntentGate(
        embedder=TableEmbedder(vectors),
        exemplars=intents,
        params=GateParams(top_k=1, **params),
    )


def test_score_is_the_documented_blend_and_confidence_the_softmax() -> None:
    prediction = _table_gate(threshold=0.0, min_confidence=0.0).classify("query")
    centroid = np.array([1.8, 0.6, 0]) / np.linalg.norm([1.8, 0.6, 0])
    query = np.array([0.6, 0.8, 0])
    expected_abuse = 0.5 * float(centroid @ query) + 0.5 * 0.96  # top-1 is a2: 0.48 + 0.48
    expected_apology = 0.8
    assert prediction.scores["ABUSE"] == pytest.approx(expected_abuse, abs=1e-4)
    assert prediction.scores["APOLOGY"] == pytest.approx(expected_apology, abs=1e-4)
    assert prediction.scores["CASUAL"] == pytest.approx(0.0, abs=1e-4)
    assert prediction.intent == "ABUSE"
    values = np.array([prediction.scores[label] for label in BUILTIN_INTENTS])
    weights = np.exp((values - values.max()) / 0.05)
    assert prediction.confidence == pytest.approx(weights.max() / weights.sum(), abs=2e-3)


def test_a_low_confidence_winner_falls_back_to_casual() -> None:
    strict = _table_gate(threshold=0.0, min_confidence=0.99).classify("query")
    assert strict.intent == "CASUAL" and strict.fallback
    assert strict.confidence < 0.01  # CASUAL's own probability, honestly low


def test_same_input_gives_the_same_output_across_calls_batches_and_instances(
    gate: EmbeddingIntentGate, embedder: Any
) -> None:
    texts = ["why do cats purr?", "whatever", "I feel so alone lately", "you're wrong about that"]
    first = gate.classify_many(texts)
    assert gate.classify_many(texts) == first
    assert EmbeddingIntentGate(embedder=embedder).classify_many(texts) == first
    for text, batched in zip(texts, first, strict=True):
        single = gate.classify(text)
        assert single.intent == batched.intent
        assert single.should_retrieve == batched.should_retrieve
        for label in gate.labels:
            assert single.scores[label] == pytest.approx(batched.scores[label], abs=2e-4)


def test_exemplars_are_embedded_once_and_only_when_first_needed(embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    exemplars = {
        label: [f"{label.lower()} one", f"{label.lower()} two"] for label in BUILTIN_INTENTS
    }
    gate = EmbeddingIntentGate(embedder=counting, exemplars=exemplars)
    assert gate.classify_many([]) == []
    assert counting.batches == []
    gate.classify("hello")
    gate.classify_many(["hi", "how do magnets work?"])
    assert counting.batches == [len(BUILTIN_INTENTS) * 2, 1, 2]
    # A second gate on the same embedder object reuses the vectors of the same exemplar set.
    EmbeddingIntentGate(embedder=counting, exemplars=exemplars).classify("hi")
    assert counting.batches == [len(BUILTIN_INTENTS) * 2, 1, 2, 1]


def test_exemplars_embedded_in_another_batch_score_the_same(
    gate: EmbeddingIntentGate, scheduling_gate: EmbeddingIntentGate
) -> None:
    # scheduling_gate embedded the preset afresh, in one batch with its custom exemplars.
    texts = ["why do cats purr?", "whatever", "I feel so alone lately", "you're wrong about that"]
    pairs = zip(gate.classify_many(texts), scheduling_gate.classify_many(texts), strict=True)
    for shared, fresh in pairs:
        assert fresh.intent == shared.intent
        for label in gate.labels:
            assert fresh.scores[label] == pytest.approx(shared.scores[label], abs=2e-4)


# -- fallback ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "?!", "...", "🙂", "\n\t"])
def test_a_message_without_letters_or_digits_is_casual_with_zero_confidence(
    gate: EmbeddingIntentGate, text: str
) -> None:
    prediction = gate.classify(text)
    assert (prediction.intent, prediction.confidence, prediction.fallback) == ("CASUAL", 0.0, True)
    assert prediction.should_retrieve is False


def test_messages_with_nothing_to_classify_load_no_model(embedder: Any) -> None:
    # `affect-memory classify ""` answers without embedding the preset (or anything at all).
    counting = CountingEmbedder(embedder)
    gate = EmbeddingIntentGate(embedder=counting)
    predictions = gate.classify_many(["", "?!", "🙂"])
    assert counting.batches == []
    assert [p.intent for p in predictions] == ["CASUAL"] * 3
    assert set(predictions[0].scores) == set(gate.labels)


@pytest.mark.parametrize(
    "text",
    [
        "lorem ipsum dolor sit amet",
        "1234567890",
        "Quarterly revenue rose 3% on strong demand for cloud services.",
        "import numpy as np",
    ],
)
def test_text_unlike_every_exemplar_falls_back_to_casual(
    gate: EmbeddingIntentGate, text: str
) -> None:
    prediction = gate.classify(text)
    assert prediction.intent == "CASUAL"
    assert prediction.fallback
    assert max(prediction.scores.values()) < gate.params.threshold or (
        prediction.confidence < gate.params.min_confidence
    )


def test_threshold_is_honoured_both_ways(embedder: Any) -> None:
    text = "you are a worthless idiot"
    assert EmbeddingIntentGate(embedder=embedder).classify(text).intent == "ABUSE"
    high = EmbeddingIntentGate(embedder=embedder, threshold=0.99).classify(text)
    assert (high.intent, high.fallback) == ("CASUAL", True)
    assert high.scores["ABUSE"] == max(high.scores.values())


def test_the_gate_validates_its_parameters() -> None:
    with pytest.raises(AffectMemoryError, match="retrieve_threshold"):
        EmbeddingIntentGate(embedder=TableEmbedder({}), retrieve_threshold=True)  # type: ignore[arg-type]


# -- the gate seam -----------------------------------------------------------------------------


async def test_gate_returns_a_gate_result_matching_classify(gate: EmbeddingIntentGate) -> None:
    message = "Can you explain how black holes form?"
    result = await gate.gate(GateInput(message=message, state=AffectState()))
    assert isinstance(result, GateResult)
    prediction = gate.classify(message)
    assert result == GateResult(
        intent=prediction.intent, should_respond=True, should_retrieve=prediction.should_retrieve
    )
    assert result.intent == "CURIOSITY" and result.should_retrieve


async def test_concurrent_gate_calls_agree_with_sequential_classify(
    gate: EmbeddingIntentGate,
) -> None:
    texts = ["how do tides work?", "you idiot", "sorry about earlier", "k", "I feel alone"] * 4
    state = AffectState()
    results = await asyncio.gather(*(gate.gate(GateInput(message=t, state=state)) for t in texts))
    assert [r.intent for r in results] == [gate.classify(t).intent for t in texts]


# -- custom intents ----------------------------------------------------------------------------



@pytest.fixture(scope="session")
def scheduling_gate(embedder: Any) -> EmbeddingIntentGate:
    return EmbeddingIntentGate(embedder=embedder, custom_intents={"SCHEDULING": SCHEDULING})


def test_a_custom_intent_is_classified_by_its_own_exemplars(
    scheduling_gate: EmbeddingIntentGate,
) -> None:
    gate = scheduling_gate
    assert gate.labels == (*BUILTIN_INTENTS, "SCHEDULING")
    prediction = gate.classify("Please schedule a call with Dana on Monday at noon")
    assert prediction.intent == "SCHEDULING"
    assert set(prediction.scores) == set(gate.labels)
    assert gate.classify("you useless idiot").intent == "ABUSE"


def test_register_intent_after_use_rebuilds_the_index(embedder: Any) -> None:
    gate = EmbeddingIntentGate(embedder=embedder)
    before = gate.classify("Please schedule a call with Dana on Monday at noon")
    assert before.intent != "SCHEDULING"
    gate.register_intent("SCHEDULING", SCHEDULING)
    assert gate.classify("Please schedule a call with Dana on Monday at noon").intent == (
        "SCHEDULING"
    )
    with pytest.raises(ExemplarError, match="already registered"):
        gate.register_intent("SCHEDULING", ["another one"])


@pytest.mark.parametrize(
    "label", ["scheduling", "1ST", "_X", "HAS-DASH", "HAS SPACE", "", "A" * 65, "ÉTÉ", 7]
)
def test_invalid_custom_labels_are_refused(label: Any) -> None:
    with pytest.raises(ExemplarError, match=r"\[A-Z\]\[A-Z0-9_\]\{0,63\}"):
        EmbeddingIntentGate(embedder=TableEmbedder({}), custom_intents={label: ["hello"]})


def test_longest_valid_label_is_accepted_and_builtins_cannot_be_re_registered() -> None:
    gate = EmbeddingIntentGate(embedder=TableEmbedder({}), custom_intents={"A" * 64: ["x y"]})
    assert gate.labels[-1] == "A" * 64
    with pytest.raises(ExemplarError, match="built-in"):
        gate.register_intent("CASUAL", ["just chatting"])


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([], "at least one exemplar"),
        ("a single string", "must be a list"),
        (["fine", 3], r"SCHEDULING\[1\] must be a non-empty string"),
        (["fine", "   "], r"SCHEDULING\[1\] must be a non-empty string"),
        (["Book it", "book  IT"], r": intents\.SCHEDULING\[1\] repeats intents\.SCHEDULING\[0\]"),
        (["x" * 1001], "more than 1000"),
        (["k"], "labelled both NEGLECT and SCHEDULING"),
    ],
)
def test_invalid_custom_exemplars_are_refused(texts: Any, message: str) -> None:
    with pytest.raises(ExemplarError, match=message):
        EmbeddingIntentGate(embedder=TableEmbedder({}), custom_intents={"SCHEDULING": texts})


def test_a_huge_bad_value_is_echoed_cut() -> None:
    huge = "Q" * 100_000
    with pytest.raises(InvalidInputError) as caught:
        EmbeddingIntentGate().classify_many(["fine", [huge]])  # type: ignore[list-item]
    assert str(caught.value).startswith("texts[1] must be a string, got [")
    assert len(str(caught.value)) < 300
    preset = load_exemplars(DEFAULT_EXEMPLARS_PATH)
    with pytest.raises(ExemplarError) as refused:
        preset.with_intent(huge.lower(), ["an example"])
    assert "(100000 characters)" in str(refused.value)
    assert len(str(refused.value)) < 500


# -- whether to retrieve ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "retrieve"),
    [
        ("How do volcanoes form?", True),  # a question
        ("Did I ever tell you about my brother", True),  # a question and the past
        ("My sister and I had that same fight again", True),  # the past
        ("I've been feeling so hopeless and alone", True),  # VULNERABILITY
        ("lol nice", False),
        ("you worthless idiot", False),
        ("k", False),
        ("I'm sorry for being rude", False),
    ],
)
def test_should_retrieve_follows_the_documented_rule(
    gate: EmbeddingIntentGate, text: str, retrieve: bool
) -> None:
    assert gate.classify(text).should_retrieve is retrieve
