"""The labelled exemplar texts the gate compares a message with, read and checked strictly.

An exemplar file is ``{"_meta": {...}, "intents": {"ABUSE": [...], ...}}``: exactly those two
keys, all seven built-in intents present, labels matching the kernel's custom-intent pattern,
non-empty strings of at most 1,000 characters, and no text repeated within or across intents.
Extra keys of ``intents`` are custom intents.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from affect_memory.errors import ExemplarError
from affect_memory.kernel.appraisal import BUILTIN_INTENTS, CUSTOM_INTENT_PATTERN
from affect_memory.kernel.errors import shown

__all__ = [
    "DEFAULT_EXEMPLARS_PATH",
    "MAX_EXEMPLAR_CHARS",
    "IntentExemplars",
    "load_exemplars",
]

DEFAULT_EXEMPLARS_PATH = Path(__file__).with_name("intent_exemplars.json")
"""The English preset of labelled exemplars, shipped in the package."""

MAX_EXEMPLAR_CHARS = 1000
"""Longest exemplar accepted; the model reads about 256 word pieces anyway."""


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
