"""One parser for "a SQLite path or a PostgreSQL URL": each caller declares its own options, and
what it does not declare stays libpq's (PostgreSQL) or is refused (SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from affect_memory.db.location import parse_database_url, redacted, url_scheme
from affect_memory.kernel.errors import InvalidInputError

STATE_LIKE = {"schema": str, "lock_timeout": float, "pool_size": int}
INDEX_LIKE = {"schema": str}


def test_the_callers_options_leave_the_url_and_the_rest_stay_libpqs() -> None:
    url = "postgresql://me:pw@db:5432/app?schema=s1&pool_size=3&sslmode=disable"
    wide = parse_database_url(
        url, source="--state", sqlite_options={}, postgres_options=STATE_LIKE
    )
    assert wide.options == {"schema": "s1", "pool_size": 3}
    assert wide.target == "postgresql://me:pw@db:5432/app?sslmode=disable"
    narrow = parse_database_url(
        "postgres://db/app?schema=s1&connect_timeout=2",
        source="index",
        sqlite_options={},
        postgres_options=INDEX_LIKE,
    )
    assert narrow.options == {"schema": "s1"}
    assert narrow.target == "postgresql://db/app?connect_timeout=2"


def test_a_sqlite_url_or_a_path_names_a_file() -> None:
    parsed = parse_database_url(
        "sqlite:////abs/x.db?lock_timeout=2",
        source="--state",
        sqlite_options={"lock_timeout": float},
        postgres_options={},
    )
    assert (parsed.kind, Path(parsed.target), parsed.options) == (
        "sqlite",
        Path("/abs/x.db"),
        {"lock_timeout": 2.0},
    )
    bare = parse_database_url("rel/x.db", source="s", sqlite_options={}, postgres_options={})
    assert (bare.kind, bare.target, dict(bare.options)) == ("sqlite", "rel/x.db", {})


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite:///x.db?mode=ro", r"^index has the unknown option 'mode'; known: none$"),
        ("postgresql://db/app?schema=a&schema=b", "^index gives schema twice$"),
        ("mysql://db/app", "^index has the unknown scheme 'mysql'"),
        ("", "^index is empty"),
    ],
)
def test_refusals_are_led_by_the_source(url: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_database_url(url, source="index", sqlite_options={}, postgres_options=INDEX_LIKE)


def test_a_password_is_never_shown() -> None:
    url = "postgresql://me:hunter2@db/app?schema=s&password=hunter2"
    parsed = parse_database_url(url, source="s", sqlite_options={}, postgres_options=INDEX_LIKE)
    assert "hunter2" not in repr(parsed) and "hunter2" not in parsed.describe()
    assert "hunter2" not in redacted(url)
    with pytest.raises(InvalidInputError) as refused:
        parse_database_url(
            "postgresql://me:hunter2@db/app?bogus=1", source="s", sqlite_options={},
            postgres_options=INDEX_LIKE,
        )  # fmt: skip
    assert "hunter2" not in str(refused.value)


def test_the_scheme_is_read_without_parsing() -> None:
    assert url_scheme("PostgreSQL://db") == "postgresql"
    assert url_scheme("sqlite:x") == "sqlite"
    assert url_scheme("/a/b.db") == url_scheme("rel/x://y") == ""
