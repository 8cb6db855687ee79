"""What the gate tests share: the labelled set, and embedders that count or are a fixed table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
EVAL_PATH = ROOT / "fixtures" / "intent_eval.jsonl"
MIN_ACCURACY = 0.90


def eval_rows() -> list[dict[str, str]]:
    """The labelled evaluation set, one dict per line."""
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


SCHEDULING = [
    "Can we move my meeting to 3pm?",
    "Book a dentist appointment for Tuesday morning.",
    "Put lunch with Sam on my calendar for Friday.",
    "Reschedule the call with the client to next week.",
    "Add the team sync at 10am to my schedule.",
    "Cancel my 4 o'clock appointment.",
    "Set up a meeting with Priya on Thursday afternoon.",
]


def preset_exemplars() -> dict[str, Any]:
    """The English preset, parsed, to change a copy of it."""
    from affect_memory.gate.exemplars import DEFAULT_EXEMPLARS_PATH

    data: dict[str, Any] = json.loads(DEFAULT_EXEMPLARS_PATH.read_text(encoding="utf-8"))
    return data


def write_exemplars(tmp_path: Path, data: Any) -> Path:
    """``data`` as an exemplar file (a string is written as it is)."""
    path = tmp_path / "exemplars.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path
