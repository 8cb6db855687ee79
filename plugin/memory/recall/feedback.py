"""Feedback from the query's closest memory, for current-state questions.

A question about the present is usually closest to the old, plainly stated fact ("Where does
Tyler live?" / "My son Tyler lives with his mom in Oklahoma City"), while the update that
replaced it shares few of the question's words and less of its cosine ("Tyler moved in with me
full-time"). The update is about the same thing as the fact it replaces, though, so it
resembles that memory more than it resembles the question. So the current-state rule blends
each pool member's cosine with the query and its cosine with the query's *closest* member,
the pool member of highest cosine, at the settings' ``feedback_weight`` (pseudo-relevance
feedback, as in Rocchio's, from one member). The closest member keeps its own cosine: it
would otherwise gain from resembling itself. No words, topics or data: only the embeddings
the pool already holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Feedback", "closest_feedback"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Feedback:
    """Each member's cosine blended with its resemblance to the query's closest member."""

    cosines: FloatArray
    """``(1 - weight) * cosine + weight * closest``, per member."""
    closest: FloatArray
    """Each member's cosine with the closest member (the closest member's own: its cosine
    with the query; a member without an embedding: its cosine with the query too)."""
    closest_at: int | None
    """The closest member's position in the pool, or None when no member has an embedding."""


def closest_feedback(
    cosines: FloatArray, members: npt.ArrayLike, present: npt.NDArray[np.bool_], weight: float
) -> Feedback:
    """The feedback of a pool's closest member on every member, at ``weight``.

    ``cosines`` are the members' cosines with the query, ``members`` their embeddings (one
    row each) and ``present`` which rows hold one; a member without one keeps its cosine.
    Ties for the closest go to the first in pool order.
    """
    cosines = np.asarray(cosines, dtype=np.float64)
    if not present.any():
        return Feedback(cosines.copy(), cosines.copy(), None)
    held = np.flatnonzero(present)
    closest_at = int(held[int(np.argmax(cosines[held]))])
    rows = np.asarray(members, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1)
    unit = rows / np.where(norms > 0, norms, 1.0)[:, None]
    resemblance = np.where(present, unit @ unit[closest_at], cosines)
    resemblance[closest_at] = cosines[closest_at]
    blended = (1.0 - weight) * cosines + weight * resemblance
    return Feedback(blended, resemblance, closest_at)
