"""How a batched recall must agree with one recall per query: within a tolerance, same order.

Embedding a query inside a batch differs from embedding it alone in the last bits, by an
amount that depends on the CPU, so batched and single results are never compared bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from plugin.memory.results import RECALL_MANY_TOLERANCE

EMBEDDED = ("score", "distance", "similarity")
"""The factors that carry the query embedding's last bits; every other one is exact."""


def largest_difference(
    single: Sequence[Mapping[str, Any]], batched: Sequence[Mapping[str, Any]]
) -> float:
    """The largest absolute difference of an embedded factor between the same ids."""
    by_id = {hit["id"]: hit for hit in single}
    assert set(by_id) == {hit["id"] for hit in batched}, "both must return the same memories"
    return max(
        (abs(hit[name] - by_id[hit["id"]][name]) for hit in batched for name in EMBEDDED),
        default=0.0,
    )


def assert_recall_agrees(
    single: Sequence[Mapping[str, Any]],
    batched: Sequence[Mapping[str, Any]],
    tolerance: float = RECALL_MANY_TOLERANCE,
) -> None:
    """Same memories, embedded factors within ``tolerance``, the others exactly, and the same
    order except between results whose scores are within ``tolerance`` (a near tie)."""
    assert largest_difference(single, batched) <= tolerance
    by_id = {hit["id"]: hit for hit in single}
    for hit in batched:
        exact = {key: value for key, value in hit.items() if key not in EMBEDDED}
        assert exact == {k: v for k, v in by_id[hit["id"]].items() if k not in EMBEDDED}
    position = {hit["id"]: index for index, hit in enumerate(single)}
    for first, later in combinations(batched, 2):
        if position[first["id"]] > position[later["id"]]:
            assert abs(first["score"] - later["score"]) <= tolerance, (
                f"{first['id']} and {later['id']} swapped places but are not a near tie"
            )
