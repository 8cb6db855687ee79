"""A static retriever: the same candidates for every request, a request log, an injectable error."""

from __future__ import annotations

from collections.abc import Sequence

from affect_memory.kernel.models import MemoryCandidate
from affect_memory.kernel.protocols import RetrievalInput

__all__ = ["StaticRetriever"]


class StaticRetriever:
    """A ``MemoryRetriever`` that returns fixed candidates, or raises a set error."""

    def __init__(
        self,
        candidates: Sequence[MemoryCandidate] = (),
        *,
        error: BaseException | None = None,
    ) -> None:
        """Return ``candidates`` (as given) on every call, or raise ``error`` when set."""
        self.candidates: Sequence[MemoryCandidate] = candidates
        self.error = error
        self.requests: list[RetrievalInput] = []
        """Every request received, in order."""

    async def retrieve(self, request: RetrievalInput) -> Sequence[MemoryCandidate]:
        """The fixed candidates; the request is logged first."""
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return self.candidates
