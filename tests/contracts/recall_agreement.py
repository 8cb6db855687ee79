"""How a batched recall must agree with one recall per query: within a tolerance, same order.

Embedding a query inside a batch differs from embedding it alone in the last bits, by an
amount that depends on the CPU, so batched and single results are never compared bit for bit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from affect_memory.memory.results import RECALL_MANY_TOLERANCE

EMBEDDED = ("score", "distance", "similarity")
"""The factors that carry the query embedding's last bits; every other one is exact, but for
the relevance parts made from the cosine and the cosine a time rule's line prints."""

RELEVANCE_EMBEDDED = ("fused", "dense", "cosine", "topic", "closest")
"""The relevance parts made from the query's embedding: the cosine, what is scaled from it, the
topic agreement and the resemblance to the closest memory (which memory is closest depends on
the cosines; BM25 and its scaled part are exact)."""

_DECIMAL = re.compile(r"\d+\.\d+")


def _embedded(hit: Mapping[str, Any]) -> dict[str, float]:
    values = {name: float(hit[name]) for name in EMBEDDED}
    for name in RELEVANCE_EMBEDDED:
        part = (hit.get("relevance") or {}).get(name)
        if part is not None:
            values[f"relevance.{name}"] = float(part)
    return values


def _exact(hit: Mapping[str, Any]) -> dict[str, Any]:
    exact = {key: value for key, value in hit.items() if key not in EMBEDDED}
    if exact.get("relevance") is not None:
        exact["relevance"] = {
            key: (value if key not in RELEVANCE_EMBEDDED else value is None)
            for key, value in exact["relevance"].items()
        }
    if "time_rule" in exact:  # the cosine it prints is rounded, not exact
        exact["time_rule"] = _DECIMAL.sub("#", exact["time_rule"])
    return exact


def largest_difference(
    single: Sequence[Mapping[str, Any]], batched: Sequence[Mapping[str, Any]]
) -> float:
    """The largest absolute difference of an embedded factor between the same ids."""
    by_id = {hit["id"]: hit for hit in single}
    assert set(by_id) == {hit["id"] for hit in batched}, "both must return the same memories"
    differences = []
    for hit in batched:
        mine, theirs = _embedded(hit), _embedded(by_id[hit["id"]])
        assert set(mine) == set(theirs)
        differences.extend(abs(value - theirs[name]) for name, value in mine.items())
    return max(differences, default=0.0)


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
        assert _exact(hit) == _exact(by_id[hit["id"]])
    position = {hit["id"]: index for index, hit in enumerate(single)}
    for first, later in combinations(batched, 2):
        if position[first["id"]] > position[later["id"]]:
            assert abs(first["score"] - later["score"]) <= tolerance, (
                f"{first['id']} and {later['id']} swapped places but are not a near tie"
            )
