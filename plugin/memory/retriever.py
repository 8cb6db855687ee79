"""One user's memories as the engine's retriever: every retrieval scoped to that user."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.models import MemoryCandidate
from kernel.protocols import RetrievalInput
from plugin.memory.results import DEFAULT_CANDIDATES, check_candidates, check_user

if TYPE_CHECKING:
    from plugin.memory.store import ChromaMemory

__all__ = ["UserRetriever"]


class UserRetriever:
    """A ``MemoryRetriever`` bound to one user of a ``ChromaMemory``, for the engine."""

    def __init__(
        self, memory: ChromaMemory, user_id: str, *, candidates: int = DEFAULT_CANDIDATES
    ) -> None:
        """Retrieve ``user_id``'s memories from ``memory``, ``candidates`` rows at least."""
        self._memory = memory
        self._user_id = check_user(user_id)
        self._candidates = check_candidates(candidates)

    @property
    def user_id(self) -> str:
        """The user every retrieval is scoped to."""
        return self._user_id

    async def retrieve(self, request: RetrievalInput) -> tuple[MemoryCandidate, ...]:
        """Unranked candidates for the request, from this user's memories only."""
        return await self._memory.retrieve(
            request, user_id=self._user_id, candidates=self._candidates
        )
