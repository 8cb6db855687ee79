"""Recall's ranking settings: how the candidate pool is built and the weights it is scored with.

The defaults are the measured design (docs/concepts/retrieval.md): Chroma's 128 nearest memories and
the lexical index's 64 best BM25 matches, fused relevance with lexical weight 0.6, the
query's time rule, and the kernel's weights with a 120-day horizon and a 0.10 floor.
``DENSE_RECALL`` is recall as it was before the hybrid pool (the nearest 32 by cosine,
Chroma's distance as is, recency by the calendar, the kernel's default weights), kept for
side-by-side measurement.

A settings file is one flat JSON object of any of these fields and the ``RetrievalWeights``
fields; fields it leaves out keep the defaults above. Unknown or repeated keys and values of
the wrong type are refused, naming the file and the field.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ValidationError

from affect_memory.jsonl import loads_strict
from affect_memory.kernel.bounds import NonNegativeFloat, UnitInterval, check_int
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.parameters import ParameterModel, first_message
from affect_memory.kernel.retrieval import (
    DEFAULT_RETRIEVAL_WEIGHTS,
    PositiveFloat,
    RetrievalWeights,
)

__all__ = [
    "DEFAULT_RECALL_SETTINGS",
    "DENSE_RECALL",
    "MAX_POOL",
    "RECALL_WEIGHTS",
    "RankingMode",
    "RecallSettings",
    "load_recall_settings",
    "recall_settings_from_json",
    "resolve_settings",
    "write_recall_settings",
]

MAX_POOL = 1024
"""Most memories one search (dense or lexical) adds to a query's pool."""

RECALL_WEIGHTS = RetrievalWeights(recency_horizon_days=120.0, recency_floor=0.10)
"""The kernel's weights as recall scores with them: a 120-day horizon and a 0.10 floor.

The time rules decide each memory's age; a state question ages a fact at half the days it is
older than the question's anchor (the newest of its closest memories), so a fact 216 days or more
older scores at the floor, a tenth of what it would score fresh. Every other constant is the
kernel's.
"""

RankingMode = Literal["hybrid", "dense"]


def _pool_size(low: int) -> Any:
    def check(value: object) -> int:
        number = check_int(value, low)
        if number > MAX_POOL:
            raise ValueError(f"must be at most {MAX_POOL}, got {shown(value)}")
        return number

    return BeforeValidator(check)


class RecallSettings(ParameterModel):
    """How recall builds each query's candidate pool and scores it."""

    ranking: RankingMode = "hybrid"
    """``hybrid``: dense and lexical candidates, fused relevance, the query's time rule;
    ``dense``: the nearest by cosine alone, Chroma's distance as is, aged by the calendar."""
    dense_candidates: Annotated[int, _pool_size(1)] = 128
    """Chroma's nearest memories added to the pool (at least ``top_k`` are fetched)."""
    dated_dense_candidates: Annotated[int, _pool_size(1)] = 64
    """At most this many of them under a rule that ages memories by their dates (period,
    former, state), which reads every candidate's index row before ranking, once the user has
    more than ``dense_candidates`` memories (a smaller store is pooled whole); the event rule
    reads a row only when the ranking reaches it, so its pool stays ``dense_candidates``
    deep. Every dev figure is the same at 64 as at 128; 128 under the event rule keeps 85%
    of LoCoMo's evidence turns in the pool (docs/evaluation/performance.md)."""
    lexical_candidates: Annotated[int, _pool_size(0)] = 64
    """The lexical index's best BM25 matches added to the pool (0: none; ``hybrid`` only)."""
    bm25_k1: NonNegativeFloat = 1.2
    """BM25's term-frequency saturation (``affect_memory.memory.index.lexical.bm25``)."""
    bm25_b: UnitInterval = 0.75
    """BM25's length normalisation."""
    lexical_weight: UnitInterval = 0.6
    """The weight of the share of the query matched in the fused relevance (``fusion``); the
    cosine's is the rest."""
    state_lexical_weight: UnitInterval = 0.2
    """A current-state question's weight of the share of the query a memory matches (BM25
    over the query's total idf); its cosine's is the rest. Small: what shares a question's
    words is mostly the old plainly stated fact, but an update that repeats them should win
    on them. 0.2 is the least that keeps LongMemEval's knowledge updates level with BM25 on
    its dev subset (0.15: 0.046 behind); ``fixtures/stale_current`` gives up 0.003-0.005."""
    topic_weight: NonNegativeFloat = 0.3
    """A current-state question adds this times a memory's topic agreement with the query
    (``affect_memory.memory.recall.life_topics``), before the change gain: chosen on six
    stale-versus-current sets, checked on three written after under a rule declared before
    scoring (docs/evaluation/stale-current.md)."""
    topic_temperature: PositiveFloat = 0.05
    """The softmax temperature of a text's cosines with the life domains: cosines 0.05 apart
    weigh e times apart, so a text leans on its one or two nearest domains."""
    change_gain: NonNegativeFloat = 0.2
    """A current-state question's relevance of a memory that reports a change is ``1 +
    change_gain`` times what it is otherwise, at most 1
    (``affect_memory.memory.recall.change_cues``): chosen on five blind stale-versus-current sets
    and checked on a sixth (docs/evaluation/stale-current.md)."""
    state_cue_words: PositiveFloat = 50.0
    """A current-state question's topic term and change gain count fully for a memory of up
    to this many words and at this many over its words for a longer one: a change word or a
    topic in a long chat turn speaks for little of it (LongMemEval's dev subset)."""
    feedback_weight: UnitInterval = 0.15
    """A current-state question blends each memory's cosine with its cosine with the query's
    closest memory at this weight (``affect_memory.memory.recall.feedback``): chosen among a few
    weights and variants on 25 sets of ``fixtures/stale_current`` and kept on four written
    after, under a rule declared before they were scored (docs/evaluation/stale-current.md)."""
    anchor_members: Annotated[int, _pool_size(1)] = 3
    """How many of a pool's most relevant members the state and former rules take their
    anchor date from (three: in a small store five often hold unrelated newer small talk)."""
    state_age_scale: PositiveFloat = 0.5
    """The share of its days a memory is aged at under the state and former rules (half: a
    240-day horizon with the recall's 120 days)."""
    weights: RetrievalWeights = RECALL_WEIGHTS
    """The kernel's scoring constants."""

    def to_json(self) -> dict[str, Any]:
        """The settings as the flat JSON object a settings file holds."""
        flat: dict[str, Any] = self.model_dump(exclude={"weights"})
        flat.update(self.weights.model_dump())
        return flat


DEFAULT_RECALL_SETTINGS = RecallSettings()
"""The settings ``recall`` and the engine's retriever use unless given others."""

DENSE_RECALL = RecallSettings(
    ranking="dense", dense_candidates=32, lexical_candidates=0, weights=DEFAULT_RETRIEVAL_WEIGHTS
)
"""Recall before the hybrid pool: the nearest 32, Chroma's distance, calendar recency."""

_SETTING_FIELDS = tuple(name for name in RecallSettings.model_fields if name != "weights")
_WEIGHT_FIELDS = tuple(RetrievalWeights.model_fields)


def recall_settings_from_json(
    value: object, *, where: str = "settings", base: RecallSettings = DEFAULT_RECALL_SETTINGS
) -> RecallSettings:
    """Settings from a flat JSON object; fields it leaves out are ``base``'s.

    Errors name ``where`` and the field, e.g. ``weights.json: RetrievalWeights.recency_floor
    must be within [0, 1], got 2``, or the closest known name for an unknown one.
    """
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"{where}: expected a JSON object of recall settings, got {shown(value)}"
        )
    known = (*_SETTING_FIELDS, *_WEIGHT_FIELDS)
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidInputError(
                f"{where}: unknown field {shown(key)}{hint}; known fields: {', '.join(known)}"
            )
    weight_values = {key: value[key] for key in _WEIGHT_FIELDS if key in value}
    setting_values = {key: value[key] for key in _SETTING_FIELDS if key in value}
    try:
        weights = RetrievalWeights.model_validate({**base.weights.model_dump(), **weight_values})
        return RecallSettings.model_validate(
            {**base.model_dump(exclude={"weights"}), **setting_values, "weights": weights}
        )
    except ValidationError as error:
        raise InvalidInputError(f"{where}: {first_message(error)}") from None


def load_recall_settings(
    path: str | Path, *, base: RecallSettings = DEFAULT_RECALL_SETTINGS
) -> RecallSettings:
    """Settings from a JSON file (see ``recall_settings_from_json``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InvalidInputError(f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise InvalidInputError(f"{path}: not UTF-8 text ({error.reason})") from None
    try:
        value = loads_strict(text)
    except ValueError as error:
        raise InvalidInputError(f"{path}: invalid JSON: {error}") from None
    return recall_settings_from_json(value, where=str(path), base=base)


def write_recall_settings(settings: RecallSettings, path: str | Path) -> Path:
    """Write ``settings`` as a settings file (readable by ``load_recall_settings``)."""
    path = Path(path)
    path.write_text(json.dumps(settings.to_json(), indent=2) + "\n", encoding="utf-8")
    return path


def resolve_settings(
    settings: RecallSettings | None,
    *,
    candidates: int | None = None,
    weights: RetrievalWeights | None = None,
) -> RecallSettings:
    """``settings`` (default: ``DEFAULT_RECALL_SETTINGS``) with a call's own ``candidates``
    (the dense pool size) and ``weights`` put in when given; bad values name the field."""
    if settings is None:
        settings = DEFAULT_RECALL_SETTINGS
    elif not isinstance(settings, RecallSettings):
        raise InvalidInputError(f"settings must be RecallSettings, got {shown(settings)}")
    if weights is not None and not isinstance(weights, RetrievalWeights):
        raise InvalidInputError(f"weights must be RetrievalWeights, got {shown(weights)}")
    changes: dict[str, Any] = {}
    if candidates is not None:
        changes["dense_candidates"] = candidates
    if weights is not None:
        changes["weights"] = weights
    if not changes:
        return settings
    try:
        return RecallSettings.model_validate({**dict(settings), **changes})
    except ValidationError as error:
        message = first_message(error).replace("RecallSettings.dense_candidates", "candidates")
        raise InvalidInputError(message) from None
