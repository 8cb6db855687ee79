"""Labelled ranking queries: one query's candidates with their features, and a stacked batch.

A ``LabelledQuery`` is what a person tuning retrieval collects from their own logs: the
candidates recall pooled for a query, each candidate's kernel features, and which of them
the user actually needed (one or several), whose query it was, and how many of the needed
memories the pool missed. A ``QueryBatch`` stacks many queries into ``(queries, candidates)``
arrays so scorers and metrics are vectorised; queries with fewer candidates are padded and
the padding is masked out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from affect_memory.kernel.errors import InvalidInputError

__all__ = ["LabelledQuery", "QueryBatch"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def _vector(
    name: str, values: Sequence[float] | NDArray[np.generic], dtype: type
) -> NDArray[Any]:
    array: NDArray[Any] = np.asarray(values, dtype=dtype)
    if array.ndim != 1:
        raise InvalidInputError(f"LabelledQuery.{name} must be one-dimensional")
    if dtype is np.float64 and not np.all(np.isfinite(array)):
        raise InvalidInputError(f"LabelledQuery.{name} must be finite")
    array.setflags(write=False)
    return array


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    """One query's candidates (kernel features per candidate) and the index of the relevant one."""

    distances: FloatArray
    ages_days: FloatArray
    significance: FloatArray
    recall_counts: IntArray
    episodes: BoolArray
    memory_valences: FloatArray
    relevant: int
    """The index of the (first) relevant candidate."""
    mood_valence: float = 0.0
    also_relevant: tuple[int, ...] = ()
    """Indices of further relevant candidates (a question with several evidence memories)."""
    user_id: str | None = None
    """Whose query it is: ``split_queries`` keeps each user's queries on one side."""
    outside: int = 0
    """Relevant memories that were not among the candidates (the pool missed them)."""

    def __post_init__(self) -> None:
        """Coerce the features to read-only arrays and check they agree with each other."""
        columns = {
            "distances": np.float64,
            "ages_days": np.float64,
            "significance": np.float64,
            "recall_counts": np.int64,
            "episodes": np.bool_,
            "memory_valences": np.float64,
        }
        for name, dtype in columns.items():
            object.__setattr__(self, name, _vector(name, getattr(self, name), dtype))
        size = len(self.distances)
        if size == 0:
            raise InvalidInputError("LabelledQuery needs at least one candidate")
        for name in columns:
            if len(getattr(self, name)) != size:
                raise InvalidInputError(
                    f"LabelledQuery.{name} has {len(getattr(self, name))} values, expected {size}"
                )
        if np.any((self.distances < 0) | (self.distances > 2)):
            raise InvalidInputError("LabelledQuery.distances must be cosine distances in [0, 2]")
        if np.any(self.recall_counts < 0):
            raise InvalidInputError("LabelledQuery.recall_counts must be >= 0")
        if np.any(np.abs(self.memory_valences) > 1):
            raise InvalidInputError("LabelledQuery.memory_valences must be within [-1, 1]")
        if isinstance(self.relevant, bool) or not 0 <= int(self.relevant) < size:
            raise InvalidInputError(
                f"LabelledQuery.relevant must index a candidate in [0, {size}), "
                f"got {self.relevant!r}"
            )
        object.__setattr__(self, "relevant", int(self.relevant))
        also = tuple(self.also_relevant)
        for index in also:
            if isinstance(index, bool) or not isinstance(index, int | np.integer) or not (
                0 <= int(index) < size
            ):
                raise InvalidInputError(
                    f"LabelledQuery.also_relevant must index candidates in [0, {size}), "
                    f"got {index!r}"
                )
        object.__setattr__(
            self, "also_relevant", tuple(sorted({int(i) for i in also} - {self.relevant}))
        )
        if isinstance(self.outside, bool) or not isinstance(self.outside, int) or self.outside < 0:
            raise InvalidInputError(
                f"LabelledQuery.outside must be an integer >= 0, got {self.outside!r}"
            )
        if self.user_id is not None and (not isinstance(self.user_id, str) or not self.user_id):
            raise InvalidInputError(
                f"LabelledQuery.user_id must be a non-empty string or None, got {self.user_id!r}"
            )
        mood = float(self.mood_valence)
        if not -1.0 <= mood <= 1.0:
            raise InvalidInputError(
                f"LabelledQuery.mood_valence must be within [-1, 1], got {mood}"
            )
        object.__setattr__(self, "mood_valence", mood)

    @property
    def size(self) -> int:
        """Number of candidates."""
        return len(self.distances)

    @property
    def targets(self) -> tuple[int, ...]:
        """Every relevant candidate's index, the first one first."""
        return (self.relevant, *self.also_relevant)


@dataclass(frozen=True, slots=True)
class QueryBatch:
    """Many labelled queries stacked into ``(queries, candidates)`` arrays with a padding mask."""

    distances: FloatArray
    ages_days: FloatArray
    significance: FloatArray
    recall_counts: IntArray
    episodes: BoolArray
    memory_valences: FloatArray
    mood_valence: FloatArray
    relevant: IntArray
    mask: BoolArray
    targets: BoolArray | None = None
    """Every relevant candidate of each query; None means only ``relevant``."""
    users: tuple[str | None, ...] = ()
    """Each query's user (empty: unknown for all)."""
    outside: IntArray | None = None
    """Each query's relevant memories that were not among its candidates (None: all 0)."""

    def __post_init__(self) -> None:
        """Check every array has the batch's shape and the relevant candidates are real."""
        shape = self.distances.shape
        if len(shape) == 2 and self.targets is None:
            targets = np.zeros(shape, dtype=np.bool_)
            if shape[0] and shape[1] and self.relevant.shape == (shape[0],):
                targets[np.arange(shape[0]), np.clip(self.relevant, 0, shape[1] - 1)] = True
            object.__setattr__(self, "targets", targets)
        if len(shape) == 2 and self.outside is None:
            object.__setattr__(self, "outside", np.zeros(shape[0], dtype=np.int64))
        if self.users and len(self.users) != shape[0]:
            raise InvalidInputError(f"QueryBatch.users must have {shape[0]} entries")
        if len(shape) != 2 or shape[0] == 0 or shape[1] == 0:
            raise InvalidInputError(f"QueryBatch.distances must be a non-empty 2-D array: {shape}")
        for name in ("ages_days", "significance", "recall_counts", "episodes",
                     "memory_valences", "mask"):
            if getattr(self, name).shape != shape:
                raise InvalidInputError(f"QueryBatch.{name} must have shape {shape}")
        for name in ("mood_valence", "relevant"):
            if getattr(self, name).shape != (shape[0],):
                raise InvalidInputError(f"QueryBatch.{name} must have shape ({shape[0]},)")
        if np.any((self.relevant < 0) | (self.relevant >= shape[1])):
            raise InvalidInputError("QueryBatch.relevant must index a candidate column")
        if not np.all(self.mask[np.arange(shape[0]), self.relevant]):
            raise InvalidInputError("QueryBatch.relevant must point at an unmasked candidate")
        assert self.targets is not None and self.outside is not None
        if self.targets.shape != shape or np.any(self.targets & ~self.mask):
            raise InvalidInputError(f"QueryBatch.targets must be a mask of shape {shape}")
        if not np.all(self.targets[np.arange(shape[0]), self.relevant]):
            raise InvalidInputError("QueryBatch.targets must include each relevant candidate")

    @property
    def n_queries(self) -> int:
        """Number of queries (rows)."""
        return int(self.distances.shape[0])

    @property
    def n_candidates(self) -> int:
        """Width of the batch: the largest candidate count (columns)."""
        return int(self.distances.shape[1])

    @classmethod
    def from_queries(cls, queries: Sequence[LabelledQuery]) -> QueryBatch:
        """Stack queries; shorter candidate lists are padded and masked."""
        if len(queries) == 0:
            raise InvalidInputError("QueryBatch needs at least one query")
        for query in queries:
            if not isinstance(query, LabelledQuery):
                raise InvalidInputError(f"expected LabelledQuery, got {type(query).__name__}")
        rows, width = len(queries), max(query.size for query in queries)
        # Padding values are valid features so the scorer never sees NaN; the mask removes them.
        distances = np.full((rows, width), 2.0)
        ages = np.zeros((rows, width))
        significance = np.zeros((rows, width))
        recalls = np.zeros((rows, width), dtype=np.int64)
        episodes = np.zeros((rows, width), dtype=np.bool_)
        valences = np.zeros((rows, width))
        mask = np.zeros((rows, width), dtype=np.bool_)
        targets = np.zeros((rows, width), dtype=np.bool_)
        for row, query in enumerate(queries):
            n = query.size
            distances[row, :n] = query.distances
            ages[row, :n] = query.ages_days
            significance[row, :n] = query.significance
            recalls[row, :n] = query.recall_counts
            episodes[row, :n] = query.episodes
            valences[row, :n] = query.memory_valences
            mask[row, :n] = True
            targets[row, list(query.targets)] = True
        users = tuple(query.user_id for query in queries)
        return cls(
            distances=distances,
            ages_days=ages,
            significance=significance,
            recall_counts=recalls,
            episodes=episodes,
            memory_valences=valences,
            mood_valence=np.array([query.mood_valence for query in queries]),
            relevant=np.array([query.relevant for query in queries], dtype=np.int64),
            mask=mask,
            targets=targets,
            users=users if any(user is not None for user in users) else (),
            outside=np.array([query.outside for query in queries], dtype=np.int64),
        )

    @property
    def labels_outside(self) -> int:
        """Relevant memories, over all queries, that were not among the candidates."""
        assert self.outside is not None
        return int(self.outside.sum())

    def to_queries(self) -> tuple[LabelledQuery, ...]:
        """Unstack into one ``LabelledQuery`` per row, dropping padding."""
        assert self.targets is not None and self.outside is not None
        queries = []
        for row in range(self.n_queries):
            keep = self.mask[row]
            relevant = int(np.count_nonzero(keep[: self.relevant[row]]))
            targets = np.flatnonzero(self.targets[row, keep]).tolist()
            queries.append(
                LabelledQuery(
                    distances=self.distances[row, keep],
                    ages_days=self.ages_days[row, keep],
                    significance=self.significance[row, keep],
                    recall_counts=self.recall_counts[row, keep],
                    episodes=self.episodes[row, keep],
                    memory_valences=self.memory_valences[row, keep],
                    relevant=relevant,
                    mood_valence=float(self.mood_valence[row]),
                    also_relevant=tuple(t for t in targets if t != relevant),
                    user_id=self.users[row] if self.users else None,
                    outside=int(self.outside[row]),
                )
            )
        return tuple(queries)

    def take(self, rows: Sequence[int] | IntArray) -> QueryBatch:
        """The sub-batch of the given query rows, in that order."""
        index = np.asarray(rows, dtype=np.int64)
        assert self.targets is not None and self.outside is not None
        return QueryBatch(
            distances=self.distances[index],
            ages_days=self.ages_days[index],
            significance=self.significance[index],
            recall_counts=self.recall_counts[index],
            episodes=self.episodes[index],
            memory_valences=self.memory_valences[index],
            mood_valence=self.mood_valence[index],
            relevant=self.relevant[index],
            mask=self.mask[index],
            targets=self.targets[index],
            users=tuple(self.users[i] for i in index.tolist()) if self.users else (),
            outside=self.outside[index],
        )
