"""The gate's parameters are checked when made: each within its range, finite, of its type."""

from __future__ import annotations

import math
from typing import Any

import pytest

from affect_memory.gate.params import GateParams
from affect_memory.kernel.errors import AffectMemoryError


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("threshold", math.nan),
        ("threshold", -1.5),
        ("top_k", 0),
        ("top_k", True),
        ("top_k", 2.0),
        ("min_confidence", 1.5),
        ("centroid_weight", math.inf),
        ("centroid_weight", "0.5"),
        ("temperature", 0.0),
        ("temperature", 10.5),
        ("retrieve_threshold", False),
    ],
)
def test_a_value_out_of_range_or_of_another_type_is_refused_naming_it(
    field: str, value: Any
) -> None:
    with pytest.raises(AffectMemoryError, match=f"^{field} must"):
        GateParams(**{field: value})


@pytest.mark.parametrize(
    "fields",
    [
        {"threshold": -1.0, "temperature": 10.0, "min_confidence": 1.0, "centroid_weight": 0},
        {"temperature": 1e-6, "retrieve_threshold": 0.0, "top_k": 1},
    ],
)
def test_the_bounds_themselves_are_accepted(fields: dict[str, Any]) -> None:
    GateParams(**fields)  # raises if a bound is refused
