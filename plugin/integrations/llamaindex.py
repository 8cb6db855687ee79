"""LlamaIndex over ``ChromaMemory``: kernel-ranked memories as nodes, and the kernel's ranking
as a postprocessor any retriever's nodes can pass through.

``AffectMemoryLlamaRetriever`` recalls one user's memories (read-only) as ``NodeWithScore``s
whose score is the kernel's and whose metadata holds the score breakdown (``RecallHit``).
``AffectRankingPostprocessor`` re-ranks nodes from any retriever with the kernel's score: the
node's incoming score is its cosine similarity, and the memory features it needs come from the
node's metadata under ``RecallHit``'s names, neutral when absent. Needs the ``llamaindex``
extra (``llama-index-core``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from affect_memory.errors import MissingExtraError, TimestampError
from affect_memory.kernel.bounds import check_int, check_number, parse_zoned
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.ranking import rank_candidates
from affect_memory.kernel.retrieval import RetrievalWeights
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import check_identifier
from affect_memory.memory.results import (
    DEFAULT_CANDIDATES,
    RecallResult,
    check_candidates,
    check_top_k,
)
from affect_memory.memory.settings import RECALL_WEIGHTS
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.timestamps import normalize_timestamp

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "affect_memory.integrations.llamaindex needs the 'llamaindex' extra: "
        "pip install -c constraints.txt 'affect-memory[llamaindex]'"
    ) from error

__all__ = ["LLM_METADATA_KEYS", "AffectMemoryLlamaRetriever", "AffectRankingPostprocessor"]

LLM_METADATA_KEYS = ("timestamp",)
"""The metadata a retrieved node shows an LLM; the score breakdown is for code, not prompts."""

SIMILARITY_SLACK = 1e-6
"""How far outside [-1, 1] a node's score may stray (float error of a cosine) before it is
refused rather than clamped."""

NEUTRAL_SIMILARITY = 0.0
"""The cosine of a node with neither a score nor an embedding: orthogonal, no evidence."""


def _now(value: object) -> datetime | None:
    """``now`` as a zoned datetime, or None for the moment of each call."""
    if value is None:
        return None
    try:
        return normalize_timestamp(value, field="now").moment
    except TimestampError as error:
        raise ValueError(str(error).removeprefix("now ")) from None


class AffectMemoryLlamaRetriever(BaseRetriever):
    """Retrieves one user's memories, reranked by the affect kernel, as LlamaIndex nodes.

    ``where`` is ``ChromaMemory.recall``'s filter; ``now`` fixes the instant recency is scored
    at (default: the moment of each call). The query bundle's text is embedded by the store's
    own embedder, so a bundle's precomputed embedding is not used.
    """

    def __init__(
        self,
        memory: ChromaMemory,
        user_id: str,
        *,
        top_k: int = 6,
        candidates: int = DEFAULT_CANDIDATES,
        mood_valence: float = 0.0,
        now: str | datetime | None = None,
        where: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        """Check every setting; bad ones raise one ``InvalidInputError`` naming each."""
        problems: list[str] = []
        if not isinstance(memory, ChromaMemory):
            problems.append(f"memory must be a ChromaMemory, got {type(memory).__name__}")
        try:
            self.user_id = check_identifier(user_id)
        except ValueError as error:
            problems.append(f"user_id {error} (recall is per user)")
        try:
            self.top_k = check_top_k(top_k)
        except InvalidInputError as error:
            problems.append(str(error))
        try:
            self.candidates = check_candidates(candidates)
        except InvalidInputError as error:
            problems.append(str(error))
        try:
            self.mood_valence = check_number(mood_valence, -1.0, 1.0)
        except ValueError as error:
            problems.append(f"mood_valence {error}")
        try:
            self.now = _now(now)
        except ValueError as error:
            problems.append(f"now {error}")
        if where is not None and not isinstance(where, Mapping):
            problems.append(
                f"where must be a mapping such as {{'agent_id': 'a1'}}, got {shown(where)}"
            )
        if problems:
            raise InvalidInputError(f"AffectMemoryLlamaRetriever {problems_message(problems)}")
        self.memory = memory
        self.where = None if where is None else dict(where)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "mood_valence": self.mood_valence,
            "now": self.now,
            "top_k": self.top_k,
            "candidates": max(self.candidates, self.top_k),
        }
        if self.where:
            options["where"] = self.where
        return options

    def _nodes(self, result: RecallResult) -> list[NodeWithScore]:
        nodes = []
        for hit, text, metadata in result.hit_documents():
            node = TextNode(
                id_=hit.id,
                text=text,
                metadata=metadata,
                excluded_llm_metadata_keys=[k for k in metadata if k not in LLM_METADATA_KEYS],
                excluded_embed_metadata_keys=list(metadata),
            )
            nodes.append(NodeWithScore(node=node, score=hit.score))
        return nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The ranked memories for the bundle's query, best first."""
        result = self.memory.recall(query_bundle.query_str, self.user_id, **self._options())
        return self._nodes(result)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The ranked memories for the bundle's query, through the store's async ``arecall``."""
        query = query_bundle.query_str
        return self._nodes(await self.memory.arecall(query, self.user_id, **self._options()))


_SETTINGS = "known setting (mood_valence, now, top_n, congruence_on, weights)"
"""What an unknown keyword of ``AffectRankingPostprocessor`` is not."""


class AffectRankingPostprocessor(BaseNodePostprocessor):
    """Re-ranks nodes by the affect kernel's score: similarity × recency × salience, plus the
    episode bonus, times mood congruence.

    A node's incoming score is its cosine similarity (in [-1, 1]); a node without one is
    compared by embedding with the query bundle's, else counts as orthogonal. ``timestamp``,
    ``significance``, ``recall_count``, ``episode`` and ``emotional_valence`` come from the
    node's metadata; a missing one is neutral (an unusable timestamp gets the kernel's fallback
    recency), a malformed number is an error. Nodes sharing an id keep their best; ``top_n``
    cuts the ranking (default: keep every node). ``AffectMemoryLlamaRetriever``'s nodes are
    ranked already, and their scores are not cosines: they need no pass through it.
    """

    model_config = ConfigDict(extra="forbid")

    mood_valence: float = 0.0
    now: datetime | None = None
    top_n: int | None = None
    congruence_on: bool = Field(default=True, strict=True)
    weights: RetrievalWeights = RECALL_WEIGHTS

    def __init__(self, **data: Any) -> None:
        """Validate every field; bad ones raise ``InvalidInputError`` naming each."""
        try:
            super().__init__(**data)
        except ValidationError as error:
            problems = [explain_error(item, fields=_SETTINGS)[0] for item in error.errors()]
            raise InvalidInputError(
                f"AffectRankingPostprocessor {problems_message(problems)}"
            ) from None

    @field_validator("mood_valence", mode="before")
    @classmethod
    def _check_valence(cls, value: object) -> float:
        return check_number(value, -1.0, 1.0)

    @field_validator("now", mode="before")
    @classmethod
    def _check_now(cls, value: object) -> datetime | None:
        return _now(value)

    @field_validator("top_n", mode="before")
    @classmethod
    def _check_top_n(cls, value: object) -> int | None:
        return None if value is None else check_int(value, 1)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "AffectRankingPostprocessor"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """The nodes re-ranked by the kernel's score (new ``NodeWithScore``s; nodes unchanged)."""
        if not nodes:
            return []
        query_embedding = None if query_bundle is None else query_bundle.embedding
        by_candidate: dict[int, NodeWithScore] = {}
        candidates = []
        for item in nodes:
            candidate = _candidate(item, query_embedding)
            by_candidate[id(candidate)] = item
            candidates.append(candidate)
        ranked = rank_candidates(
            candidates,
            self.now or datetime.now(UTC),
            self.mood_valence,
            limit=min(self.top_n or len(candidates), len(candidates)),
            congruence_on=self.congruence_on,
            weights=self.weights,
        )
        return [
            NodeWithScore(node=by_candidate[id(scored.candidate)].node, score=scored.score)
            for scored in ranked
        ]


def _cosine(left: Sequence[float], right: Sequence[float]) -> float | None:
    """The cosine of two vectors; None when their lengths differ or one is zero."""
    if len(left) != len(right) or not left:
        return None
    dot = math.fsum(a * b for a, b in zip(left, right, strict=True))
    norm = math.sqrt(math.fsum(a * a for a in left)) * math.sqrt(math.fsum(b * b for b in right))
    return dot / norm if norm > 0 else None


def _similarity(item: NodeWithScore, query_embedding: Sequence[float] | None) -> float:
    """The node's cosine similarity to the query, checked and clamped to [-1, 1]."""
    cosine: float | None = item.score
    if cosine is None and query_embedding is not None and item.node.embedding is not None:
        cosine = _cosine(query_embedding, item.node.embedding)
    if cosine is None:
        return NEUTRAL_SIMILARITY
    if (
        isinstance(cosine, bool)
        or not isinstance(cosine, int | float)
        or not math.isfinite(cosine)
        or abs(cosine) > 1.0 + SIMILARITY_SLACK
    ):
        raise InvalidInputError(
            f"AffectRankingPostprocessor takes cosine similarities in [-1, 1] as node scores; "
            f"node {shown(item.node.node_id)} has score {shown(cosine)} (rescale the scores, or "
            "put the postprocessor before one that scores otherwise)"
        )
    return min(1.0, max(-1.0, float(cosine)))


def _timestamp(value: object) -> str | None:
    """A zoned ISO text of ``value``, or None when it is missing or unusable (the kernel's
    fallback recency)."""
    if not isinstance(value, str | datetime):
        return None
    try:
        return parse_zoned(value).isoformat()
    except (ValueError, OverflowError):
        return None


_NUMBERS: tuple[tuple[str, float, float], ...] = (
    ("significance", 0.0, 1.0),
    ("recall_count", 0.0, math.inf),
    ("emotional_valence", -1.0, 1.0),
)
"""The numeric features a node's metadata may carry, with their bounds (recall_count: a count,
an int)."""


def _candidate(item: NodeWithScore, query_embedding: Sequence[float] | None) -> MemoryCandidate:
    """The kernel's view of one node: its distance to the query and its memory features."""
    node = item.node
    metadata = node.metadata
    cosine = _similarity(item, query_embedding)
    features: dict[str, Any] = {}
    for name, low, high in _NUMBERS:
        value = metadata.get(name)
        if value is None:
            continue
        try:
            count = name == "recall_count"
            features[name] = check_int(value, 0) if count else check_number(value, low, high)
        except ValueError as error:
            raise InvalidInputError(
                f"AffectRankingPostprocessor node {shown(node.node_id)} metadata {name} {error}"
            ) from None
    episode = metadata.get("episode", False)
    if not isinstance(episode, bool):
        raise InvalidInputError(
            f"AffectRankingPostprocessor node {shown(node.node_id)} metadata episode must be a "
            f"bool, got {shown(episode)}"
        )
    return MemoryCandidate(
        id=node.node_id,
        text="",  # the kernel ranks by features; the node keeps its text
        distance=min(2.0, max(0.0, 1.0 - cosine)),
        timestamp=_timestamp(metadata.get("timestamp")),
        episode=episode,
        **features,
    )
