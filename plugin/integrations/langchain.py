"""A LangChain retriever over ``ChromaMemory``: kernel-ranked memories as ``Document``s.

Each document's ``page_content`` is the memory text and its metadata holds every factor of the
kernel's score (see ``RecallHit``), so a chain can show or filter on why a memory ranked where
it did. Recall is read-only: retrieving does not bump recall counts.

The options follow LangChain's vector-store retrievers: ``k`` (an alias of ``top_k``) and
``search_kwargs`` (``k``, ``fetch_k``, ``filter``) at construction, the same three per call
(``invoke(query, k=2, filter={...})``); a call's options win over ``search_kwargs``, which win
over ``top_k``. ``filter`` is ``ChromaMemory.recall``'s ``where=``. An unknown option or setting
is refused, never ignored. Needs the ``langchain`` extra (``langchain-core``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from affect_memory.errors import MissingExtraError, TimestampError
from affect_memory.kernel.bounds import check_int, check_number
from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.memory.problems import explain_error, problems_message
from affect_memory.memory.records import check_identifier
from affect_memory.memory.results import (
    DEFAULT_CANDIDATES,
    MAX_CANDIDATES,
    MAX_TOP_K,
    RecallResult,
)
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

SEARCH_OPTIONS = ("k", "fetch_k", "filter")
"""The keys ``search_kwargs`` and a call take: LangChain's vector-store names."""


def _count(value: object, most: int = MAX_TOP_K) -> int:
    count = check_int(value, 1)
    if count > most:
        raise ValueError(f"must be between 1 and {most}, got {shown(value)}")
    return count


def _unknown(names: list[str], known: tuple[str, ...]) -> str:
    """``names`` quoted, each with the closest known name when there is one."""
    shown_names = []
    for name in sorted(names):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        shown_names.append(f"{name!r}{hint}")
    return ", ".join(shown_names)


class _Search(NamedTuple):
    """Checked search options; None leaves the retriever's own setting."""

    k: int | None = None
    fetch_k: int | None = None
    filter: Mapping[str, Any] | None = None


def _search(options: Mapping[str, Any]) -> _Search:
    """``options`` (``search_kwargs`` or a call's) checked; an error names the key and value."""
    unknown = [str(name) for name in options if name not in SEARCH_OPTIONS]
    if unknown:
        raise ValueError(
            f"takes only k, fetch_k and filter, got {_unknown(unknown, SEARCH_OPTIONS)}"
        )
    k = fetch_k = None
    if options.get("k") is not None:
        try:
            k = _count(options["k"])
        except ValueError as error:
            raise ValueError(f"k {error}") from None
    if options.get("fetch_k") is not None:
        try:
            fetch_k = _count(options["fetch_k"], MAX_CANDIDATES)
        except ValueError as error:
            raise ValueError(f"fetch_k {error}") from None
    where = options.get("filter")
    if where is not None and not isinstance(where, Mapping):
        raise ValueError(
            f"filter must be a mapping such as {{'agent_id': 'a1'}}, got {shown(where)}"
        )
    return _Search(k, fetch_k, where)


class AffectMemoryRetriever(BaseRetriever):
    """Retrieves one user's memories, reranked by the affect kernel, as LangChain documents.

    ``now`` fixes the instant recency is scored at (default: the moment of each call); ``k``
    is accepted for ``top_k``, and ``search_kwargs`` takes ``k``, ``fetch_k`` (``candidates``)
    and ``filter`` (recall's ``where=``), as LangChain's vector-store retrievers do.
    """

    model_config = ConfigDict(extra="forbid")

    memory: ChromaMemory
    user_id: str
    top_k: int = 6
    candidates: int = DEFAULT_CANDIDATES
    mood_valence: float = 0.0
    now: datetime | None = None
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        """Validate every field; bad ones raise ``InvalidInputError`` naming each and its value."""
        alias = "k" in data
        if alias:
            if "top_k" in data:
                raise InvalidInputError(
                    "AffectMemoryRetriever takes k or top_k (the same setting), not both"
                )
            data["top_k"] = data.pop("k")
        try:
            super().__init__(**data)
        except ValidationError as error:
            problems = []
            for item in error.errors():
                if alias and tuple(item.get("loc", ())) == ("top_k",):
                    item = {**item, "loc": ("k",)}
                if not item.get("loc"):  # a check of the whole: its message says it all
                    problems.append(str((item.get("ctx") or {}).get("error", item["msg"])))
                    continue
                if item.get("type") == "extra_forbidden":
                    name = ".".join(str(part) for part in item.get("loc", ()))
                    known = (*type(self).model_fields, "k")
                    problems.append(f"takes no setting {_unknown([name], known)}")
                    continue
                problems.append(explain_error(item)[0])
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

    @field_validator("search_kwargs", mode="before")
    @classmethod
    def _check_search(cls, value: object) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise ValueError(f"must be a mapping such as {{'k': 4}}, got {shown(value)}")
        options = dict(value)
        _search(options)
        return options

    @model_validator(mode="after")
    def _one_k(self) -> AffectMemoryRetriever:
        if "top_k" in self.model_fields_set and self.search_kwargs.get("k") is not None:
            raise ValueError("top_k and search_kwargs k set the same thing: give one")
        return self

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

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        """``recall``'s keywords for one call: its options over ``search_kwargs`` over fields."""
        for name in _IGNORED_OPTIONS:
            options.pop(name, None)
        try:
            stored = _search(self.search_kwargs)
        except ValueError as error:
            raise InvalidInputError(f"AffectMemoryRetriever search_kwargs {error}") from None
        try:
            call = _search(options)
        except ValueError as error:
            raise InvalidInputError(f"AffectMemoryRetriever {error}") from None
        top_k = call.k or stored.k or self.top_k
        candidates = call.fetch_k or stored.fetch_k or self.candidates
        recall: dict[str, Any] = {
            "mood_valence": self.mood_valence,
            "now": self.now,
            "top_k": top_k,
            "candidates": max(candidates, top_k),
        }
        where = call.filter if call.filter is not None else stored.filter
        if where is not None:
            recall["where"] = dict(where)
        return recall

    def _documents(self, result: RecallResult) -> list[Document]:
        """One document per hit, in rank order, its metadata the hit's breakdown."""
        return [
            Document(page_content=text, metadata=metadata, id=hit.id)
            for hit, text, metadata in result.hit_documents()
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        """The ranked documents for ``query``, best first (``k=``, ``filter=`` for this call)."""
        recall = self._options(options)
        return self._documents(self.memory.recall(query, self.user_id, **recall))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        """The ranked documents for ``query`` through the store's async ``arecall``."""
        recall = self._options(options)
        return self._documents(await self.memory.arecall(query, self.user_id, **recall))
