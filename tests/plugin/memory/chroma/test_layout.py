"""The per-user collection names: valid for Chroma, one per user, and checked on open."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from affect_memory.errors import IsolationError, StoreError
from affect_memory.memory.chroma.layout import (
    DIGEST_CHARS,
    LAYOUT_KEY,
    LAYOUT_VERSION,
    PREFIX_KEY,
    USER_KEY,
    check_prefix,
    check_user_collection,
    collection_metadata,
    is_user_collection,
    user_collection_name,
)


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """An in-process Chroma, to hold names against Chroma's own rules."""
    yield chromadb.EphemeralClient(settings=Settings(anonymized_telemetry=False))


def _accepted(client: Any, name: str) -> bool:
    try:
        client.create_collection(name, embedding_function=None)
    except Exception:
        return False
    client.delete_collection(name)
    return True


def test_chromas_name_rules_as_measured(client: Any) -> None:
    """What chromadb 1.5.9 refuses, which the naming scheme must stay clear of."""
    assert (
        _accepted(client, "abc") and _accepted(client, "a" * 512) and _accepted(client, "a-b_c.d")
    )
    for refused in ("ab", "a" * 513, "_ab", "ab-", "a b", "a..b", "1.2.3.4", "192.168.0.1"):
        assert not _accepted(client, refused), refused
    assert _accepted(client, "1.2.3") and _accepted(client, "256.1.1.1")  # not IPv4 addresses


HOSTILE = [
    "ann", "Ann", "ann ", " ann", "..", ".", "-", "_", "1.2.3.4", "$and", "#document",
    "a/b\\c:d", "ünï cödé", "用户", "😀", "x" * 512, "\t", "memories", "a.b.c",
]  # fmt: skip


@pytest.mark.parametrize("user", HOSTILE)
def test_any_user_id_gives_a_name_chroma_accepts(client: Any, user: str) -> None:
    name = user_collection_name("memories", user)
    assert _accepted(client, name) and is_user_collection("memories", name)
    assert name == user_collection_name("memories", user)  # deterministic
    assert name.endswith(name[-DIGEST_CHARS:]) and len(name) <= 128 + 1 + 40 + 1 + DIGEST_CHARS


def test_hostile_ids_get_distinct_readable_names() -> None:
    names = [user_collection_name("memories", user) for user in HOSTILE]
    assert len(set(names)) == len(HOSTILE)
    assert names[0].startswith("memories.ann.") and names[1].startswith("memories.ann.")
    assert user_collection_name("memories", "ünï cödé").startswith("memories.uni-code.")
    assert user_collection_name("memories", "用户").startswith("memories.u.")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=1, max_size=512), st.text(min_size=1, max_size=512))
def test_distinct_users_never_share_a_name(first: str, second: str) -> None:
    if first == second:
        return
    try:
        first.encode("utf-8")
        second.encode("utf-8")
    except UnicodeEncodeError:  # user ids with lone surrogates are refused before naming
        return
    assert user_collection_name("p-x", first) != user_collection_name("p-x", second)


def test_a_user_collection_belongs_to_exactly_one_prefix() -> None:
    name = user_collection_name("memories", "alice")
    assert is_user_collection("memories", name)
    assert not is_user_collection("memorie", name) and not is_user_collection(
        "memories.alice", name
    )
    nested = user_collection_name("memories.alice", "bob")
    assert not is_user_collection("memories", nested) and is_user_collection(
        "memories.alice", nested
    )
    assert not is_user_collection("memories", "memories") and not is_user_collection(
        "memories", "x"
    )


@pytest.mark.parametrize("prefix", ["ab", "a b", "a..b", "1.2.3.4", "-ab", "ab.", "x" * 129, 3])
def test_bad_prefixes_are_refused_naming_the_rule(prefix: object) -> None:
    with pytest.raises(StoreError, match=r"collection name .* must be"):
        check_prefix(prefix)


def test_a_collection_must_record_its_own_user_and_prefix() -> None:
    good = collection_metadata("memories", "alice", "model")
    assert good == {
        LAYOUT_KEY: LAYOUT_VERSION,
        PREFIX_KEY: "memories",
        USER_KEY: "alice",
        "embedder": "model",
    }
    check_user_collection("n", good, "memories", "alice", "here")
    for forged in (
        {**good, USER_KEY: "mallory"},
        {**good, PREFIX_KEY: "other"},
        {**good, LAYOUT_KEY: "something-else"},
        {"embedder": "model"},
        None,
    ):
        with pytest.raises(IsolationError, match="two users never share a collection"):
            check_user_collection("n", forged, "memories", "alice", "here")


def test_names_are_short_enough_for_any_prefix() -> None:
    longest = user_collection_name("p" * 128, "x" * 512 + uuid.uuid4().hex)
    assert len(longest) <= 512
