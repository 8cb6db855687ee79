"""How users map to Chroma collections: one collection per user under a store's prefix.

A user's memories live in the collection ``{prefix}.{slug}.{digest}``:

* ``prefix`` is the store's namespace (``--collection NAME``, default ``memories``);
* ``slug`` is a readable hint: the user id with accents folded to ASCII, lower-cased, every
  run of characters outside ``[a-z0-9]`` turned into one ``-``, cut to 40 characters (``u``
  when nothing is left);
* ``digest`` is the first 32 hex digits (128 bits) of the SHA-256 of the user id's UTF-8.

So any user id (unicode, 512 characters, punctuation) gives a valid Chroma name (3-512 of
``[a-zA-Z0-9._-]``, alphanumeric at both ends, no ``..``, never an IPv4 address), and two user
ids share a name only if their digests collide. That is not left to chance: each collection
records its user id and prefix in its metadata at creation, and opening one whose record
differs is refused, so two users can never share a collection.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from affect_memory.errors import IsolationError, StoreError
from affect_memory.kernel.errors import shown

__all__ = [
    "DEFAULT_COLLECTION",
    "DIGEST_CHARS",
    "LAYOUT_KEY",
    "LAYOUT_VERSION",
    "MAX_PREFIX_CHARS",
    "MIGRATED_KEY",
    "PREFIX_KEY",
    "SLUG_CHARS",
    "USER_KEY",
    "VERIFIED",
    "check_prefix",
    "check_user_collection",
    "collection_metadata",
    "is_user_collection",
    "user_collection_name",
]

DEFAULT_COLLECTION = "memories"
"""Prefix of the users' collections when none is named."""

LAYOUT_KEY = "affect_memory_layout"
"""Collection metadata key naming the layout a collection belongs to."""

LAYOUT_VERSION = "user-1"
"""The per-user layout: one collection per user, named by ``user_collection_name``."""

USER_KEY = "affect_memory_user"
"""Collection metadata key holding the exact user id whose memories the collection holds."""

PREFIX_KEY = "affect_memory_prefix"
"""Collection metadata key holding the prefix the collection was created under."""

MIGRATED_KEY = "affect_memory_migrated"
"""Old-collection metadata key set once every user's rows were verified in their collection."""

VERIFIED = "verified"
"""The value ``MIGRATED_KEY`` takes once every user's rows were verified."""

MAX_PREFIX_CHARS = 128
"""Longest prefix; with the slug and digest a name stays far below Chroma's 512."""

SLUG_CHARS = 40
"""Longest readable part of a user's collection name."""

DIGEST_CHARS = 32
"""Hex digits of the user id's SHA-256 in a collection name (128 bits)."""


_CHROMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]$")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_TAIL = re.compile(rf"\.[a-z0-9-]{{1,{SLUG_CHARS}}}\.[0-9a-f]{{{DIGEST_CHARS}}}")


def check_prefix(prefix: object) -> str:
    """A store prefix: 3-128 characters a Chroma name allows, no ``..``, not an IPv4 address."""
    problem = None
    if not isinstance(prefix, str) or not 3 <= len(prefix) <= MAX_PREFIX_CHARS:
        problem = f"3-{MAX_PREFIX_CHARS} characters"
    elif not _CHROMA_NAME.match(prefix):
        problem = "characters from [A-Za-z0-9._-], starting and ending with a letter or digit"
    elif ".." in prefix:
        problem = "no two consecutive dots"
    else:
        try:
            ipaddress.IPv4Address(prefix)
            problem = "not an IPv4 address"
        except ValueError:
            pass
    if problem is not None:
        raise StoreError(
            f"collection name (the prefix of every user's collection) must be {problem}, "
            f"got {shown(prefix)}"
        )
    assert isinstance(prefix, str)
    return prefix


def _slug(user_id: str) -> str:
    folded = unicodedata.normalize("NFKD", user_id).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_SLUG.sub("-", folded.lower()).strip("-")[:SLUG_CHARS].strip("-")
    return slug or "u"


def user_collection_name(prefix: str, user_id: str) -> str:
    """The Chroma collection holding ``user_id``'s memories under ``prefix``."""
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:DIGEST_CHARS]
    return f"{prefix}.{_slug(user_id)}.{digest}"


def is_user_collection(prefix: str, name: str) -> bool:
    """Whether ``name`` has the shape of a user collection directly under ``prefix``."""
    return name.startswith(prefix) and _TAIL.fullmatch(name, len(prefix)) is not None


def collection_metadata(prefix: str, user_id: str, embedder: str | None) -> dict[str, str]:
    """The metadata a user's collection is created with: layout, prefix, user and embedder
    (None when unknown, as for a migrated store that never recorded one)."""
    metadata = {LAYOUT_KEY: LAYOUT_VERSION, PREFIX_KEY: prefix, USER_KEY: user_id}
    if embedder is not None:
        metadata["embedder"] = embedder
    return metadata


def check_user_collection(
    name: str, metadata: Mapping[str, Any] | None, prefix: str, user_id: str, where: str
) -> None:
    """Refuse a collection that is not ``user_id``'s under ``prefix`` by its own record."""
    meta = metadata or {}
    owner, layout, recorded_prefix = meta.get(USER_KEY), meta.get(LAYOUT_KEY), meta.get(PREFIX_KEY)
    if layout != LAYOUT_VERSION or owner != user_id or recorded_prefix != prefix:
        raise IsolationError(
            f"collection {name!r} at {where} should hold the memories of user {shown(user_id)} "
            f"under prefix {prefix!r}, but its metadata records user {shown(owner)}, prefix "
            f"{shown(recorded_prefix)} and layout {shown(layout)}; it is not used (two users "
            "never share a collection) - rename or delete it"
        )
