"""Fit the kernel's retrieval weights to labelled queries, and report the held-out gain.

The search is deterministic coordinate descent over a grid per weight: starting from the
current weights, each field in turn takes the grid value with the best training MRR, and
rounds repeat until nothing moves. A value replaces the current one only if it is strictly
better; among equally good values the one nearest the current value (in grid steps) wins,
so flat stretches of the objective never push a weight to the edge of its grid.

The recency horizon and floor are searched jointly, as one block over their grid product:
a longer horizon with a higher floor ranks much like a shorter one with a lower floor, and
one-at-a-time moves stall on that ridge.

A query may have several relevant memories (its rank is its best one's). Queries that name
their user are split by user, so no user's queries are on both sides; the result says how
many relevant memories fell outside the candidate pools (no weight can rank those), and
``write_settings`` (or ``fit_weights(..., settings_path=...)``) saves the fitted weights as
the settings file ``affect-memory recall --weights`` and ``load_recall_settings`` read.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from affect_memory.experiments.data import LabelledQuery, QueryBatch
from affect_memory.experiments.pools import LabelledPools
from affect_memory.experiments.scorers import kernel_scores
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.retrieval import DEFAULT_RETRIEVAL_WEIGHTS, RetrievalWeights
from affect_memory.memory.settings import RecallSettings, write_recall_settings
from affect_memory.metrics import mean_reciprocal_rank, ranks

__all__ = [
    "DEFAULT_SEARCH",
    "FitResult",
    "FitStep",
    "fit_weights",
    "held_out_users",
    "split_queries",
]

SearchSpace = Mapping[str, Sequence[float]]
_JOINT: tuple[tuple[str, ...], ...] = (("recency_horizon_days", "recency_floor"),)

DEFAULT_SEARCH: dict[str, tuple[float, ...]] = {
    "significance_weight": (0.0, 0.01, 0.03, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8,
                            1.0, 1.25, 1.5, 2.0),
    "recency_horizon_days": (7.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 75.0, 90.0,
                             120.0, 180.0, 270.0, 365.0),
    "recency_floor": (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    "episode_bonus": (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2),
}
"""Sane bounds per weight: floors up to 1 (recency off), significance up to twice similarity.

``recall_weight`` is left out: its term is capped at 0.025, too small to identify from a few
hundred queries, so fitting it mostly fits noise. Pass it in ``search`` to fit it anyway.
"""


@dataclass(frozen=True, slots=True)
class FitStep:
    """One accepted move of the search: which field changed, to what, and the train MRR after."""

    round: int
    field: str
    value: float
    train_mrr: float


@dataclass(frozen=True, slots=True)
class FitResult:
    """Fitted weights and how they compare with the starting weights on train and held-out data."""

    weights: RetrievalWeights
    train_mrr: float
    validation_mrr: float
    default_train_mrr: float
    default_validation_mrr: float
    n_train: int
    n_validation: int
    rounds: int
    history: tuple[FitStep, ...] = field(default=())
    labels_outside: int = 0
    """Relevant memories that were not in their query's candidate pool: no weight reaches them."""
    labels: int = 0
    """Relevant memories over every query, in the pools or not."""
    n_train_users: int = 0
    n_validation_users: int = 0
    """Users on each side when the queries name their users (0: split by query)."""
    base: RecallSettings | None = None
    """The recall settings the pools were built with (what ``settings`` starts from)."""

    @property
    def gain(self) -> float:
        """Held-out MRR of the fitted weights minus that of the starting weights."""
        return self.validation_mrr - self.default_validation_mrr

    def settings(self, base: RecallSettings | None = None) -> RecallSettings:
        """The recall settings with the fitted weights (else ``base``'s, or the pools')."""
        start = base or self.base or RecallSettings()
        return RecallSettings.model_validate({**dict(start), "weights": self.weights})

    def write_settings(self, path: str | Path, base: RecallSettings | None = None) -> Path:
        """Write ``settings(base)`` as a settings file for ``recall --weights``."""
        return write_recall_settings(self.settings(base), path)


def _as_batch(queries: Sequence[LabelledQuery] | QueryBatch | LabelledPools) -> QueryBatch:
    if isinstance(queries, QueryBatch):
        return queries
    if isinstance(queries, LabelledPools):
        if not queries.queries:
            raise InvalidInputError(
                f"no query has a relevant memory in its pool ({queries.labels_outside} "
                "labels fell outside the pools)"
            )
        return QueryBatch.from_queries(queries.queries)
    return QueryBatch.from_queries(queries)


def _check_fraction(validation_fraction: float) -> None:
    if not 0 < validation_fraction < 1:
        raise InvalidInputError(
            f"validation_fraction must be within (0, 1), got {validation_fraction!r}"
        )


def split_queries(
    batch: QueryBatch, *, validation_fraction: float, seed: int
) -> tuple[QueryBatch, QueryBatch]:
    """A seeded shuffle into (train, validation): of the users when the queries name them
    (every user's queries on one side, the validation side as near the fraction as whole
    users allow), else of the queries."""
    _check_fraction(validation_fraction)
    if batch.users and all(user is not None for user in batch.users):
        return _split_by_user(batch, validation_fraction, seed)
    n_validation = round(batch.n_queries * validation_fraction)
    if n_validation < 1 or n_validation >= batch.n_queries:
        raise InvalidInputError(
            f"{batch.n_queries} queries cannot be split with validation_fraction "
            f"{validation_fraction}: both sides need at least one query"
        )
    order = np.random.default_rng(seed).permutation(batch.n_queries)
    return batch.take(np.sort(order[n_validation:])), batch.take(np.sort(order[:n_validation]))


def held_out_users(
    counts: Mapping[str, int], validation_fraction: float, seed: int
) -> set[str]:
    """A seeded choice of users to hold out (``counts``: each user's queries), as near
    ``validation_fraction`` of the queries as whole users allow, at least one user each side."""
    users = sorted(counts)
    if len(users) < 2:
        raise InvalidInputError(
            f"the queries come from {len(users)} user(s); a split by user needs at least two"
        )
    order = [users[i] for i in np.random.default_rng(seed).permutation(len(users))]
    target = sum(counts.values()) * validation_fraction
    held: set[str] = set()
    total = 0
    for user in order[:-1]:  # the last user always trains
        if total >= target:
            break
        if held and abs(total + counts[user] - target) > abs(total - target):
            continue
        held.add(user)
        total += counts[user]
    return held


def _split_by_user(
    batch: QueryBatch, validation_fraction: float, seed: int
) -> tuple[QueryBatch, QueryBatch]:
    users = sorted({user for user in batch.users if user is not None})
    counts = {user: batch.users.count(user) for user in users}
    held = held_out_users(counts, validation_fraction, seed)
    rows = np.arange(batch.n_queries)
    validation = np.array([user in held for user in batch.users], dtype=bool)
    return batch.take(rows[~validation]), batch.take(rows[validation])


def _checked_search(search: SearchSpace, start: RetrievalWeights) -> dict[str, tuple[float, ...]]:
    fields = RetrievalWeights.model_fields
    grids: dict[str, tuple[float, ...]] = {}
    for name, values in search.items():
        if name not in fields:
            raise InvalidInputError(f"search names {name!r}, which is not a RetrievalWeights field")
        grid = tuple(sorted({float(value) for value in values}))
        if not grid:
            raise InvalidInputError(f"search grid for {name!r} is empty")
        for value in grid:
            try:
                _with(start, {name: value})
            except ValueError as error:
                raise InvalidInputError(f"search grid for {name!r}: {error}") from None
        grids[name] = grid
    if not grids:
        raise InvalidInputError("search must name at least one weight")
    return grids


def _with(weights: RetrievalWeights, changes: Mapping[str, float]) -> RetrievalWeights:
    # Rebuilt rather than model_copy'd so RetrievalWeights validates the new values.
    return RetrievalWeights(**{**weights.model_dump(), **changes})


def _blocks(grids: Mapping[str, tuple[float, ...]]) -> list[tuple[str, ...]]:
    blocks: list[tuple[str, ...]] = []
    for name in grids:
        joint = next((block for block in _JOINT if name in block), None)
        if joint is not None and all(member in grids for member in joint):
            if joint not in blocks:
                blocks.append(joint)
        else:
            blocks.append((name,))
    return blocks


def _steps(
    grids: Mapping[str, tuple[float, ...]],
    names: tuple[str, ...],
    point: tuple[float, ...],
    here: tuple[int, ...],
) -> int:
    return sum(
        abs(grids[name].index(value) - start)
        for name, value, start in zip(names, point, here, strict=True)
    )


def _mrr(batch: QueryBatch, weights: RetrievalWeights) -> float:
    # The search's inner loop: MRR alone, skipping the recall@k that ``evaluate`` adds.
    rank = ranks(kernel_scores(batch, weights=weights), batch.relevant, batch.mask, batch.targets)
    return mean_reciprocal_rank(rank)


def _nearest(grid: tuple[float, ...], value: float) -> int:
    return int(np.argmin(np.abs(np.asarray(grid) - value)))


def fit_weights(
    labelled_queries: Sequence[LabelledQuery] | QueryBatch | LabelledPools,
    *,
    validation_fraction: float = 0.3,
    seed: int = 0,
    search: SearchSpace = DEFAULT_SEARCH,
    start: RetrievalWeights | None = None,
    max_rounds: int = 6,
    settings_path: str | Path | None = None,
) -> FitResult:
    """Fit weights on a seeded training split by coordinate descent; report held-out MRR gain.

    ``start`` defaults to the pools' recall weights (``LabelledPools``), else the kernel's
    defaults. With ``settings_path`` the fitted settings are written there too.
    """
    pools = labelled_queries if isinstance(labelled_queries, LabelledPools) else None
    batch = _as_batch(labelled_queries)
    if start is None:
        start = pools.settings.weights if pools is not None else DEFAULT_RETRIEVAL_WEIGHTS
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise InvalidInputError(f"max_rounds must be an integer >= 1, got {max_rounds!r}")
    grids = _checked_search(search, start)
    train, validation = split_queries(batch, validation_fraction=validation_fraction, seed=seed)

    blocks = _blocks(grids)
    current = start
    best = _mrr(train, current)
    history: list[FitStep] = []
    rounds = 0
    for round_index in range(1, max_rounds + 1):
        rounds = round_index
        moved = False
        for names in blocks:
            points = list(itertools.product(*(grids[name] for name in names)))
            here = tuple(_nearest(grids[name], float(getattr(current, name))) for name in names)
            scored = [(_mrr(train, _with(current, dict(zip(names, point, strict=True)))), point)
                      for point in points]
            top = max(mrr for mrr, _ in scored)
            if top <= best:
                continue
            # Among the best points, the fewest grid steps from where the weights stand now.
            ties = [point for mrr, point in scored if mrr == top]
            chosen = min(ties, key=lambda point: _steps(grids, names, point, here))
            current = _with(current, dict(zip(names, chosen, strict=True)))
            best = top
            moved = True
            for name, value in zip(names, chosen, strict=True):
                history.append(FitStep(round_index, name, value, best))
        if not moved:
            break

    assert batch.targets is not None
    in_pools = int(batch.targets.sum())
    result = FitResult(
        weights=current,
        train_mrr=best,
        validation_mrr=_mrr(validation, current),
        default_train_mrr=_mrr(train, start),
        default_validation_mrr=_mrr(validation, start),
        n_train=train.n_queries,
        n_validation=validation.n_queries,
        rounds=rounds,
        history=tuple(history),
        labels_outside=batch.labels_outside + (pools.dropped_labels if pools else 0),
        labels=in_pools + batch.labels_outside + (pools.dropped_labels if pools else 0),
        n_train_users=len({user for user in train.users if user is not None}),
        n_validation_users=len({user for user in validation.users if user is not None}),
        base=pools.settings if pools is not None else None,
    )
    if settings_path is not None:
        result.write_settings(settings_path)
    return result
