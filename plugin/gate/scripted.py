"""A model adapter for running without a language model: a real intent gate, scripted replies.

The demo and ``affect-memory serve --model scripted`` use it, so their turns classify and
retrieve as a real deployment's would; only the reply text is played back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from affect_memory.kernel.adapters.scripted_model import ScriptedModel
from affect_memory.kernel.protocols import GateInput, GateResult, GenerateInput

__all__ = ["GatedScriptedModel"]


class GatedScriptedModel:
    """A ``ModelAdapter`` whose gate is ``classifier.classify`` (the embedding intent gate's
    call, run in a thread) and whose replies are ``replies`` in order, then ``"Okay."``."""

    def __init__(self, classifier: Any, replies: Sequence[str] = ()) -> None:
        """Gate with ``classifier`` (an ``EmbeddingIntentGate``); reply with ``replies``."""
        self._classifier = classifier
        self._script = ScriptedModel(replies=[[reply] for reply in replies])
        self.predictions: list[Any] = []
        """Every prediction the gate made, in order."""

    async def gate(self, request: GateInput) -> GateResult:
        """The gate's intent and retrieval call for the message; it always responds."""
        prediction = await asyncio.to_thread(self._classifier.classify, request.message)
        self.predictions.append(prediction)
        return GateResult(
            intent=prediction.intent,
            should_respond=True,
            should_retrieve=prediction.should_retrieve,
        )

    def generate(self, request: GenerateInput) -> AsyncIterator[str]:
        """The next scripted reply."""
        return self._script.generate(request)
