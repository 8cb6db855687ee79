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
