"""One user's memories as the engine's retriever: every retrieval scoped to that user.

It returns the turn's best memories as recall ranks them, prepared for the kernel (the
relevance as its distance, the time rule's age, the index's recall count), and offers its
settings' weights as ``ranking_weights``, so an engine without weights of its own ranks a
turn exactly as ``ChromaMemory.recall`` ranks the same query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.models import MemoryCandidate
from kernel.protocols import RetrievalInput
from kernel.retrieval import RetrievalWeights
from plugin.memory.results import check_user
from plugin.memory.settings import RecallSettings, resolve_settings

if TYPE_CHECKING:
    from plugin.memory.store import ChromaMemory

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

    async def retrieve(self, request: RetrievalInput) -> tuple[MemoryCandidate, ...]:
        """The request's best candidates from this user's memories only, prepared for the
        kernel with ``request.weights`` (the engine's) or else this retriever's."""
        return await self._memory.retrieve(
            request, user_id=self._user_id, settings=self._settings
        )
