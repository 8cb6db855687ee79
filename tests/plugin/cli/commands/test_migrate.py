"""``affect-memory migrate`` from the shell: bad flags are refused in one line naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from affect_memory.cli.main import main


@pytest.mark.parametrize("batch", ["0", "5001"])
def test_a_bad_batch_is_refused_naming_the_batch_flag_not_page(
    batch: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--data-dir", str(tmp_path), "--batch", batch]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        f"affect-memory migrate: --batch must be a whole number of records in [1, 5000], "
        f"got {batch}"
    )
    assert list(tmp_path.iterdir()) == []


def test_migrate_offers_no_index_flag_since_it_never_opens_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "--data-dir", str(tmp_path), "--index", str(tmp_path / "i.sqlite3")])
    assert exited.value.code == 2 and "unrecognized arguments: --index" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
