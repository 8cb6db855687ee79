"""The offline intent gate: accuracy on the labelled set, determinism, fallback, retrieval,
custom intents, exemplar validation and the ``classify`` command."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kernel.appraisal import BUILTIN_INTENTS
from kernel.errors import AffectMemoryError, InvalidInputError
from kernel.models import AffectState
from kernel.protocols import GateInput, GateResult
from plugin.cli import main
from plugin.errors import ExemplarError
from plugin.gate.classifier import EmbeddingIntentGate
from plugin.gate.cues import DEFAULT_RETRIEVAL_RULE
from plugin.gate.evaluation import evaluate
from plugin.gate.exemplars import DEFAULT_EXEMPLARS_PATH, IntentExemplars, load_exemplars
from plugin.gate.params import GateParams

ROOT = Path(__file__).resolve().parents[2]
EVAL_PATH = ROOT / "fixtures" / "intent_eval.jsonl"
MIN_ACCURACY = 0.90


def _eval_rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in EVAL_PATH.read_text(encoding="utf-8").splitlines()]


class CountingEmbedder:
    """Wraps a real embedder and records every batch it is asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[int] = []

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(len(texts))
        result: np.ndarray = self.inner.embed_documents(texts)
        return result

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class TableEmbedder:
    """A deterministic embedder over a fixed text → vector table, for closed-form checks."""

    def __init__(self, table: dict[str, Sequence[float]]) -> None:
        self.table = {k: np.asarray(v, dtype=np.float32) for k, v in table.items()}

    name = "table"
    dimension = 3

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.stack([self.table[text] for text in texts])
        result: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return result

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


@pytest.fixture(scope="session")
def embedder() -> Any:
    from plugin.models.embeddings import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.fixture(scope="session")
def gate(embedder: Any) -> EmbeddingIntentGate:
    return EmbeddingIntentGate(embedder=embedder)


# -- data --------------------------------------------------------------------------------------


def test_preset_has_every_builtin_intent_with_at_least_25_exemplars() -> None:
    exemplars = load_exemplars()
    assert exemplars.labels == BUILTIN_INTENTS
    for label in BUILTIN_INTENTS:
        assert len(exemplars.intents[label]) >= 25, label


def test_eval_set_has_20_per_intent_and_shares_no_text_with_the_exemplars() -> None:
    rows = _eval_rows()
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
    texts = [row["text"] for row in _eval_rows()]
    closest = [max(p.scores.values()) for p in nearest.classify_many(texts)]
    assert max(closest) < 0.90, texts[int(np.argmax(closest))]


# -- accuracy ----------------------------------------------------------------------------------


def test_accuracy_on_the_labelled_set_is_at_least_090_overall_and_per_split(
    gate: EmbeddingIntentGate,
) -> None:
    rows = _eval_rows()
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


def test_parameters_are_validated() -> None:
    with pytest.raises(AffectMemoryError, match="threshold"):
        GateParams(threshold=math.nan)
    with pytest.raises(AffectMemoryError, match="top_k"):
        GateParams(top_k=0)
    with pytest.raises(AffectMemoryError, match="min_confidence"):
        GateParams(min_confidence=1.5)
    with pytest.raises(AffectMemoryError, match="retrieve_threshold"):
        EmbeddingIntentGate(embedder=TableEmbedder({}), retrieve_threshold=True)  # type: ignore[arg-type]


# -- retrieval rule ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("what time is it", True),
        ("How's your week going", True),
        ("can you help me with something", True),
        ("Do you like jazz", True),
        ("Is it raining there", True),
        ("tell me about the Roman empire", True),
        ("I wonder why stars twinkle", True),
        ("ok?", True),
        ("Can't talk, busy", False),
        ("Will do", False),
        ("Have a nice day", False),
        ("When I was a kid I loved trains", False),
        ("I had pasta for dinner", False),
    ],
)
def test_questions_are_recognised_without_opener_false_positives(text: str, question: bool) -> None:
    assert DEFAULT_RETRIEVAL_RULE.is_question(text) is question


@pytest.mark.parametrize(
    ("text", "past"),
    [
        ("remember my sister's wedding", True),
        ("Last time we spoke I was job hunting", True),
        ("you said the film was good", True),
        ("did I tell you about my new flat", True),
        ("like I said, it's fine", True),
        ("the thing with my landlord happened again", True),
        ("we talked about this yesterday", True),
        ("I moved here three years ago", True),
        ("Good morning", False),
        ("forget it", False),
        ("I'm making tacos tonight", False),
    ],
)
def test_references_to_the_past_are_recognised(text: str, past: bool) -> None:
    assert DEFAULT_RETRIEVAL_RULE.refers_to_past(text) is past


def test_retrieval_intents_need_the_retrieve_threshold() -> None:
    rule = DEFAULT_RETRIEVAL_RULE
    assert rule.decide("I feel so alone", "VULNERABILITY", 0.9, 0.5)
    assert not rule.decide("I feel so alone", "VULNERABILITY", 0.4, 0.5)
    assert rule.decide("tides fascinate me", "CURIOSITY", 0.5, 0.5)
    assert not rule.decide("you absolute moron", "ABUSE", 1.0, 0.5)


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

SCHEDULING = [
    "Can we move my meeting to 3pm?",
    "Book a dentist appointment for Tuesday morning.",
    "Put lunch with Sam on my calendar for Friday.",
    "Reschedule the call with the client to next week.",
    "Add the team sync at 10am to my schedule.",
    "Cancel my 4 o'clock appointment.",
    "Set up a meeting with Priya on Thursday afternoon.",
]


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


# -- exemplar files ----------------------------------------------------------------------------


def _preset() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DEFAULT_EXEMPLARS_PATH.read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "exemplars.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_an_exemplar_file_with_custom_intents_loads(tmp_path: Path) -> None:
    data = _preset()
    data["intents"]["SCHEDULING"] = SCHEDULING
    exemplars = load_exemplars(_write(tmp_path, data))
    assert isinstance(exemplars, IntentExemplars)
    assert exemplars.labels == (*BUILTIN_INTENTS, "SCHEDULING")
    assert exemplars.meta["language"] == "en"


def _broken(change: str) -> Any:
    data = _preset()
    if change == "list":
        return [1, 2]
    if change == "unknown key":
        data["extra"] = {}
    elif change == "no meta":
        del data["_meta"]
    elif change == "meta list":
        data["_meta"] = []
    elif change == "intents list":
        data["intents"] = ["ABUSE"]
    elif change == "missing builtin":
        del data["intents"]["NEGLECT"]
    elif change == "bad label":
        data["intents"]["lower"] = ["hi"]
    elif change == "bad text":
        data["intents"]["ABUSE"][2] = 5
    elif change == "empty intent":
        data["intents"]["CASUAL"] = []
    elif change == "duplicate across":
        data["intents"]["CASUAL"].append(data["intents"]["ABUSE"][0].upper())
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("list", "top level must be an object, got list"),
        ("unknown key", r"unknown top-level key\(s\) \['extra'\]"),
        ("no meta", "missing top-level key '_meta'"),
        ("meta list", "_meta must be an object"),
        ("intents list", "intents must be an object"),
        ("missing builtin", r"missing built-in intent\(s\) \['NEGLECT'\]"),
        ("bad label", "must match"),
        ("bad text", r"intents\.ABUSE\[2\] must be a non-empty string, got 5"),
        ("empty intent", r"intents\.CASUAL must hold at least one exemplar"),
        ("duplicate across", "labelled both ABUSE and CASUAL"),
    ],
)
def test_exemplar_file_errors_name_the_file_and_the_place(
    tmp_path: Path, change: str, message: str
) -> None:
    path = _write(tmp_path, _broken(change))
    with pytest.raises(ExemplarError, match=message) as caught:
        load_exemplars(path)
    assert str(path) in str(caught.value)


def test_unreadable_exemplar_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ExemplarError, match="line 1 column 2"):
        load_exemplars(_write(tmp_path, "{oops"))
    with pytest.raises(ExemplarError, match="cannot read"):
        load_exemplars(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"_meta": {}, "intents": {"ABUSE": ["caf\xe9"]}}')
    with pytest.raises(ExemplarError, match="not UTF-8"):
        load_exemplars(latin)


# -- the classify command ----------------------------------------------------------------------


def _jsonl(tmp_path: Path, lines: Sequence[str], name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def cli_embedder(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> Any:
    """Point the command's default embedder at the session's, so the preset is embedded once."""
    import plugin.models.embeddings

    monkeypatch.setattr(plugin.models.embeddings, "SentenceTransformerEmbedder", lambda: embedder)
    return embedder


@pytest.mark.usefixtures("cli_embedder")
def test_cli_single_text_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "you are a pathetic waste of code", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"text", "intent", "confidence", "should_retrieve"}
    assert out["text"] == "you are a pathetic waste of code"
    assert out["intent"] == "ABUSE"
    assert 0 < out["confidence"] <= 1 and out["should_retrieve"] is False


@pytest.mark.usefixtures("cli_embedder")
def test_cli_single_text_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify", "Why is the sea salty?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("CURIOSITY  confidence ")
    assert "retrieve yes" in out and "VULNERABILITY" in out


@pytest.mark.usefixtures("cli_embedder")
def test_cli_batch_prints_one_line_per_query_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = ["sorry for snapping at you earlier", "whatever", "How do magnets work?"]
    lines = [
        json.dumps({"text": texts[0], "id": 7}),
        "",
        *(json.dumps({"text": t}) for t in texts[1:]),
    ]
    assert main(["classify", "--queries", str(_jsonl(tmp_path, lines)), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["text"] for row in out] == texts
    assert [row["intent"] for row in out] == ["APOLOGY", "NEGLECT", "CURIOSITY"]
    assert [row["should_retrieve"] for row in out] == [True, False, True]
    assert all(set(row) == {"text", "intent", "confidence", "should_retrieve"} for row in out)


@pytest.mark.usefixtures("cli_embedder")
def test_cli_evaluate_reports_accuracy_and_confusion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        json.dumps({"text": "you brainless idiot", "intent": "ABUSE"}),
        json.dumps({"text": "I'm sorry I was rude", "intent": "apology "}),
        json.dumps({"text": "you brainless idiot", "intent": "CASUAL"}),
    ]
    path = _jsonl(tmp_path, lines)
    assert main(["classify", "--evaluate", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["correct"], report["total"]) == (2, 3)
    assert report["accuracy"] == round(2 / 3, 4)
    assert report["labels"] == list(BUILTIN_INTENTS)
    assert sum(map(sum, report["confusion"])) == 3
    assert report["per_intent"]["APOLOGY"]["recall"] == 1.0
    assert main(["classify", "--evaluate", str(path)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("accuracy 0.667 (2/3)")
    assert "precision" in table and "confusion (rows: labelled, columns: predicted)" in table
    assert main(["classify", "--evaluate", str(path), "--min-accuracy", "0.9"]) == 1
    assert "below --min-accuracy" in capsys.readouterr().err


@pytest.mark.usefixtures("cli_embedder")
def test_cli_exemplars_file_replaces_the_preset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _preset()
    data["intents"]["SCHEDULING"] = SCHEDULING
    path = _write(tmp_path, data)
    args = ["classify", "Move my dentist appointment to Wednesday", "--exemplars", str(path)]
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["intent"] == "SCHEDULING"


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "fine"}', "{not json"], "line 2: invalid JSON"),
        (['{"text": "fine"}', "", '["a list"]'], "line 3: expected a JSON object, got list"),
        (['{"query": "wrong key"}'], 'line 1: missing "text"'),
        (['{"text": 5}'], 'line 1: "text" must be a string, got int'),
        ([""], "no queries"),
    ],
)
def test_cli_bad_query_line_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    path = _jsonl(tmp_path, lines)
    assert main(["classify", "--queries", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "hi", "intent": "GREETING"}'], "line 1: intent 'GREETING' is not one of"),
        (['{"text": "hi"}'], 'line 1: missing "intent"'),
        (['{"text": "hi", "intent": "CASUAL", "split": 3}'], 'line 1: "split" must be a string'),
    ],
)
def test_cli_bad_evaluate_line_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: list[str], message: str
) -> None:
    assert main(["classify", "--evaluate", str(_jsonl(tmp_path, lines))]) == 2
    assert message in capsys.readouterr().err


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["classify"]) == 2
    assert "exactly one of TEXT" in capsys.readouterr().err
    assert main(["classify", "hi", "--min-accuracy", "0.5"]) == 2
    assert "--min-accuracy only applies" in capsys.readouterr().err
    assert main(["classify", "hi", "--exemplars", str(_write(tmp_path, "[]"))]) == 2
    assert "top level must be an object" in capsys.readouterr().err


def test_cli_bad_line_in_a_fresh_process_is_one_line_without_traceback(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, ['{"text": "ok"}', '{"text": null}'])
    done = subprocess.run(
        [sys.executable, "-m", "plugin.cli", "classify", "--queries", str(path), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f'affect-memory classify: {path} line 2: "text" must be a string, got NoneType'
    ]


def test_cli_refuses_a_message_longer_than_the_engines_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kernel.engine import DEFAULT_ENGINE_LIMITS

    limit = DEFAULT_ENGINE_LIMITS.max_message_chars
    assert main(["classify", "x" * 100_000]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"affect-memory classify: TEXT has 100,000 characters; the limit is {limit:,} "
        "(as for a turn)"
    )
    path = _jsonl(tmp_path, ['{"text": "fine"}', json.dumps({"text": "y" * (limit + 1)})])
    assert main(["classify", "--queries", str(path), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert f'{path} line 2: "text" has {limit + 1:,} characters' in line
    assert main(["classify", "y" * limit, "--json"]) == 0, "the limit itself is accepted"
    assert json.loads(capsys.readouterr().out)["text"] == "y" * limit


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
