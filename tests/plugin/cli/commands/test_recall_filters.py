"""``affect-memory recall --where JSON``: only the memories meeting the filter, ``--top`` of
them; a bad filter exits 2 with one line naming --where, the field and the value, before any
store is opened or created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from affect_memory.cli import main
from affect_memory.models.embeddings import Embedder
from tests.plugin.memory.test_filters import NOW, QUERY, corpus


@pytest.fixture
def data(tmp_path: Path, embedder: Embedder) -> str:
    """A data directory holding Ann's corpus (agent x a small minority)."""
    lines = tmp_path / "ann.jsonl"
    lines.write_text("".join(json.dumps(record) + "\n" for record in corpus()), encoding="utf-8")
    home = str(tmp_path / "home")
    assert main(["ingest", str(lines), "--data-dir", home, "--no-progress"]) == 0
    return home


def recalled(
    capsys: pytest.CaptureFixture[str], data: str, *extra: str
) -> tuple[int, list[str], str]:
    capsys.readouterr()
    code = main(
        ["recall", QUERY, "--user-id", "ann", "--now", NOW, "--json", "--data-dir", data, *extra]
    )
    captured = capsys.readouterr()
    found = [hit["id"] for hit in json.loads(captured.out)["results"]] if code == 0 else []
    return code, found, captured.err


def test_where_keeps_top_of_the_matching_memories(
    data: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, unfiltered, _ = recalled(capsys, data, "--top", "10")
    assert code == 0 and not any(ident.startswith("x") for ident in unfiltered)
    code, found, _ = recalled(capsys, data, "--top", "3", "--where", '{"agent_id": "x"}')
    assert code == 0 and len(found) == 3 and all(ident.startswith("x") for ident in found)
    where = '{"agent_id": {"$in": ["x"]}, "extra.project": "work"}'
    code, found, _ = recalled(capsys, data, "--top", "10", "--where", where)
    assert code == 0 and sorted(found) == ["x0", "x1"]


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("{agent_id: x}", "--where must be a JSON object like"),
        ('["agent_id"]', "--where must be a mapping"),
        ('{"agent": "x"}', "--where: unknown field 'agent' = 'x'"),
        ('{"agent_id": {"$gt": 1}}', "--where: agent_id has unknown operator '$gt'"),
        ('{"extra.project": [1, 2]}', "--where: extra.project must be compared with a str"),
    ],
)
def test_a_bad_where_exits_2_with_one_line_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, message: str
) -> None:
    home = tmp_path / "never"
    code, _, err = recalled(capsys, str(home), "--where", where)
    assert code == 2
    assert err.count("\n") == 1 and message in err
    assert not home.exists()
