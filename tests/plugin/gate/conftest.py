"""The gate on the session's real model, built once."""

from __future__ import annotations

from typing import Any

import pytest

from affect_memory.gate.classifier import EmbeddingIntentGate


@pytest.fixture(scope="session")
def gate(embedder: Any) -> EmbeddingIntentGate:
    """The default gate (English preset) over the session's embedder."""
    return EmbeddingIntentGate(embedder=embedder)
