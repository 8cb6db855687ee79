"""One user's memories as the engine's retriever: every retrieval scoped to that user.

It is a ``RankedRetriever``: a turn takes its memories in recall's order, scored as recall
scored them, and does not rank them again, so a turn surfaces exactly what
``ChromaMemory.recall`` returns for the same query, settings and ``now``. For an engine that
ranks candidates itself, ``retrieve`` also prepares them for the kernel (the relevance as the
distance, the rule's age, the index's recall count), and ``ranking_weights`` offers the
settings' weights to rank them with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.protocols import RetrievalInput
from affect_memory.kernel.retrieval import RetrievalWeights, ScoredCandidate
from affect_memory.memory.results import check_user
from affect_memory.memory.settings import RecallSettings, resolve_settings

if TYPE_CHECKING:
    from affect_memory.memory.store import ChromaMemory

__all__ = ["UserRetriever"]


class UserRetriever:
    """A ``MemoryRetriever`` bound to one user of a ``ChromaMemory``, for the engine."""

    def __init__(
        self, memory: ChromaMemory, user_id: str, *, settings: RecallSettings | None = None
    ) -> None:
        """Retrieve ``user_id``'s memories from ``memory``, pooled and ranked by ``settings``."""
        self._memory = memory
        self._user_id = check_user(user_id)
        self._settings = resolve_settings(settings)

    @property
    def user_id(self) -> str:
        """The user every retrieval is scoped to."""
        return self._user_id

    @property
    def settings(self) -> RecallSettings:
        """How the pool is built and ranked."""
        return self._settings

    @property
    def ranking_weights(self) -> RetrievalWeights:
        """The weights the candidates are prepared for: an engine given none ranks with them."""
        return self._settings.weights

    async def retrieve_ranked(self, request: RetrievalInput) -> tuple[ScoredCandidate, ...]:
        """The request's best memories from this user's only, in recall's order and scored as
        recall scores them (``request.weights``, the engine's, or else this retriever's)."""
        return await self._memory.retrieve_ranked(
            request, user_id=self._user_id, settings=self._settings
        )

    async def retrieve(self, request: RetrievalInput) -> tuple[MemoryCandidate, ...]:
        """The request's best candidates from this user's memories only, prepared for the
        kernel with ``request.weights`` (the engine's) or else this retriever's."""
        return await self._memory.retrieve(
            request, user_id=self._user_id, settings=self._settings
        )
