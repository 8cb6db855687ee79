"""Who may serve where, and who may ask: the rules both HTTP servers (the API and MCP) share.

Loopback by default; beyond this machine only with a bearer token, which travels in a header,
is compared in constant time and never appears in an error. Pure checks with no web framework
behind them, so a command line can refuse a bad setting before any server extra is imported.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable

from affect_memory.kernel.errors import InvalidInputError, shown

__all__ = ["bearer_authorised", "check_exposure", "http_address", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only: ``localhost``, 127.0.0.0/8 or ``::1``."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def http_address(host: str, port: int) -> str:
    """``http://HOST:PORT`` for a bound address, an IPv6 host in brackets."""
    shown_host = f"[{host}]" if ":" in host else host
    return f"http://{shown_host}:{port}"


def check_exposure(host: str, port: int, token: str | None, *, token_env: str) -> str | None:
    """The token to require (None: none), after refusing what would serve unsafely: a host
    that is not loopback without a token, a token that cannot travel in a header, a port
    outside 0-65535. Errors name ``--token`` and ``$token_env``, never the token."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidInputError(f"--port must be between 0 and 65535, got {shown(port)}")
    if token is not None:
        if not token or not all("!" <= char <= "~" for char in token):
            raise InvalidInputError(
                f"the bearer token (--token or ${token_env}) must be non-empty visible ASCII "
                "without spaces (not shown)"
            )
        return token
    if not is_loopback(host):
        raise InvalidInputError(
            f"--host {shown(host)} is not loopback: serving beyond this machine needs a bearer "
            f"token (--token or ${token_env})"
        )
    return None


def bearer_authorised(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """Whether an ASGI request's ``headers`` carry exactly one ``Authorization: Bearer
    <token>``; the scheme is case-insensitive (RFC 9110), the token compared in constant time
    so the answer's timing tells nothing of it."""
    given = [value for name, value in headers if name == b"authorization"]
    if len(given) != 1:
        return False
    scheme, _, credentials = given[0].partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials, token)
