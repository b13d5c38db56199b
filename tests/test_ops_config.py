"""A db path longer than SQLite opens is refused as a setting (one line, exit code 2), not met
as `unable to open database file` when the store opens."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ops_support import run_cli

#: The longest path SQLite 3.x's unix VFS opens, in bytes (config.SQLITE_MAX_PATH).
SQLITE_MAX_PATH = 504


def long_path(tmp: Path, size: int) -> Path:
    """A db path of `size` bytes under `tmp`, its folders made (each name below NAME_MAX)."""
    folder = tmp.resolve()
    while len(str(folder)) + 1 + 200 + 1 + len("memory.db") < size:
        folder = folder / ("d" * 200)
    folder = folder / ("e" * (size - len(str(folder)) - 2 - len("memory.db")))
    folder.mkdir(parents=True)
    path = folder / "memory.db"
    assert len(str(path)) == size
    return path


@pytest.mark.parametrize("how", ["env", "--db"])
def test_a_db_path_sqlite_cannot_open_is_a_bad_setting(tmp_path: Path, how: str) -> None:
    path = long_path(tmp_path, SQLITE_MAX_PATH + 1)
    args = ["--db", str(path), "stats"] if how == "--db" else ["stats"]
    done = run_cli(tmp_path, *args, **({"MEMORY_DB_PATH": str(path)} if how == "env" else {}))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"Error: MEMORY_DB_PATH is {SQLITE_MAX_PATH + 1} bytes long (as an absolute path, "
        f"links resolved); SQLite opens at most {SQLITE_MAX_PATH}: choose a shorter path"]
    assert list(path.parent.iterdir()) == []


def test_the_longest_db_path_sqlite_opens_works(tmp_path: Path) -> None:
    path = long_path(tmp_path, SQLITE_MAX_PATH)
    done = run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh",
                   MEMORY_DB_PATH=str(path))
    assert done.returncode == 0, done.stderr
    assert run_cli(tmp_path, "recall", "deploy script", MEMORY_DB_PATH=str(path)).returncode == 0
    assert path.exists()
