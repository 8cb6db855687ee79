"""The gate's numbers: how scores blend, how confidence spreads, when it falls back to CASUAL."""

from __future__ import annotations

import math
from dataclasses import dataclass

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = ["DEFAULT_GATE_PARAMS", "GateParams"]


def _check_unit(name: str, value: float, *, low: float = 0.0, high: float = 1.0) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{name} must be a finite number, got {shown(value)}")
    if not low <= value <= high:
        raise InvalidInputError(f"{name} must be within [{low}, {high}], got {shown(value)}")


@dataclass(frozen=True, kw_only=True)
class GateParams:
    """Tunable numbers of the gate's scoring, confidence and fallback."""

    centroid_weight: float = 0.5
    """Weight of the centroid similarity against the top-k exemplar similarity (tuned)."""
    top_k: int = 3
    """How many nearest exemplars of an intent are averaged (tuned)."""
    temperature: float = 0.05
    """Softmax temperature turning scores into confidences (tuned for spread, arbitrary)."""
    threshold: float = 0.20
    """Below this winning score the message is CASUAL: nothing in the exemplars is close."""
    min_confidence: float = 0.35
    """Below this winning confidence the message is CASUAL: no intent clearly wins."""
    retrieve_threshold: float = 0.50
    """Confidence a retrieval intent needs to trigger retrieval on its own."""

    def __post_init__(self) -> None:
        _check_unit("centroid_weight", self.centroid_weight)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise InvalidInputError(f"top_k must be an integer >= 1, got {shown(self.top_k)}")
        _check_unit("temperature", self.temperature, low=1e-6, high=10.0)
        _check_unit("threshold", self.threshold, low=-1.0)
        _check_unit("min_confidence", self.min_confidence)
        _check_unit("retrieve_threshold", self.retrieve_threshold)


DEFAULT_GATE_PARAMS = GateParams()
"""The preset the numbers were tuned with (docs/guides/intent-gate.md)."""
