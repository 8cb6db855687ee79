"""The memory inspector (``affect-memory serve --inspector``): one page at ``/`` and its assets.

The page is static, plain HTML, CSS and a script in ``inspector_static/`` with no build step and
nothing fetched from elsewhere, so it works offline; it reads and changes data only through the
JSON API, like any other client. Only the files named in ``ASSETS`` are served (no directory is
exposed), each with a content security policy that lets the page load nothing but its own files
and talk to nothing but this server.
"""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Route

__all__ = ["ASSETS", "PAGE_PATHS", "SECURITY_HEADERS", "STATIC_DIR", "inspector_routes"]

STATIC_DIR = Path(__file__).with_name("inspector_static")
"""The page's files, shipped in the wheel as package data."""

_SCRIPT = "text/javascript; charset=utf-8"

ASSETS = {
    "inspector.css": "text/css; charset=utf-8",
    "dom.js": _SCRIPT,
    "api.js": _SCRIPT,
    "charts.js": _SCRIPT,
    "inspector.js": _SCRIPT,
}
"""The files served under ``/inspector/`` and their media types: the stylesheet, and the
scripts in the order the page loads them (DOM helpers, the API client, the charts, the views)."""

PAGE_PATHS = frozenset({"/", *(f"/inspector/{name}" for name in ASSETS)})
"""Every path the inspector serves. They hold no data, so a server with a bearer token serves
them to a ``GET`` without it: the page has to load before it can ask for the token."""

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
"""Sent with the page and its assets: even a memory that slipped into the page as markup could
neither run a script nor send anything anywhere."""


async def _page(request: Request) -> Response:
    """The inspector page."""
    return FileResponse(
        STATIC_DIR / "index.html",
        media_type="text/html; charset=utf-8",
        headers=SECURITY_HEADERS,
    )


async def _asset(request: Request) -> Response:
    """One of the page's ``ASSETS``; 404 for any other name."""
    name = request.path_params["name"]
    if name not in ASSETS:
        raise HTTPException(404)
    return FileResponse(STATIC_DIR / name, media_type=ASSETS[name], headers=SECURITY_HEADERS)


def inspector_routes() -> list[BaseRoute]:
    """``GET /`` (the page) and ``GET /inspector/{name}`` (its scripts and stylesheet)."""
    return [
        Route("/", _page, methods=["GET"], name="inspector"),
        Route("/inspector/{name}", _asset, methods=["GET"], name="inspector-asset"),
    ]
