"""Secrets kept out of everything an OpenAI-compatible adapter shows: keys, URL credentials.

The API key is stripped and checked at construction without quoting it (a CRLF ``.env`` leaves
a carriage return); a base URL with user-info is refused unquoted; a key in its query string is
kept out of ``repr`` and messages; and whatever an endpoint echoes back, or a chained exception
carries, has every form of the secrets replaced by ``***`` (``affect_memory.redaction``).
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from affect_memory.kernel.errors import InvalidInputError, shown
from affect_memory.redaction import redact, redact_exception, url_secrets
from affect_memory.redaction import redact_url as _redact_url

__all__ = [
    "check_base_url",
    "key_problem",
    "redact_chain",
    "redact_text",
    "redact_url",
]


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot travel in an HTTP header, without quoting any of it; None if it can."""
    if not key:
        return "is only whitespace"
    for position, character in enumerate(key, start=1):
        if not character.isascii():
            return f"has a non-ASCII character at position {position}"
        if not character.isprintable():
            return f"has a control character at position {position}"
    return None


def check_base_url(base_url: str) -> tuple[str, tuple[str, ...]]:
    """``base_url`` checked, and the secrets its query string carries (``?api_key=...``).

    A URL with user-info is refused without being quoted: credentials there would travel as
    HTTP Basic auth, which an echoing endpoint shows back base64-encoded.
    """
    if "@" in base_url:
        raise InvalidInputError(
            "base_url holds '@': user-info (user:password@ before the host) is never sent; "
            "pass the key as api_key (--api-key-env for chat) and drop it from the URL "
            "(the URL is not shown, as it may hold a password)"
        )
    try:
        httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise InvalidInputError(
            f"base_url is not a valid URL, got {shown(redact_url(base_url))}"
        ) from None
    return base_url, url_secrets(base_url)


def redact_url(text: str) -> str:
    """``text`` (one URL) with its user-info and password-like query parameters masked."""
    return _redact_url(text)


def redact_chain(error: BaseException, secrets: Sequence[str]) -> None:
    """Mask every secret in the arguments of ``error`` and of its causes and contexts."""
    redact_exception(error, secrets)


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every form of ``secrets`` (raw, URL-encoded, JSON-escaped, base64) and
    every recognisable credential masked."""
    return redact(text, secrets)
