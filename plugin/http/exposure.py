"""Where ``affect-memory serve`` listens by default, and the token it requires beyond loopback.

No web framework behind it, so the command line can refuse a bad setting before the ``http``
extra is even imported; the rules themselves are ``affect_memory.exposure``'s.
"""

from __future__ import annotations

from affect_memory.exposure import check_exposure

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "TOKEN_ENV", "check_serve_settings"]

DEFAULT_HOST = "127.0.0.1"
"""Where the server listens unless told otherwise: this machine only."""

DEFAULT_PORT = 8080
"""The server's default port."""

TOKEN_ENV = "AFFECT_MEMORY_TOKEN"
"""The environment variable the bearer token is read from when ``--token`` is not given."""


def check_serve_settings(host: str, port: int, token: str | None) -> str | None:
    """The token ``affect-memory serve`` requires (None: none), after refusing what would
    serve unsafely (``affect_memory.exposure.check_exposure``)."""
    return check_exposure(host, port, token, token_env=TOKEN_ENV)
