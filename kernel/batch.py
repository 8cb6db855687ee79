"""Columnar memory scoring and top-k ranking over numpy arrays, identical to the scalar scorer.

``score_batch`` and ``rank_batch`` validate raw arrays; ``rank_columns`` ranks
``CandidateColumns`` whose values were checked where they came from (kernel candidates, or a
store's mapper), and is the one ranking path of engine turns and of recalls. Private
functions compute, vectorised and in place. Every score follows the scalar path's
floating-point operations in the same order
(``(similarity * recency * salience + bonus) * congruence``), so results agree bit for bit
with :func:`affect_memory.kernel.retrieval.score_candidate` whenever the ages in days agree.

Long batches are validated and scored in cache-sized blocks, so each input is read from memory
about once and each output written once: at a million candidates memory traffic, not
arithmetic, is the bound.

The module is about 640 lines because validation, block scoring and top-k selection share
the column checks and together must keep the scalar path's operation order; in one file that
order can be checked against ``affect_memory.kernel.retrieval`` side by side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from affect_memory.kernel.bounds import check_limit, check_number, require_zoned_now
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    SECONDS_PER_DAY,
    RetrievalWeights,
)

__all__ = [
    "DISTANCE_TOLERANCE",
    "BatchScores",
    "CandidateColumns",
    "RankedColumns",
    "rank_batch",
    "rank_columns",
    "score_batch",
]

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.intp]
Counts = npt.NDArray[np.integer[Any]]

DISTANCE_TOLERANCE: Final = 1e-6
"""Float noise around [0, 2] that is clamped rather than refused (vector stores produce it;
-2.4e-7 was seen from Chroma)."""

_BLOCK: Final = 65536
"""Candidates per block: a block's columns and scratch stay in (L3) cache between passes."""

_RECALL_TABLE_LIMIT: Final = 4096
"""Largest recall-count lookup table; uncapped counts beyond it are computed once each."""

_FULL_SORT_BELOW: Final = 512
"""Below this many candidates a full sort is cheaper than partitioning first."""

_BLOCK_MAXIMA: Final = 1024
_BLOCK_MAXIMA_FROM: Final = 16384
"""From this many candidates, for a reach of at most a quarter of ``_BLOCK_MAXIMA``, the top-k
threshold is bounded by 1024 block maxima first."""


@dataclass(frozen=True, slots=True)
class BatchScores:
    """Final scores and every factor behind them, one read-only float64 array each."""

    score: FloatArray
    similarity: FloatArray
    recency: FloatArray
    salience: FloatArray
    congruence: FloatArray
    episode_bonus: FloatArray

    def __len__(self) -> int:
        """The number of scored candidates."""
        return int(self.score.shape[0])


# ---------------------------------------------------------------- validation (public edge)


def _column(name: str, value: Any, kinds: str, expected: str) -> npt.NDArray[Any]:
    array = np.asarray(value)
    if array.ndim != 1:
        raise InvalidInputError(f"{name} must be a 1-D array, got shape {array.shape}")
    if array.dtype.kind not in kinds:
        raise InvalidInputError(f"{name} must be {expected}, got dtype {array.dtype}")
    return array


def _float_column(name: str, value: Any) -> FloatArray:
    array = _column(name, value, "fiu", "a numeric array (bool is not a number)")
    return np.asarray(array, dtype=np.float64)


def _first_bad(
    name: str, array: npt.NDArray[Any], bad: npt.NDArray[np.bool_], bound: str, offset: int = 0
) -> str:
    index = int(np.flatnonzero(bad)[0])
    return f"{name} must be {bound}, got {array[index].item()!r} at index {offset + index}"


def _require_finite(name: str, array: FloatArray, offset: int = 0) -> None:
    # One reduction: a sum of finite values is finite unless it overflows, which is rechecked.
    if array.size and not math.isfinite(np.add.reduce(array)):
        bad = ~np.isfinite(array)
        if bad.any():
            raise InvalidInputError(_first_bad(name, array, bad, "finite", offset))


def _checked_distances(distances: FloatArray, offset: int) -> FloatArray:
    """The block itself, or a clamped copy when float noise put it just outside [0, 2]."""
    low = float(np.minimum.reduce(distances))
    high = float(np.maximum.reduce(distances))
    if not (low >= -DISTANCE_TOLERANCE and high <= 2.0 + DISTANCE_TOLERANCE):
        bad = ~((distances >= -DISTANCE_TOLERANCE) & (distances <= 2.0 + DISTANCE_TOLERANCE))
        raise InvalidInputError(
            _first_bad("distances", distances, bad, "cosine distances within [0, 2]", offset)
        )
    if low < 0.0 or high > 2.0:
        return np.clip(distances, 0.0, 2.0)
    return distances


def _has_missing(name: str, moments: FloatArray, offset: int) -> bool:
    """Refuse infinities; say whether the block may hold NaN (a missing timestamp)."""
    if math.isfinite(np.add.reduce(moments)):
        return False
    infinite = np.isinf(moments)
    if infinite.any():
        raise InvalidInputError(
            _first_bad(name, moments, infinite, "finite (NaN marks missing)", offset)
        )
    return True  # (or a finite sum overflowed; the NaN mask is then just empty)


def _check_counts(counts: Counts, offset: int) -> None:
    if counts.dtype.kind == "i" and int(np.minimum.reduce(counts)) < 0:
        raise InvalidInputError(_first_bad("recall_counts", counts, counts < 0, ">= 0", offset))


def _checked_mood(mood_valence: Any, congruence_on: Any) -> float:
    try:
        mood = check_number(mood_valence)
    except ValueError as error:
        raise InvalidInputError(f"mood_valence {error}") from None
    if not isinstance(congruence_on, bool):
        raise InvalidInputError(f"congruence_on must be a bool, got {congruence_on!r}")
    return mood


def score_batch(
    distances: npt.ArrayLike,
    *,
    timestamps: npt.ArrayLike | None = None,
    ages_days: npt.ArrayLike | None = None,
    significance: npt.ArrayLike,
    recall_counts: npt.ArrayLike,
    episodes: npt.ArrayLike,
    memory_valences: npt.ArrayLike,
    now: datetime | None = None,
    mood_valence: float = 0.0,
    congruence_on: bool = True,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> BatchScores:
    """Score a batch of candidates held as columns, exactly as ``score_candidate`` would.

    Give ``timestamps`` (epoch seconds, with a zoned ``now``) or ``ages_days``; NaN in either
    marks a missing or unparsable timestamp and gets the recency fallback, and with neither
    every candidate gets it. Distances within 1e-6 outside [0, 2] are clamped; significance
    is clamped to [0, 1] as the scalar path does.

    >>> result = score_batch([0.0, 1.0], ages_days=[0.0, 90.0], significance=[0.0, 0.0],
    ...                      recall_counts=[0, 0], episodes=[False, True],
    ...                      memory_valences=[0.0, 0.0])
    >>> result.score.tolist()  # 1 * 1 * 1 and 0.5 * 0.40 * 1 + 0.05
    [1.0, 0.25]
    """
    if not isinstance(weights, RetrievalWeights):
        raise InvalidInputError(f"weights must be RetrievalWeights, got {weights!r}")
    mood = _checked_mood(mood_valence, congruence_on)
    distance = _float_column("distances", distances)
    columns: dict[str, npt.NDArray[Any]] = {
        "significance": _float_column("significance", significance),
        "recall_counts": _column("recall_counts", recall_counts, "iu", "an integer array"),
        "episodes": _column("episodes", episodes, "b", "a bool array"),
        "memory_valences": _float_column("memory_valences", memory_valences),
    }
    if timestamps is not None and ages_days is not None:
        raise InvalidInputError("give timestamps or ages_days, not both")
    moments: FloatArray | None = None
    now_epoch: float | None = None
    if now is not None:
        now_epoch = require_zoned_now(now).timestamp()
    if timestamps is not None:
        if now_epoch is None:
            raise InvalidInputError("timestamps need now, a zoned datetime")
        moments = columns["timestamps"] = _float_column("timestamps", timestamps)
    elif ages_days is not None:
        moments = columns["ages_days"] = _float_column("ages_days", ages_days)
        now_epoch = None  # ages are already relative to a clock
    n = distance.shape[0]
    for name, column in columns.items():
        if column.shape[0] != n:
            raise InvalidInputError(
                f"{name} has {column.shape[0]} values but distances has {n}; "
                "every column must have one value per candidate"
            )
    block = _Block(
        distances=distance,
        moments=moments,
        now_epoch=now_epoch,
        significance=columns["significance"],
        recall_counts=columns["recall_counts"],
        episodes=columns["episodes"],
        valences=columns["memory_valences"],
    )
    return _score_columns(block, mood, congruence_on, weights)


# ---------------------------------------------------------------- vectorised compute


@lru_cache(maxsize=32)
def _recall_table(recall_weight: float, recall_cap: float) -> tuple[FloatArray, bool]:
    """``min(cap, weight * log1p(k))`` for small k, computed with ``math.log1p`` as the scalar
    path does; the flag says whether every larger count gives the table's last value."""
    values: list[float] = []
    saturates = False
    for count in range(_RECALL_TABLE_LIMIT):
        value = min(recall_cap, recall_weight * math.log1p(count))
        values.append(value)
        # Monotone in the count when the weight is non-negative, so the cap, once hit, stays.
        if recall_weight >= 0 and value == recall_cap:
            saturates = True
            break
    table = np.array(values, dtype=np.float64)
    table.flags.writeable = False
    return table, saturates


def _recall_terms(counts: Counts, weights: RetrievalWeights, out: FloatArray) -> FloatArray:
    table, saturates = _recall_table(weights.recall_weight, weights.recall_cap)
    if counts.dtype != np.intp:
        counts = np.minimum(counts, np.iinfo(np.intp).max).astype(np.intp)
    if saturates or int(np.maximum.reduce(counts)) < table.shape[0]:
        return np.take(table, counts, mode="clip", out=out)
    # Weights that do not reach the cap within the table: compute each distinct count once.
    distinct, inverse = np.unique(counts, return_inverse=True)
    terms = [
        min(weights.recall_cap, weights.recall_weight * math.log1p(int(count)))
        for count in distinct
    ]
    return np.take(np.array(terms, dtype=np.float64), inverse, out=out)


def _select(
    mask: npt.NDArray[np.bool_], chosen: float, other: float, out: FloatArray
) -> FloatArray:
    """``chosen`` where ``mask`` else ``other``, exactly, without a (slow) masked write."""
    step = chosen - other
    if other + step == chosen:
        # mask * step is exactly step or a zero, and other + a zero is other (+0.0 for 0.0).
        np.multiply(mask, step, out=out)
        if other != 0.0 or step < 0.0:
            np.add(out, other, out=out)
        return out
    out.fill(other)
    np.putmask(out, mask, chosen)
    return out


def _congruence_factor(
    mood_valence: float, congruence_on: bool, weights: RetrievalWeights
) -> float | None:
    """The factor a same-sign memory gets, or None when congruence is off for this mood."""
    if not congruence_on or abs(mood_valence) < weights.congruence_threshold:
        return None
    return weights.congruence_negative if mood_valence < 0 else weights.congruence_positive


@dataclass(frozen=True, slots=True)
class _Block:
    """The aligned input columns of the candidates a run scores, or of one block of them."""

    distances: FloatArray
    moments: FloatArray | None
    """Epoch seconds when ``now_epoch`` is given, else ages in days; None: every timestamp
    missing."""
    now_epoch: float | None
    significance: FloatArray
    recall_counts: Counts
    episodes: npt.NDArray[np.bool_]
    valences: FloatArray
    offset: int = 0
    """Index of the first row within the whole run, so errors name the caller's index."""

    def rows(self, start: int, stop: int) -> _Block:
        """Rows ``start`` to ``stop`` of every column, as views; the block itself when whole."""
        if start == 0 and stop == self.distances.shape[0]:
            return self
        return _Block(
            distances=self.distances[start:stop],
            moments=None if self.moments is None else self.moments[start:stop],
            now_epoch=self.now_epoch,
            significance=self.significance[start:stop],
            recall_counts=self.recall_counts[start:stop],
            episodes=self.episodes[start:stop],
            valences=self.valences[start:stop],
            offset=self.offset + start,
        )


@dataclass(frozen=True, slots=True)
class _Scoring:
    """What every block of a run is scored with, and whether its columns are trusted."""

    mood_valence: float
    factor: float | None
    """The factor a same-sign memory gets, or None when congruence is off for this mood."""
    weights: RetrievalWeights
    checked: bool
    """The columns were checked where they came from: blocks skip validation."""


_OUTPUT_ROWS: Final = 6
"""Rows of a run's output array: score, similarity, recency, salience, congruence, bonus."""


def _score_columns(
    columns: _Block,
    mood_valence: float,
    congruence_on: bool,
    weights: RetrievalWeights,
    *,
    checked: bool = False,
) -> BatchScores:
    """Validate (unless ``checked``) and score ``columns`` block by block."""
    n = columns.distances.shape[0]
    # One allocation for all six outputs: a single mapping faults in far fewer pages than six
    # (at a million candidates, first-touching fresh memory costs about as much as scoring).
    outputs = np.empty((_OUTPUT_ROWS, n))
    score, similarity, recency, salience, congruence, bonus = outputs
    factor = _congruence_factor(mood_valence, congruence_on, weights)
    if factor is None:
        congruence.fill(1.0)
    if columns.moments is None:
        recency.fill(weights.recency_fallback)
    scoring = _Scoring(mood_valence, factor, weights, checked)
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        _score_block(columns.rows(start, stop), scoring, outputs[:, start:stop])
    for array in (score, similarity, recency, salience, congruence, bonus):
        array.flags.writeable = False
    return BatchScores(
        score=score,
        similarity=similarity,
        recency=recency,
        salience=salience,
        congruence=congruence,
        episode_bonus=bonus,
    )


def _score_block(block: _Block, scoring: _Scoring, out: FloatArray) -> None:
    """Check one block of every column (unless ``scoring.checked``), then write its scores into
    ``out``: the block's columns of the run's output rows, in ``_OUTPUT_ROWS`` order."""
    score, similarity, recency, salience, congruence, bonus = out
    weights, offset, moments = scoring.weights, block.offset, block.moments
    distances = block.distances
    if not scoring.checked:
        distances = _checked_distances(distances, offset)
        _require_finite("significance", block.significance, offset)
        _require_finite("memory_valences", block.valences, offset)
        _check_counts(block.recall_counts, offset)

    # similarity = 1 - distance / 2
    np.divide(distances, 2.0, out=similarity)
    np.subtract(1.0, similarity, out=similarity)

    # recency = min(1, max(floor, 1 - max(0, age) / horizon)). For age < 0 the inner value is
    # already >= 1 and the outer min gives 1 either way, so max(0, age) can be dropped exactly.
    # (np.clip would be one pass instead of two, but costs more per call than it saves.)
    if moments is not None:
        now_epoch = block.now_epoch
        name = "ages_days" if now_epoch is None else "timestamps"
        if scoring.checked:
            missing = not math.isfinite(np.add.reduce(moments))
        else:
            missing = _has_missing(name, moments, offset)
        unknown = np.isnan(moments) if missing else None
        if now_epoch is None:
            np.divide(moments, weights.recency_horizon_days, out=recency)
        else:  # age in days = (now - timestamp) / 86400, as timedelta.total_seconds() / 86400
            np.subtract(now_epoch, moments, out=recency)
            np.divide(recency, SECONDS_PER_DAY, out=recency)
            np.divide(recency, weights.recency_horizon_days, out=recency)
        np.subtract(1.0, recency, out=recency)
        np.maximum(recency, weights.recency_floor, out=recency)
        np.minimum(recency, 1.0, out=recency)
        if unknown is not None:
            np.putmask(recency, unknown, weights.recency_fallback)

    # salience = 1 + weight * clamp(significance, 0, 1) + min(cap, weight * log1p(count))
    np.maximum(block.significance, 0.0, out=salience)
    np.minimum(salience, 1.0, out=salience)
    np.multiply(weights.significance_weight, salience, out=salience)
    np.add(1.0, salience, out=salience)
    np.add(salience, _recall_terms(block.recall_counts, weights, out=score), out=salience)

    _select(block.episodes, weights.episode_bonus, 0.0, out=bonus)

    np.multiply(similarity, recency, out=score)
    np.multiply(score, salience, out=score)
    np.add(score, bonus, out=score)

    if scoring.factor is not None:
        valences = block.valences
        congruent = (
            np.greater(valences, 0.0) if scoring.mood_valence > 0 else np.less(valences, 0.0)
        )
        _select(congruent, scoring.factor, 1.0, out=congruence)
        # x * 1.0 == x exactly, so multiplying every score matches the scalar path.
        np.multiply(score, congruence, out=score)


# ---------------------------------------------------------------- ranking


def _id_column(ids: Any) -> npt.NDArray[Any]:
    """Ids as an array that orders by Unicode code point: a numpy str array, or integer ranks.

    Numpy str arrays drop trailing NUL characters, so ids that end in one are replaced by their
    rank in Python's (code-point) order instead.
    """
    if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":
        if ids.ndim != 1:
            raise InvalidInputError(f"ids must be a 1-D array, got shape {ids.shape}")
        return ids
    values = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    if not all(type(value) is str for value in values):
        for index, value in enumerate(values):
            if not isinstance(value, str):
                raise InvalidInputError(f"ids must be strings, got {value!r} at index {index}")
    # (a NUL anywhere is rare; only then look for the ids that end in one)
    if "\x00" not in "".join(values) or not any(value[-1:] == "\x00" for value in values):
        return np.array(values, dtype=np.str_) if values else np.array([], dtype="U1")
    ranks = {value: rank for rank, value in enumerate(sorted(set(values)))}
    return np.array([ranks[value] for value in values], dtype=np.intp)


def rank_batch(ids: npt.ArrayLike, scores: npt.ArrayLike, limit: int) -> IndexArray:
    """Indices of the best ``limit`` distinct ids: descending score, then ascending id.

    Duplicated ids keep their best score (the first seen wins an exact tie); ids compare by
    Unicode code point. Only the candidates that can reach the top are sorted.

    >>> rank_batch(["b", "a", "b", "c"], [0.5, 0.5, 0.9, 0.1], 3).tolist()
    [2, 1, 3]
    """
    limit = check_limit(limit)
    keys = _id_column(ids)
    values = _float_column("scores", scores)
    if values.shape[0] != keys.shape[0]:
        raise InvalidInputError(
            f"scores has {values.shape[0]} values but ids has {keys.shape[0]}"
        )
    _require_finite("scores", values)
    return _top_k(keys, values, limit)


def _top_k(ids: npt.NDArray[Any], scores: FloatArray, limit: int) -> IndexArray:
    n = scores.shape[0]
    if limit == 0 or n == 0:
        return np.empty(0, dtype=np.intp)
    if n < _FULL_SORT_BELOW or limit >= n:
        # Small batches: sort everything at once, deduplicating only when needed.
        if len(set(ids.tolist())) == n:
            return np.lexsort((ids, np.negative(scores)))[:limit]
        kept = _best_of_each_id(ids, scores, np.arange(n, dtype=np.intp))
        return kept[np.lexsort((ids[kept], np.negative(scores[kept])))[:limit]]
    reach = limit
    while True:
        pool = _reaching(scores, reach)
        kept = _best_of_each_id(ids, scores, pool)
        # Every id with a member in the pool has its best there, above every id outside it,
        # so the pool decides the answer once it holds enough distinct ids (or everything).
        if kept.shape[0] >= limit or pool.shape[0] == n:
            break
        reach = min(n, 4 * max(reach, limit + pool.shape[0] - kept.shape[0]))
    return kept[np.lexsort((ids[kept], np.negative(scores[kept])))[:limit]]


def _reaching(scores: FloatArray, reach: int) -> IndexArray:
    """Ascending indices of every score >= the ``reach``-th largest (all its ties included),
    and possibly a few below it (at most ``4 * reach + 64`` in all) when a block-maxima bound
    was tight enough to stop at."""
    n = scores.shape[0]
    if reach >= n:
        return np.arange(n, dtype=np.intp)
    if n < _BLOCK_MAXIMA_FROM or reach > _BLOCK_MAXIMA // 4:
        threshold = np.partition(scores, n - reach)[n - reach]
        return np.flatnonzero(scores >= threshold)
    # Without copying the scores: ``reach`` blocks have a maximum at or above the reach-th
    # largest block maximum, so at least ``reach`` scores do, and it bounds the answer below.
    width = n // _BLOCK_MAXIMA
    maxima = np.maximum.reduce(scores[: width * _BLOCK_MAXIMA].reshape(-1, width), axis=1)
    if width * _BLOCK_MAXIMA < n:
        maxima = np.append(maxima, np.maximum.reduce(scores[width * _BLOCK_MAXIMA :]))
    bound = np.partition(maxima, maxima.shape[0] - reach)[maxima.shape[0] - reach]
    pool = np.flatnonzero(scores >= bound)
    if pool.shape[0] <= 4 * reach + 64:
        return pool
    # A loose bound (the best scores bunched in a few blocks): tighten it within the pool.
    pooled = scores[pool]
    threshold = np.partition(pooled, pooled.shape[0] - reach)[pooled.shape[0] - reach]
    tightened: IndexArray = pool[pooled >= threshold]
    return tightened


def _best_of_each_id(ids: npt.NDArray[Any], scores: FloatArray, pool: IndexArray) -> IndexArray:
    """``pool`` (ascending) reduced to one index per id: its best score, earliest on a tie."""
    pooled = ids[pool]
    if pool.shape[0] <= _FULL_SORT_BELOW and len(set(pooled.tolist())) == pool.shape[0]:
        return pool
    # Stable sort by id, then descending score; ties keep pool order, i.e. first seen first.
    order = np.lexsort((np.negative(scores[pool]), pooled))
    grouped = pooled[order]
    first = np.empty(grouped.shape[0], dtype=np.bool_)
    first[:1] = True
    np.not_equal(grouped[1:], grouped[:-1], out=first[1:])
    return pool[order[first]]


# ---------------------------------------------------------------- checked columns


@dataclass(frozen=True, slots=True)
class CandidateColumns:
    """Candidates as columns, one value per candidate, each already checked: what ranking reads.

    Values are trusted, not checked again: build them with
    ``affect_memory.kernel.ranking.candidate_columns`` from validated ``MemoryCandidate``s, or from
    columns a store's mapper has checked (finite, distances clamped into [0, 2], counts >= 0). Raw
    arrays go through ``score_batch`` instead.
    ``epochs`` are the timestamps in epoch seconds, NaN for a missing or unusable one.
    ``ages_days``, when given, are the ages recency is scored at instead of ``now - epochs``
    (a retriever's time rule decided them; NaN gets the recency fallback).
    """

    ids: Sequence[str]
    distances: FloatArray
    epochs: FloatArray
    significance: FloatArray
    recall_counts: Counts
    episodes: npt.NDArray[np.bool_]
    valences: FloatArray
    ages_days: FloatArray | None = None

    def __post_init__(self) -> None:
        columns = (
            self.distances,
            self.epochs,
            self.significance,
            self.recall_counts,
            self.episodes,
            self.valences,
            *(() if self.ages_days is None else (self.ages_days,)),
        )
        if any(column.shape != (len(self.ids),) for column in columns):
            raise InvalidInputError(
                f"CandidateColumns needs one value per id in every column, got {len(self.ids)} "
                f"ids and columns of shapes {[column.shape for column in columns]}"
            )

    def __len__(self) -> int:
        """The number of candidates."""
        return len(self.ids)


@dataclass(frozen=True, slots=True)
class RankedColumns:
    """A ranking of ``CandidateColumns``: the chosen indices, best first, and every factor."""

    order: tuple[int, ...]
    """Indices into the columns of the best ``limit`` distinct ids, in rank order."""
    scores: BatchScores
    """Score and factors of every candidate (ranked or not), by index."""


def rank_columns(
    columns: CandidateColumns,
    now: datetime,
    *,
    mood_valence: float = 0.0,
    limit: int = 4,
    congruence_on: bool = True,
    weights: RetrievalWeights = DEFAULT_RETRIEVAL_WEIGHTS,
) -> RankedColumns:
    """Score checked columns at ``now`` and keep the best ``limit`` distinct ids.

    The one ranking path: an engine turn (``affect_memory.kernel.ranking.rank_candidates``) and a
    store's recall both rank through here, so the same memories get the same bits. Ages are
    ``(now - epoch) / 86400`` in float seconds, or the columns' ``ages_days`` when given; the
    best of each id is kept (first seen wins a tie) and ties in score go to the lower id in
    code-point order.
    """
    limit = check_limit(limit)
    now_epoch = require_zoned_now(now).timestamp()
    mood = _checked_mood(mood_valence, congruence_on)
    if not isinstance(weights, RetrievalWeights):
        raise InvalidInputError(f"weights must be RetrievalWeights, got {weights!r}")
    if not isinstance(columns, CandidateColumns):
        raise InvalidInputError(f"columns must be CandidateColumns, got {type(columns).__name__}")
    aged = columns.ages_days is not None
    block = _Block(
        distances=columns.distances,
        moments=columns.ages_days if aged else columns.epochs,
        now_epoch=None if aged else now_epoch,
        significance=columns.significance,
        recall_counts=columns.recall_counts,
        episodes=columns.episodes,
        valences=columns.valences,
    )
    scores = _score_columns(block, mood, congruence_on, weights, checked=True)
    if not len(columns):
        return RankedColumns((), scores)
    # One reduction guards the trust: unchecked garbage (NaN) cannot slip into a ranking.
    _require_finite("scores", scores.score)
    chosen = _top_k(_id_column(columns.ids), scores.score, limit)
    return RankedColumns(tuple(chosen.tolist()), scores)
