"""Recall settings files: flat JSON, strict, every error naming the file and the field."""

import importlib
import json
import numbers
from pathlib import Path

import pytest

from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from affect_memory.memory.settings import (
    DEFAULT_RECALL_SETTINGS,
    DENSE_RECALL,
    RECALL_WEIGHTS,
    RecallSettings,
    load_recall_settings,
    recall_settings_from_json,
    write_recall_settings,
)


def test_the_defaults_are_the_measured_design() -> None:
    settings = DEFAULT_RECALL_SETTINGS
    assert (settings.ranking, settings.dense_candidates, settings.lexical_candidates) == (
        "hybrid",
        128,
        64,
    )
    assert settings.lexical_weight == 0.6
    assert (settings.bm25_k1, settings.bm25_b) == (1.2, 0.75)
    assert (settings.state_lexical_weight, settings.topic_weight, settings.change_gain) == (
        0.2,
        0.3,
        0.2,
    )
    assert (settings.feedback_weight, settings.anchor_members, settings.state_age_scale) == (
        0.15,
        3,
        0.5,
    )
    assert (settings.topic_temperature, settings.state_cue_words) == (0.05, 50.0)
    assert settings.weights == RECALL_WEIGHTS
    assert (RECALL_WEIGHTS.recency_horizon_days, RECALL_WEIGHTS.recency_floor) == (120.0, 0.10)
    assert RECALL_WEIGHTS.model_dump(exclude={"recency_horizon_days", "recency_floor"}) == (
        DEFAULT_RETRIEVAL_WEIGHTS.model_dump(exclude={"recency_horizon_days", "recency_floor"})
    )
    assert (DENSE_RECALL.ranking, DENSE_RECALL.dense_candidates) == ("dense", 32)
    assert DENSE_RECALL.weights == DEFAULT_RETRIEVAL_WEIGHTS


def test_a_file_round_trips_and_missing_fields_keep_the_defaults(tmp_path: Path) -> None:
    settings = RecallSettings(
        dense_candidates=100,
        state_lexical_weight=0.25,
        topic_weight=0.1,
        topic_temperature=0.08,
        change_gain=0.0,
        state_cue_words=12.5,
        feedback_weight=0.3,
        anchor_members=5,
        state_age_scale=0.75,
        bm25_k1=0.9,
        bm25_b=0.4,
        weights=RetrievalWeights(recency_horizon_days=30.0, recency_floor=0.2),
    )
    path = write_recall_settings(settings, tmp_path / "weights.json")
    assert load_recall_settings(path) == settings
    (tmp_path / "partial.json").write_text('{"recency_floor": 0.3}')
    partial = load_recall_settings(tmp_path / "partial.json")
    assert partial.weights.recency_floor == 0.3
    assert partial.weights.recency_horizon_days == 120.0
    assert partial.dense_candidates == 128


_W = "w.json: "
_WEIGHTS = _W + "RetrievalWeights."
_SETTINGS = _W + "RecallSettings."


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"recency_flor": 1}', _W + "unknown field 'recency_flor' (did you mean 'recency_floor'"),
        ('{"recency_floor": 2}', _WEIGHTS + "recency_floor must be within [0, 1], got 2"),
        ('{"recency_floor": "0.2"}', _WEIGHTS + "recency_floor must be a number, got '0.2'"),
        ('{"dense_candidates": 0}', _SETTINGS + "dense_candidates must be >= 1, got 0"),
        ('{"dense_candidates": 5000}', _SETTINGS + "dense_candidates must be at most 1024"),
        ('{"dense_candidates": 1.5}', _SETTINGS + "dense_candidates must be an integer"),
        ('{"ranking": "sparse"}', _SETTINGS + "ranking input should be 'hybrid' or 'dense'"),
        ('{"recency_floor": 0.1, "recency_floor": 0.2}', _W + "invalid JSON: key 'recency_floor'"),
        ("[0.1]", _W + "expected a JSON object of recall settings, got [0.1]"),
        ('{"recency_floor": NaN}', _W + "invalid JSON: NaN is not a number JSON allows"),
    ],
)
def test_a_bad_file_is_refused_naming_the_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "w.json"
    path.write_text(content)
    with pytest.raises(InvalidInputError) as caught:
        load_recall_settings(path)
    assert str(caught.value).replace(str(path), "w.json").startswith(message)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"cannot read .*missing\.json"):
        load_recall_settings(tmp_path / "missing.json")


def test_to_json_is_flat_and_every_key_is_read_back() -> None:
    flat = DEFAULT_RECALL_SETTINGS.to_json()
    assert "weights" not in flat
    assert set(RetrievalWeights.model_fields) <= set(flat)
    assert recall_settings_from_json(json.loads(json.dumps(flat))) == DEFAULT_RECALL_SETTINGS


RECALL_MODULES = (
    "affect_memory.memory.recall.pipeline",
    "affect_memory.memory.recall.time_rule",
    "affect_memory.memory.recall.periods",
    "affect_memory.memory.recall.feedback",
    "affect_memory.memory.recall.life_topics",
    "affect_memory.memory.recall.fusion",
    "affect_memory.memory.recall.change_cues",
    "affect_memory.memory.recall.pool",
    "affect_memory.memory.recall.pruning",
    "affect_memory.memory.recall.explanation",
    "affect_memory.memory.recall.plan",
    "affect_memory.memory.index.lexical.bm25",
    "affect_memory.memory.index.lexical.search",
)
"""The modules of recall's read path."""

NOT_RULES = {
    "SECONDS_PER_DAY": "a unit",
    "DISTANCE_TOLERANCE": "how far Chroma's distances may stray past [0, 2] by rounding",
    "_SLACK": "the pruning's float tolerance",
    "_DENSE_SPAN": "when BM25 sums into an array rather than sorts: speed, not scores",
    "ALL_DOCS": "a sentinel",
    "CACHE_POSTINGS": "the postings cache's size",
    "WHOLE_USER_SHARE": "when the postings cache reads a user whole",
    "OWNERS_KEPT": "how many users' owner patterns an analyser keeps compiled",
}
"""The numeric module constants of the read path that are not ranking rules, and why."""


def test_no_rule_constant_lives_outside_the_settings() -> None:
    """Every number that shapes a ranking is a ``RecallSettings`` field: the read path's
    modules hold no other numeric constant than these units, tolerances and cache sizes."""
    found = {
        name
        for module in RECALL_MODULES
        for name, value in vars(importlib.import_module(module)).items()
        if isinstance(value, numbers.Number)
        and not isinstance(value, bool)
        and not name.startswith("__")
    }
    assert found == set(NOT_RULES)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("topic_weight", -0.1),
        ("anchor_members", 0),
        ("state_lexical_weight", 1.5),
        ("topic_temperature", 0.0),
        ("bm25_b", 2.0),
    ],
)
def test_a_rule_setting_out_of_range_is_refused_naming_it(field: str, value: float) -> None:
    with pytest.raises(InvalidInputError, match=f"RecallSettings.{field}"):
        recall_settings_from_json({field: value}, where="w.json")
