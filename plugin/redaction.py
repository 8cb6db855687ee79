"""Keeping secrets out of everything shown: errors, ``repr``s, log records and tracebacks.

Every door that takes a URL or a key (``--index``, ``--state``, ``open_state_store``,
``ChromaMemory(index=...)``, ``--chroma``, a model URL, an API key) masks through this module.
Two kinds of masking compose:

- structural, needing no knowledge of the secret: a URL's whole user-info (everything between
  ``scheme://`` and the last ``@`` of the URL, so a password holding an unencoded ``/``, ``?``
  or ``@`` is still covered), every password-like query or keyword parameter (``password``,
  ``pwd``, ``secret``, ``token``, ``api_key``, ... in any case) and the credential of an
  ``Authorization: Basic/Bearer`` header;
- by value: a known secret in each form an echoing server or a formatter may give it back
  in (raw, percent-encoded with ``quote`` and ``quote_plus``, JSON-escaped, ``repr``-escaped,
  base64, UTF-8 bytes read as Latin-1), matched case-insensitively so ``%2f`` and ``%2F``
  both go.

Masking errs on the side of hiding: an ``@`` in a query string hides the host too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote

__all__ = [
    "MASK",
    "install_log_redaction",
    "is_secret_name",
    "normalize_userinfo",
    "redact",
    "redact_exception",
    "redact_url",
    "remember_secrets",
    "secret_forms",
    "url_secrets",
]

MASK = "***"
"""What a secret is replaced by."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*")
_SECRET_WORD = re.compile(r"pass|pwd|secret|token|key|auth|credential|signature", re.IGNORECASE)
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_ASSIGNED = re.compile(rf"({_NAME})(\s*=\s*)('[^']*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\"]+)")
_JSON_FIELD = re.compile(rf"(\"{_NAME}\"\s*:\s*)(\"(?:[^\"\\]|\\.)*\")")
_AUTH_SCHEME = re.compile(r"\b(Basic|Bearer)(\s+)[A-Za-z0-9+/=._~\-]{4,}", re.IGNORECASE)
_HOST = re.compile(r"[A-Za-z0-9.\-\[\]:%,]*")


def is_secret_name(name: str) -> bool:
    """Whether a parameter called ``name`` holds a secret (password, pwd, token, api_key, ...)."""
    return bool(_SECRET_WORD.search(name))


def _mask_query(query: str) -> str:
    """A query string with the value of every password-like parameter masked."""
    parts = re.split(r"([&;])", query)
    for index, part in enumerate(parts):
        name, equals, _ = part.partition("=")
        if equals and is_secret_name(unquote(name)):
            parts[index] = f"{name}={MASK}"
    return "".join(parts)


def redact_url(url: str) -> str:
    """``url`` with its whole user-info and every password-like query parameter masked."""
    match = _SCHEME.match(url)
    if match is None:
        return _mask_query(url)
    rest = url[match.end() :]
    at = rest.rfind("@")
    if at >= 0:
        rest = f"{MASK}@{rest[at + 1 :]}"
    path, question, query = rest.partition("?")
    return url[: match.end()] + path + question + _mask_query(query)


def _mask_assignment(found: re.Match[str]) -> str:
    name, sign, _ = found.groups()
    return f"{name}{sign}{MASK}" if is_secret_name(name) else found.group(0)


def _mask_json_field(found: re.Match[str]) -> str:
    head, _ = found.groups()
    return f'{head}"{MASK}"' if is_secret_name(head.partition('"')[2]) else found.group(0)


def secret_forms(secret: str) -> frozenset[str]:
    """Every form ``secret`` may come back in: raw, URL-encoded, JSON- and repr-escaped, base64."""
    if not secret:
        return frozenset()
    raw = secret.encode("utf-8", errors="surrogatepass")
    forms = {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        quote_plus(secret, safe="/"),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        repr(raw)[2:-1],
        raw.decode("latin-1"),
        base64.b64encode(raw).decode("ascii").rstrip("="),
        base64.urlsafe_b64encode(raw).decode("ascii").rstrip("="),
    }
    return frozenset(form for form in forms if form)


def _known_pattern(secrets: Iterable[str]) -> re.Pattern[str] | None:
    forms = {form for secret in secrets for form in secret_forms(secret)}
    if not forms:
        return None
    ordered = sorted(forms, key=len, reverse=True)
    return re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every form of ``secrets`` and every recognisable credential masked."""
    known = _known_pattern([*secrets, *_remembered()])
    if known is not None:
        text = known.sub(MASK, text)
    text = _URL_IN_TEXT.sub(lambda found: redact_url(found.group(0)), text)
    text = _JSON_FIELD.sub(_mask_json_field, text)
    text = _ASSIGNED.sub(_mask_assignment, text)
    return _AUTH_SCHEME.sub(rf"\1\2{MASK}", text)


def _userinfo_end(rest: str) -> int:
    """Where the user-info of a URL's part after ``scheme://`` ends (its last ``@``), or -1.

    An ``@`` after the first ``/``, ``?`` or ``#`` counts only when what precedes it holds no
    ``=`` (a query parameter) and what follows it starts with a host.
    """
    at = rest.rfind("@")
    if at < 0:
        return -1
    delimiter = re.search(r"[/?#]", rest)
    if delimiter is None or at < delimiter.start():
        return at
    host = _HOST.match(rest, at + 1)
    if "=" in rest[:at] or host is None or not host.group(0):
        head_at = rest.rfind("@", 0, delimiter.start())
        return head_at
    return at


def normalize_userinfo(url: str) -> str:
    """``url`` with its user name and password percent-encoded, so libpq reads them whole.

    A password holding an unencoded ``/``, ``?``, ``@`` or ``:`` would otherwise be split by
    libpq into host, port or database, and its fragments quoted in libpq's errors.
    """
    match = _SCHEME.match(url)
    if match is None:
        return url
    rest = url[match.end() :]
    end = _userinfo_end(rest)
    if end < 0:
        return url
    user, colon, password = rest[:end].partition(":")
    encoded = quote(unquote(user), safe="")
    if colon:
        encoded += ":" + quote(unquote(password), safe="")
    return f"{url[: match.end()]}{encoded}@{rest[end + 1 :]}"


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets ``url`` carries: its user-info (whole and its password), password-like
    query values, each raw and percent-decoded."""
    found: list[str] = []
    match = _SCHEME.match(url)
    rest = url[match.end() :] if match else url
    at = rest.rfind("@") if match else -1
    if at >= 0:
        userinfo = rest[:at]
        user, colon, password = userinfo.partition(":")
        found += [userinfo, unquote(userinfo), unquote(user) + ":" + unquote(password)]
        found += [password, unquote(password)] if colon else [user, unquote(user)]
    query = rest.partition("?")[2]
    for part in re.split(r"[&;]", query):
        name, equals, value = part.partition("=")
        if equals and value and is_secret_name(unquote(name)):
            found += [value, unquote(value), unquote(value.replace("+", " "))]
    return tuple(sorted({secret for secret in found if secret}, key=len, reverse=True))


def redact_exception(error: BaseException, secrets: Sequence[str] = ()) -> None:
    """Mask secrets in the arguments and notes of ``error`` and of its causes and contexts.

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
        notes = getattr(current, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [_redact_value(note, secrets) for note in notes]
        pending += [current.__cause__, current.__context__]
        pending += [value for value in current.args if isinstance(value, BaseException)]


def _redact_value(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, bytes):
        text = value.decode("latin-1")
        masked = redact(text, secrets)
        return value if masked == text else masked.encode("latin-1", errors="replace")
    return value


_REMEMBERED: set[str] = set()
_LOCK = threading.Lock()


def remember_secrets(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` from now on in every ``redact`` and every log record of the filtered
    loggers (third-party HTTP clients log URLs and response headers)."""
    with _LOCK:
        _REMEMBERED.update(secret for secret in secrets if secret)


def _remembered() -> tuple[str, ...]:
    with _LOCK:
        return tuple(_REMEMBERED)


class _RedactingFilter(logging.Filter):
    """Rewrites a log record's message with every credential masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record's message in place; never drop it."""
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging's own report
            return True
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_FILTER = _RedactingFilter()
_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "psycopg",
    "psycopg.pool",
)


def install_log_redaction(names: Sequence[str] = _LOGGERS) -> None:
    """Attach the masking filter to the loggers ``names`` (the HTTP and database clients')."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
