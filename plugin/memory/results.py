"""What memory calls take and give back: recall queries and their checks, hits, results, reports.

Every type is a plain value: ``to_json`` gives the documented JSON object, in its key order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, ValidationError

from affect_memory.kernel.bounds import SignedUnit, check_int
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import MAX_TEXT_CHARS, FrozenModel
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import check_identifier, check_text
from affect_memory.memory.settings import DEFAULT_RECALL_SETTINGS, MAX_POOL

if TYPE_CHECKING:  # the plan's module reads the index, which reads these results
    from affect_memory.memory.recall.plan import PlanKind, QueryPlan

__all__ = [
    "DEFAULT_CANDIDATES",
    "MAX_CANDIDATES",
    "MAX_TOP_K",
    "QUERY_FIELDS",
    "RECALL_MANY_TOLERANCE",
    "MemoryStats",
    "RecallHit",
    "RecallQuery",
    "RecallResult",
    "Relevance",
    "TurnWriteReport",
    "WriteReport",
    "check_candidates",
    "check_ids",
    "check_query",
    "check_top_k",
    "check_user",
    "collect_recall_queries",
    "parse_recall_query",
    "recall_query_problems",
]

DEFAULT_CANDIDATES = DEFAULT_RECALL_SETTINGS.dense_candidates
"""Chroma's nearest memories a recall adds to each query's pool (``RecallSettings``)."""

MAX_CANDIDATES = MAX_POOL
"""Most of Chroma's nearest memories one query's pool takes."""

MAX_TOP_K = 64
"""Most ranked memories one recall returns."""

RECALL_MANY_TOLERANCE = 1e-6
"""``recall_many`` scores agree with one ``recall`` per query within this (absolute).

The model embeds a query inside a batch slightly differently from alone, in the last bits,
and by how much depends on the CPU. Measured over the sample corpus and its probes (105
queries, batches of 2, 7 and all, top 64): at most 1.0e-7 on a score and 2.4e-7 on a distance
(float32 vectors); the bound is ten times that. Thread count made no difference here. With the
current-state rule's topic term (a softmax at temperature 0.05 scales the query's last bits by
about 20), over the sample and three stale-versus-current corpora (210 queries, the same
batches): 1.5e-7 on a score, 1.2e-7 on a distance, 2.1e-7 on a topic agreement; 5e-7 between
pools of 7 and 180 members (the product's shape): the bound is still twice that or more.
"""


def check_query(value: object) -> str:
    """A query: a string with something besides whitespace, at most 4,096 characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a non-empty, non-blank string, got {shown(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"must be at most {MAX_TEXT_CHARS:,} characters, got {shown(value)}")
    return check_text(value)


def check_user(user_id: object) -> str:
    """The user every read and write is scoped to; ``InvalidInputError`` says why it is needed."""
    try:
        return check_identifier(user_id, "user_id")
    except ValueError as error:
        raise InvalidInputError(f"{error} (every read and write is scoped to one user)") from None


def check_ids(ids: Iterable[object], what: str = "ids") -> list[str]:
    """Memory ids of a sequence (one string is refused), each checked, repeats dropped."""
    if isinstance(ids, str):
        raise InvalidInputError(f"{what} must be a sequence of ids, not one string: {shown(ids)}")
    checked: list[str] = []
    seen: set[str] = set()
    for index, ident in enumerate(ids):
        try:
            check_identifier(ident, f"{what}[{index}]")
        except ValueError as error:
            raise InvalidInputError(str(error)) from None
        assert isinstance(ident, str)
        if ident not in seen:
            seen.add(ident)
            checked.append(ident)
    return checked


def check_candidates(candidates: object) -> int:
    """How many of Chroma's nearest memories a query's pool takes: an int from 1 to 1,024."""
    try:
        n = check_int(candidates, 1)
    except ValueError as error:
        raise InvalidInputError(f"candidates {error}") from None
    if n > MAX_CANDIDATES:
        raise InvalidInputError(
            f"candidates must be between 1 and {MAX_CANDIDATES}, got {shown(candidates)}"
        )
    return n


def check_top_k(top_k: object) -> int:
    """How many ranked memories a recall returns: an int from 1 to 64."""
    try:
        k = check_int(top_k, 1)
    except ValueError as error:
        raise InvalidInputError(f"top_k {error}") from None
    if k > MAX_TOP_K:
        raise InvalidInputError(f"top_k must be <= {MAX_TOP_K}, got {shown(k)}")
    return k


QueryText = Annotated[str, BeforeValidator(check_query)]
UserId = Annotated[str, BeforeValidator(check_identifier)]


class RecallQuery(FrozenModel):
    """One query of a batch recall: the text, whose memories, and the current mood valence."""

    query: QueryText
    user_id: UserId
    mood_valence: SignedUnit = 0.0


QUERY_FIELDS = f"query field ({', '.join(RecallQuery.model_fields)})"
"""What an unknown key of a recall query is not."""


def recall_query_problems(
    value: object, *, where: str | None = "query"
) -> tuple[RecallQuery | None, list[str]]:
    """The ``RecallQuery`` ``value`` describes, or every problem it has (each naming ``where``
    when given, the field and the value)."""
    label = f"{where}: " if where else ""
    if isinstance(value, RecallQuery):
        return value, []
    if not isinstance(value, Mapping):
        return None, [
            f"{label}expected a mapping with query, user_id and mood_valence?, got {shown(value)}"
        ]
    try:
        return RecallQuery.model_validate(value), []
    except ValidationError as error:
        return None, [
            f"{label}{explain_error(item, fields=QUERY_FIELDS)[0]}" for item in error.errors()
        ]


def collect_recall_queries(
    entries: Iterable[tuple[object, str | None]], problems: list[str]
) -> list[RecallQuery]:
    """The queries of ``(value, where)`` entries; each problem is appended to ``problems`` in
    entry order, so one error can list them all."""
    queries: list[RecallQuery] = []
    for value, where in entries:
        query, found = recall_query_problems(value, where=where)
        if query is None:
            problems.extend(found)
        else:
            queries.append(query)
    return queries


def parse_recall_query(value: object, *, where: str | None = "query") -> RecallQuery:
    """A ``RecallQuery`` from a query or a mapping; the error names ``where`` (when given),
    every bad field and its value."""
    query, problems = recall_query_problems(value, where=where)
    if query is None:
        raise InvalidInputError(problems_message(problems))
    return query


@dataclass(frozen=True, slots=True)
class Relevance:
    """What a hit's similarity was made of: its lexical and dense match with the query, and
    the weights they were combined with.

    A part the ranking did not use is None: a current-state question has no lexical, dense or
    fused part (it weighs the cosine and the share of words matched, and only it has the
    topic, closest and change parts), the other plans have no share, and the dense recall has
    only the cosine.
    """

    cosine: float
    """Cosine similarity of the memory and the query (``1 - distance``)."""
    dense: float | None = None
    """The cosine, clipped to [0, 1]: the dense part of a fused relevance."""
    bm25: float | None = None
    """The lexical index's BM25 score (0 when the lexical search did not return it)."""
    lexical: float | None = None
    """The share of the query the memory matches (BM25 over the query's total idf, at most
    1): the lexical part of a fused relevance."""
    fused: float | None = None
    """``w * lexical + (1 - w) * dense``: the similarity the kernel scored, when fused."""
    topic: float | None = None
    """A current-state question's topic agreement of the memory with the query, in [0, 1]
    (``affect_memory.memory.recall.life_topics``), added at ``weights["topic"]`` times
    ``cue_scale``."""
    closest: float | None = None
    """A current-state question's cosine of the memory with the query's closest memory
    (``affect_memory.memory.recall.feedback``), blended into the cosine at ``weights["closest"]``;
    for the closest memory itself, and one without an embedding, its cosine with the query (so the
    blend leaves it as it is); None when no pool member had an embedding."""
    share: float | None = None
    """A current-state question's share of the query the memory matches: BM25 over the
    query's total idf, at most 1, weighed at ``weights["words_matched"]``."""
    cue_scale: float | None = None
    """How much of a current-state question's memory its topic and change speak for: 1 up
    to ``weights["cue_words"]`` words, that many over its words beyond (the topic term and
    the change gain count at this share)."""
    change: str | None = None
    """The change a current-state question's memory reports
    (``affect_memory.memory.recall.change_cues``), which multiplies its relevance by
    ``1 + weights["change_gain"] * cue_scale`` (at most 1 after); None: it reports none."""
    weights: Mapping[str, float] = field(default_factory=dict)
    """The weights of the parts: ``lexical`` and ``dense`` for a fused relevance;
    ``cosine``, ``words_matched``, ``closest``, ``topic``, ``change_gain`` and ``cue_words``
    for a current-state question's (a lexical weight is 0 where no lexical search found a
    word of the query); none for the dense recall."""

    def to_json(self) -> dict[str, Any]:
        """The parts as a JSON object."""
        return {
            "fused": self.fused,
            "lexical": self.lexical,
            "dense": self.dense,
            "bm25": self.bm25,
            "cosine": self.cosine,
            "topic": self.topic,
            "closest": self.closest,
            "share": self.share,
            "cue_scale": self.cue_scale,
            "change": self.change,
            "weights": dict(self.weights),
        }


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One ranked memory with every factor of its score and why it is aged as it is.

    ``score = (similarity * recency * salience + episode) * congruence``. ``distance`` is the
    memory's cosine distance ``1 - cos`` to the query (Chroma's for its nearest, computed from
    the stored embedding for a member only the lexical search or a filter's top-up added);
    ``similarity`` is the relevance the kernel scored (see ``relevance``), and ``recency`` comes
    from ``age_days``, the age the query's time rule gave the memory (``time_rule`` says why).
    """

    id: str
    text: str
    score: float
    distance: float
    similarity: float
    recency: float
    salience: float
    congruence: float
    episode: float
    """The episode bonus added to the score (0 for a non-episode)."""
    timestamp: str | None
    significance: float
    recall_count: int
    """Times a committed turn surfaced this memory (the index's count)."""
    emotional_valence: float
    relevance: Relevance | None = None
    age_days: float | None = None
    """The age recency was scored at, in days."""
    calendar_age_days: float | None = None
    """Days from the memory's timestamp to the recall's ``now``."""
    time_rule: str = ""
    """One line: which time rule the query got and what it made of this memory (a rendering
    of ``plan``, ``relevance`` and ``age_days``)."""
    last_recalled_at: str | None = None
    """When a committed turn last surfaced this memory (UTC ISO), or None."""
    plan: PlanKind | None = None
    """The kind of the query's plan (``affect_memory.memory.recall.plan``); None for the dense
    recall."""

    def to_json(self) -> dict[str, Any]:
        """The hit as a JSON object, in the documented key order."""
        return {
            "id": self.id,
            "text": self.text,
            "score": self.score,
            "distance": self.distance,
            "similarity": self.similarity,
            "recency": self.recency,
            "salience": self.salience,
            "congruence": self.congruence,
            "episode": self.episode,
            "timestamp": self.timestamp,
            "significance": self.significance,
            "recall_count": self.recall_count,
            "emotional_valence": self.emotional_valence,
            "relevance": None if self.relevance is None else self.relevance.to_json(),
            "age_days": self.age_days,
            "calendar_age_days": self.calendar_age_days,
            "time_rule": self.time_rule,
            "last_recalled_at": self.last_recalled_at,
            "plan": self.plan,
        }


@dataclass(frozen=True, slots=True)
class RecallResult:
    """The ranked memories for one query at one instant, and the malformed rows left out."""

    query: str
    user_id: str
    now: str
    results: tuple[RecallHit, ...]
    skipped: tuple[str, ...] = ()
    """Ids of stored rows among the candidates too malformed to score (logged as warnings)."""
    plan: QueryPlan | None = None
    """What the query was read as asking (None for the dense recall)."""

    def to_json(self) -> dict[str, Any]:
        """``{"query", "user_id", "now", "plan", "results": [...], "skipped": [...]}``, the
        results in rank order."""
        return {
            "query": self.query,
            "user_id": self.user_id,
            "now": self.now,
            "plan": None if self.plan is None else self.plan.to_json(),
            "results": [hit.to_json() for hit in self.results],
            "skipped": list(self.skipped),
        }

    def hit_documents(self) -> list[tuple[RecallHit, str, dict[str, Any]]]:
        """Each hit in rank order with its text and its metadata (the hit's JSON without the
        text, plus the result's ``user_id``), as retriever integrations hand hits on."""
        documents = []
        for hit in self.results:
            metadata = hit.to_json()
            text = metadata.pop("text")
            metadata["user_id"] = self.user_id
            documents.append((hit, text, metadata))
        return documents


@dataclass(frozen=True, slots=True)
class WriteReport:
    """What a write did: how many rows were written and which existing ids were left alone."""

    written: int
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnWriteReport:
    """What ``apply_turn_writes`` did for one turn; a replay reports everything as applied."""

    incremented: tuple[str, ...]
    already_applied: tuple[str, ...]
    missing: tuple[str, ...]
    stored_new: bool
    skipped: tuple[str, ...] = ()
    """Recalled ids whose stored ``recall_count`` is malformed: left unchanged, logged."""


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Counts and configuration of one store prefix: memories per user, space, HNSW, size."""

    location: str
    collection: str
    """The prefix every user's collection is named under."""
    space: str
    hnsw: dict[str, Any]
    embedder: str | None
    count: int
    users: dict[str, int] = field(default_factory=dict)
    """Memories per user with any, by the users' real ids."""
    size_bytes: int | None = None
    collections: int = 0
    """User collections under the prefix (one per user)."""

    def to_json(self) -> dict[str, Any]:
        """The stats as a JSON object."""
        return {
            "location": self.location,
            "collection": self.collection,
            "collections": self.collections,
            "space": self.space,
            "hnsw": self.hnsw,
            "embedder": self.embedder,
            "count": self.count,
            "users": self.users,
            "size_bytes": self.size_bytes,
        }
