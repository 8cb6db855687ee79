"""Secrets kept out of everything an OpenAI-compatible adapter shows: keys, URL credentials.

The API key is stripped and checked at construction without quoting it (a CRLF ``.env`` leaves
a carriage return); a base URL's ``user:password@`` moves into HTTP Basic auth; and whatever an
endpoint echoes back, or a chained exception carries, has the secrets replaced by ``***``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

import httpx

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = [
    "Credentials",
    "key_problem",
    "redact_chain",
    "redact_text",
    "redact_url",
    "split_credentials",
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


class Credentials:
    """The ``user:password@`` a base URL carried, and the strings that must never be shown."""

    def __init__(self, url: httpx.URL) -> None:
        """Take the credentials of ``url``: Basic auth, and every form a secret may be shown in."""
        self.auth = httpx.BasicAuth(url.username, url.password)
        raw = url.userinfo.decode("ascii", errors="replace")
        encoded_user, _, encoded_password = raw.partition(":")
        # A token passed as the user name (https://TOKEN@host) is the secret itself.
        private = (url.password, encoded_password) if url.password else (url.username, encoded_user)
        self.secrets = tuple(sorted({text for text in private if text}, key=len, reverse=True))


def split_credentials(base_url: str) -> tuple[str, Credentials | None]:
    """The URL without ``user:password@`` and, when it carried them, those credentials."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError, ValueError):
        raise InvalidInputError(
            f"base_url is not a valid URL, got {shown(redact_url(base_url))}"
        ) from None
    if not url.userinfo:
        return base_url, None
    return str(url.copy_with(userinfo=b"")), Credentials(url)


_USERINFO = re.compile(r"(?<=://)[^/?#@]*@")


def redact_url(text: str) -> str:
    """``text`` with any ``user:password@`` after a scheme replaced by ``***@``."""
    return _USERINFO.sub("***@", text)


def redact_chain(error: BaseException, secrets: Sequence[str]) -> None:
    """Replace every secret in the arguments of ``error`` and of its causes and contexts.

    A formatted traceback prints each chained exception's ``str``, which is built from its
    arguments (httpcore wraps the h11 error object itself as its argument).
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        with contextlib.suppress(AttributeError, TypeError):  # an exotic exception type
            current.args = tuple(_redact_value(value, secrets) for value in current.args)
        pending += [current.__cause__, current.__context__]
        pending += [value for value in current.args if isinstance(value, BaseException)]


def _redact_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, bytes):
        text = value.decode("latin-1")
        redacted = redact_text(text, secrets)
        return value if redacted == text else redacted.encode("latin-1")
    return value


def redact_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text

