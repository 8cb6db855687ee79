"""A LangChain retriever over ``ChromaMemory``: kernel-ranked memories as ``Document``s.

Each document's ``page_content`` is the memory text and its metadata holds every factor of the
kernel's score (see ``RecallHit``), so a chain can show or filter on why a memory ranked where
it did. Recall is read-only: retrieving does not bump recall counts. Needs the ``langchain``
extra (``langchain-core``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from pydantic import ValidationError, field_validator

from kernel.bounds import check_int, check_number
from kernel.errors import InvalidInputError
from plugin.chroma_memory import DEFAULT_CANDIDATES, MAX_CANDIDATES, ChromaMemory
from plugin.errors import MissingExtraError
from plugin.timestamps import normalize_timestamp

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError(
        "plugin.langchain needs the 'langchain' extra: "
        "pip install -c constraints.txt 'affect-memory[langchain]'"
    ) from error

__all__ = ["AffectMemoryRetriever"]


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
        """Validate every field; a bad one raises ``InvalidInputError`` naming it and its value."""
        try:
            super().__init__(**data)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "retriever"
            cause = (first.get("ctx") or {}).get("error")
            if first["type"] == "missing":
                detail = "is required"
            elif cause is not None:
                detail = str(cause)
            else:
                detail = f"{first['msg'][:1].lower()}{first['msg'][1:]}, got {first['input']!r}"
            raise InvalidInputError(f"AffectMemoryRetriever {field} {detail}") from None

    @field_validator("user_id", mode="before")
    @classmethod
    def _check_user(cls, value: object) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError(f"must be a non-empty string (recall is per user), got {value!r}")
        return value

    @field_validator("top_k", "candidates", mode="before")
    @classmethod
    def _check_count(cls, value: object) -> int:
        count = check_int(value, 1)
        if count > MAX_CANDIDATES:
            raise ValueError(f"must be between 1 and {MAX_CANDIDATES}, got {value!r}")
        return count

    @field_validator("mood_valence", mode="before")
    @classmethod
    def _check_valence(cls, value: object) -> float:
        return check_number(value, -1.0, 1.0)

    @field_validator("now", mode="before")
    @classmethod
    def _check_now(cls, value: object) -> datetime | None:
        return None if value is None else normalize_timestamp(value, field="now").moment

    def _documents(self, query: str) -> list[Document]:
        result = self.memory.recall(
            query,
            self.user_id,
            mood_valence=self.mood_valence,
            now=self.now,
            top_k=self.top_k,
            candidates=max(self.candidates, self.top_k),
        )
        documents = []
        for hit in result.results:
            metadata = hit.to_json()
            text = metadata.pop("text")
            metadata["user_id"] = result.user_id
            documents.append(Document(page_content=text, metadata=metadata, id=hit.id))
        return documents

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        """The ranked documents for ``query``, best first."""
        return self._documents(query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        """The ranked documents for ``query``; embedding and Chroma run in a worker thread."""
        return await asyncio.to_thread(self._documents, query)
