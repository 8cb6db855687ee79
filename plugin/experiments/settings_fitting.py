"""Fit any numeric recall setting to labelled queries through recall itself, held out by user.

``fit_weights`` fits the kernel's weights over pools prepared once; a rule's setting (the
topic weight, the change gain, the lexical weights, BM25's k1, ...) changes the pool's
relevance and ages, so each candidate value is scored by running ``recall_many`` over the
training queries again. The search is the same deterministic coordinate descent: each field
in turn takes the grid value with the best training MRR (strictly better only; among equal
ones the nearest the current value), rounds repeat until nothing moves. Users are split into
train and validation sides, none on both; the result reports the held-out MRR of the start
and of the fit, and a bootstrap 95% interval of the held-out gain (validation queries
resampled with replacement, seeded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

import numpy as np
from pydantic import ValidationError

from affect_memory.experiments.fitting import held_out_users
from affect_memory.experiments.pools import PoolQuery
from affect_memory.kernel.errors import InvalidInputError
from affect_memory.kernel.parameters import first_message
from affect_memory.memory.results import RecallResult
from affect_memory.memory.settings import RecallSettings, write_recall_settings
from affect_memory.metrics import reciprocal_rank

__all__ = ["SettingsFit", "SettingsStep", "fit_settings", "split_users"]


class RecallSource(Protocol):
    """What the fit ranks through: ``ChromaMemory.recall_many``."""

    def recall_many(
        self,
        queries: Sequence[Mapping[str, object]],
        *,
        now: str | datetime | float | None = None,
        top_k: int = 6,
        settings: RecallSettings | None = None,
    ) -> list[RecallResult]:
        """Recall for many queries."""
        ...


@dataclass(frozen=True, slots=True)
class SettingsStep:
    """One accepted move: which setting changed, to what, and the training MRR after."""

    round: int
    field: str
    value: float | int
    train_mrr: float


@dataclass(frozen=True, slots=True)
class SettingsFit:
    """Fitted settings and how they compare with the start on train and held-out users."""

    settings: RecallSettings
    start: RecallSettings
    train_mrr: float
    validation_mrr: float
    start_train_mrr: float
    start_validation_mrr: float
    gain_interval: tuple[float, float]
    """A bootstrap 95% interval of the held-out MRR gain (fit minus start)."""
    train_users: tuple[str, ...]
    validation_users: tuple[str, ...]
    rounds: int
    history: tuple[SettingsStep, ...] = field(default=())

    @property
    def gain(self) -> float:
        """Held-out MRR of the fitted settings minus that of the start."""
        return self.validation_mrr - self.start_validation_mrr

    def write_settings(self, path: str | Path) -> Path:
        """Write the fitted settings as a file ``recall --weights`` and the engine read."""
        return write_recall_settings(self.settings, path)


def split_users(
    queries: Sequence[PoolQuery], *, validation_fraction: float, seed: int
) -> tuple[list[PoolQuery], list[PoolQuery]]:
    """A seeded split of the queries by user into (train, validation): every user's queries
    on one side, the validation side as near ``validation_fraction`` of the queries as whole
    users allow, at least one user on each side."""
    if not 0 < validation_fraction < 1:
        raise InvalidInputError(
            f"validation_fraction must be within (0, 1), got {validation_fraction!r}"
        )
    counts: dict[str, int] = {}
    for query in queries:
        counts[query.user_id] = counts.get(query.user_id, 0) + 1
    held = held_out_users(counts, validation_fraction, seed)
    return (
        [query for query in queries if query.user_id not in held],
        [query for query in queries if query.user_id in held],
    )


def _reciprocal_ranks(
    source: RecallSource,
    queries: Sequence[PoolQuery],
    settings: RecallSettings,
    now: datetime | str,
    top_k: int,
) -> np.ndarray:
    asked = [
        {"query": q.query, "user_id": q.user_id, "mood_valence": q.mood_valence} for q in queries
    ]
    results = source.recall_many(asked, now=now, top_k=top_k, settings=settings)
    return np.array(
        [
            reciprocal_rank([hit.id for hit in result.results], set(query.relevant_ids))
            for query, result in zip(queries, results, strict=True)
        ],
        dtype=np.float64,
    )


def _with(settings: RecallSettings, name: str, value: float | int) -> RecallSettings:
    try:
        return RecallSettings.model_validate({**dict(settings), name: value})
    except ValidationError as error:
        raise InvalidInputError(f"search grid for {name!r}: {first_message(error)}") from None


def _grids(
    search: Mapping[str, Sequence[float]], start: RecallSettings
) -> dict[str, tuple[float | int, ...]]:
    numeric = {
        name
        for name in RecallSettings.model_fields
        if name != "weights" and isinstance(getattr(start, name), int | float)
    }
    grids: dict[str, tuple[float | int, ...]] = {}
    for name, values in search.items():
        if name not in numeric:
            raise InvalidInputError(
                f"search names {name!r}, which is not a numeric RecallSettings field "
                f"({', '.join(sorted(numeric))})"
            )
        integral = isinstance(getattr(start, name), int)
        if integral and any(float(value) != int(value) for value in values):
            raise InvalidInputError(f"search grid for {name!r}: {name} takes whole numbers")
        grid = tuple(sorted({int(value) if integral else float(value) for value in values}))
        if not grid:
            raise InvalidInputError(f"search grid for {name!r} is empty")
        for value in grid:
            _with(start, name, value)
        grids[name] = grid
    if not grids:
        raise InvalidInputError("search must name at least one setting")
    return grids


def fit_settings(
    source: RecallSource,
    queries: Sequence[PoolQuery],
    *,
    now: datetime | str,
    search: Mapping[str, Sequence[float]],
    start: RecallSettings | None = None,
    validation_fraction: float = 0.3,
    seed: int = 0,
    top_k: int = 10,
    max_rounds: int = 4,
    resamples: int = 1000,
    settings_path: str | Path | None = None,
) -> SettingsFit:
    """Fit the ``search``ed settings (field -> grid) on a seeded split of the users by
    coordinate descent over recall's own ranking (MRR of the first relevant memory in the top
    ``top_k``); with ``settings_path`` the fitted settings are written there too."""
    start = start or RecallSettings()
    grids = _grids(search, start)
    train, validation = split_users(queries, validation_fraction=validation_fraction, seed=seed)

    def mrr(settings: RecallSettings) -> float:
        return float(_reciprocal_ranks(source, train, settings, now, top_k).mean())

    start_train = mrr(start)
    current, best = start, start_train
    history: list[SettingsStep] = []
    rounds = 0
    for round_index in range(1, max_rounds + 1):
        rounds, moved = round_index, False
        for name, grid in grids.items():
            here = float(getattr(current, name))
            scored = [(mrr(_with(current, name, value)), value) for value in grid]
            top = max(score for score, _ in scored)
            if top <= best:
                continue
            chosen = min((v for s, v in scored if s == top), key=lambda v: abs(v - here))
            current, best, moved = _with(current, name, chosen), top, True
            history.append(SettingsStep(round_index, name, chosen, best))
        if not moved:
            break
    fitted = _reciprocal_ranks(source, validation, current, now, top_k)
    before = _reciprocal_ranks(source, validation, start, now, top_k)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(validation), size=(resamples, len(validation)))
    gains = (fitted[draws] - before[draws]).mean(axis=1)
    low, high = np.percentile(gains, [2.5, 97.5])
    result = SettingsFit(
        settings=current,
        start=start,
        train_mrr=best,
        validation_mrr=float(fitted.mean()),
        start_train_mrr=start_train,
        start_validation_mrr=float(before.mean()),
        gain_interval=(float(low), float(high)),
        train_users=tuple(sorted({q.user_id for q in train})),
        validation_users=tuple(sorted({q.user_id for q in validation})),
        rounds=rounds,
        history=tuple(history),
    )
    if settings_path is not None:
        result.write_settings(settings_path)
    return result
