"""Where an index lives: by default beside the Chroma store it serves, or where ``index=`` says;
anything that names no index is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from affect_memory.errors import StoreError
from affect_memory.memory.chroma.location import parse_location
from affect_memory.memory.index.storage.opening import DATA_DIR_ENV, INDEX_FILE, resolve_index


def test_the_default_index_follows_the_chroma_location(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "home"))
    embedded = resolve_index(None, parse_location(str(tmp_path / "chroma")))
    assert (embedded.kind, embedded.path) == ("file", tmp_path / "chroma" / INDEX_FILE)
    assert resolve_index(None, parse_location(":memory:")).kind == "memory"
    served = resolve_index(None, parse_location("http://127.0.0.1:8123"))
    assert served.path == tmp_path / "home" / "memory-index-127.0.0.1-8123.sqlite3"


def test_urls_and_paths_name_their_backend(tmp_path: Path) -> None:
    store = parse_location(str(tmp_path / "chroma"))
    pg = resolve_index("postgresql://u:secret@db:5432/app?schema=fleet&sslmode=disable", store)
    assert (pg.kind, pg.schema) == ("postgresql", "fleet")
    assert pg.url == "postgresql://u:secret@db:5432/app?sslmode=disable"
    assert "secret" not in pg.describe()
    assert resolve_index("postgres://db/app", store).schema == "affect_memory"
    assert resolve_index("sqlite:///rel/index.db", store).path == Path("rel/index.db")
    assert resolve_index("sqlite:////abs/index.db", store).path == Path("/abs/index.db")
    assert resolve_index(tmp_path / "x.sqlite3", store).path == tmp_path / "x.sqlite3"
    assert resolve_index(":memory:", store).kind == "memory"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "index must be a PostgreSQL URL"),
        ("mysql://db/app", "index must be postgresql://"),
        ("sqlite://relative.db", "sqlite:///relative/path"),
        (".", "is a directory"),
    ],
)
def test_what_names_no_index_is_refused(spec: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=message) as raised:
        resolve_index(spec, parse_location(str(tmp_path)))
    assert "\n" not in str(raised.value)


def test_an_unreachable_postgresql_index_is_one_line_without_the_password(tmp_path: Path) -> None:
    from affect_memory.errors import StoreUnavailableError
    from affect_memory.memory.index.storage.opening import open_backend

    target = resolve_index(
        "postgresql://me:hunter2@127.0.0.1:1/app?connect_timeout=2",
        parse_location(str(tmp_path)),
    )
    with pytest.raises(StoreUnavailableError, match="cannot connect to the memory index") as raised:
        open_backend(target, lock_timeout=2.0)
    assert "hunter2" not in str(raised.value) and "\n" not in str(raised.value)
