"""Exemplar files: strict validation, custom intents, and errors that name the file and place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from affect_memory.errors import ExemplarError
from affect_memory.gate.exemplars import IntentExemplars, load_exemplars
from affect_memory.kernel.appraisal import BUILTIN_INTENTS
from tests.plugin.gate.helpers import (
    SCHEDULING,
    preset_exemplars,
    write_exemplars,
)

# -- exemplar files ----------------------------------------------------------------------------


def test_an_exemplar_file_with_custom_intents_loads(tmp_path: Path) -> None:
    data = preset_exemplars()
    data["intents"]["SCHEDULING"] = SCHEDULING
    exemplars = load_exemplars(write_exemplars(tmp_path, data))
    assert isinstance(exemplars, IntentExemplars)
    assert exemplars.labels == (*BUILTIN_INTENTS, "SCHEDULING")
    assert exemplars.meta["language"] == "en"


def _broken(change: str) -> Any:
    data = preset_exemplars()
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
    path = write_exemplars(tmp_path, _broken(change))
    with pytest.raises(ExemplarError, match=message) as caught:
        load_exemplars(path)
    assert str(path) in str(caught.value)


def test_unreadable_exemplar_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ExemplarError, match="line 1 column 2"):
        load_exemplars(write_exemplars(tmp_path, "{oops"))
    with pytest.raises(ExemplarError, match="cannot read"):
        load_exemplars(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"_meta": {}, "intents": {"ABUSE": ["caf\xe9"]}}')
    with pytest.raises(ExemplarError, match="not UTF-8"):
        load_exemplars(latin)


