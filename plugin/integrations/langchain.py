"""A LangChain retriever over ``ChromaMemory``: kernel-ranked memories as ``Document``s.

Each document's ``page_content`` is the memory text and its metadata holds every factor of the
kernel's score (see ``RecallHit``), so a chain can show or filter on why a memory ranked where
it did. Recall is read-only: retrieving does not bump recall counts. ``invoke(query, k=N)``
returns N documents for that call (LangChain's usual per-call option). Needs the
``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from pydantic import ValidationError, field_validator

from affect_memory.errors import MissingExtraError, TimestampError
from affect_memory.kernel.bounds import check_int, check_number
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import check_identifier
from affect_memory.memory.results import DEFAULT_CANDIDATES, MAX_CANDIDATES, MAX_TOP_K
from affect_memory.memory.store import ChromaMemory
from affect_memory.memory.timestamps import normalize_timestamp

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "affect_memory.integrations.langchain needs the 'langchain' extra: "
        "pip install -c constraints.txt 'affect-memory[langchain]'"
    ) from error

__all__ = ["AffectMemoryRetriever"]

_IGNORED_OPTIONS = ("verbose",)
"""Options LangChain itself leaves in ``invoke``'s keyword arguments."""


def _count(value: object, most: int = MAX_TOP_K) -> int:
    count = check_int(value, 1)
    if count > most:
        raise ValueError(f"must be between 1 and {most}, got {shown(value)}")
    return count


class AffectMemoryRetriever(BaseRetriever):
    """Retrieves one user's memories, reranked by the affect kernel, as LangChain documents.

    ``now`` fixes the instant recency is scored at (default: the moment of each call).
    """

    memory: ChromaMemory
    user_id: str
    top_k: int = 6
    candidates: int = DEFAULT_CANDIDATES
    mood_valence: float = 0.0
    now: datetime | None = None

    def __init__(self, **data: Any) -> None:
        """Validate every field; bad ones raise ``InvalidInputError`` naming each and its value."""
        try:
            super().__init__(**data)
        except ValidationError as error:
            problems = [explain_error(item)[0] for item in error.errors()]
            raise InvalidInputError(
                f"AffectMemoryRetriever {problems_message(problems)}"
            ) from None

    @field_validator("user_id", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> str:
        try:
            return check_identifier(value)
        except ValueError as error:
            raise ValueError(f"{error} (recall is per user)") from None

    @field_validator("top_k", mode="before")
    @classmethod
    def _check_count(cls, value: object) -> int:
        return _count(value)

    @field_validator("candidates", mode="before")
    @classmethod
    def _check_candidates(cls, value: object) -> int:
        return _count(value, MAX_CANDIDATES)

    @field_validator("mood_valence", mode="before")
    @classmethod
    def _check_valence(cls, value: object) -> float:
        return check_number(value, -1.0, 1.0)

    @field_validator("now", mode="before")
    @classmethod
    def _check_now(cls, value: object) -> datetime | None:
        if value is None:
            return None
        try:
            return normalize_timestamp(value, field="now").moment
        except TimestampError as error:
            # The error's location names the field already: drop the timestamp's own label.
            raise ValueError(str(error).removeprefix("now ")) from None

    def _documents(self, query: str, options: dict[str, Any]) -> list[Document]:
        k = options.pop("k", None)
        for name in _IGNORED_OPTIONS:
            options.pop(name, None)
        if options:
            raise InvalidInputError(
                "AffectMemoryRetriever.invoke takes k (how many documents) as its only option, "
                f"got {', '.join(sorted(options))}"
            )
        top_k = self.top_k
        if k is not None:
            try:
                top_k = _count(k)
            except ValueError as error:
                raise InvalidInputError(f"AffectMemoryRetriever k {error}") from None
        result = self.memory.recall(
            query,
            self.user_id,
            mood_valence=self.mood_valence,
            now=self.now,
            top_k=top_k,
            candidates=max(self.candidates, top_k),
        )
        documents = []
        for hit in result.results:
            metadata = hit.to_json()
            text = metadata.pop("text")
            metadata["user_id"] = result.user_id
            documents.append(Document(page_content=text, metadata=metadata, id=hit.id))
        return documents

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        """The ranked documents for ``query``, best first (``k=`` overrides ``top_k``)."""
        return self._documents(query, options)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        """The ranked documents for ``query``; embedding and Chroma run in a worker thread."""
        return await asyncio.to_thread(self._documents, query, options)
