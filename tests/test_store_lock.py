"""The SQLite store while another process holds its write lock, or on a read-only file or
folder:

- a write locked out past the busy timeout is a one-line JSON 503 from the service, not a 500
  with sqlite3's "database is locked" in the log;
- a store at the current schema opens with reads only: the CLI's `stats`, `export` and `recall`
  answer while the lock is held, and on a file nobody may write (a write then fails with one
  line);
- in a folder it may not write (where SQLite cannot create the `-shm` a WAL store needs even to
  be read) it says so in one line, and on a read-only file system it is read as immutable,
  unless a journal beside it may hold writes the file lacks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import httpx2
import pytest
from lock_support import PLUGINS, cli, held, seed, serving, write_lock_held

from semantic_memory.config import Settings
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import sqlite as sqlite_store


def test_a_write_locked_out_past_the_busy_timeout_is_a_json_503(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 1_000)  # not a minute
    db = tmp_path / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=PLUGINS,
                                   maintenance_on_start=False))
    try:
        with serving(engine) as (url, _), write_lock_held(db) as holder:
            answer = httpx2.post(f"{url}/ingest", json={"content": "a note about the cache"},
                                 timeout=60)
            assert held(holder)
        assert answer.status_code == 503, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert "locked" in error and "\n" not in error
        assert engine.count() == 0
    finally:
        engine.close()


@pytest.mark.parametrize("plugins", [PLUGINS, PLUGINS + ",vector"])
def test_cli_reads_while_another_process_holds_the_write_lock(tmp_path: Path,
                                                               plugins: str) -> None:
    db = tmp_path / "memory.db"
    seed(db, ["the deploy script lives in ops/deploy.sh"], plugins=plugins)
    with write_lock_held(db) as holder:
        for args in (["stats"], ["export"], ["recall", "deploy script"]):
            done = cli(tmp_path, *args, plugins=plugins)
            assert held(holder), f"`memory-mcp {' '.join(args)}` waited for the write lock"
            assert done.returncode == 0, done.stderr
            if args[0] != "stats":
                assert "ops/deploy.sh" in done.stdout


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` without write permission for anyone (the CLI runs `as_anyone`, so even a root
    test run meets it)."""
    path.chmod(0o444)
    try:
        yield
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("journal", ["wal", "delete"])  # the store's own, and a copy's
def test_a_read_only_store_opens_for_reading(tmp_path: Path, journal: str) -> None:
    db = tmp_path / "memory.db"
    seed(db, ["the deploy script lives in ops/deploy.sh"])
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute(f"PRAGMA journal_mode = {journal}").fetchone()[0] == journal
    with read_only(db):
        exported = cli(tmp_path, "export", as_anyone=True)
        assert exported.returncode == 0, exported.stderr
        assert json.loads(exported.stdout)["content"] == "the deploy script lives in ops/deploy.sh"
        recalled = cli(tmp_path, "recall", "deploy script", as_anyone=True)
        assert recalled.returncode == 0 and "ops/deploy.sh" in recalled.stdout, recalled.stderr
        refused = cli(tmp_path, "store", "the cache lives in /var/cache/app", as_anyone=True)
        assert refused.returncode != 0
        assert "read-only" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert "Traceback" not in refused.stderr


def test_a_store_in_a_folder_nobody_may_write_says_why(tmp_path: Path) -> None:
    """Readable, but its folder is not writable: SQLite cannot create the -shm, and said the
    file was read-only (on a read-only file system: `unable to open database file`)."""
    folder = tmp_path / "data"
    folder.mkdir()
    db = folder / "memory.db"
    seed(db, ["the deploy script lives in ops/deploy.sh"])
    folder.chmod(0o555)
    try:
        for args in (["stats"], ["recall", "deploy script"]):
            done = cli(tmp_path, "--db", str(db), *args, as_anyone=True)
            assert done.returncode == 1
            assert done.stderr.strip().endswith(
                f"cannot open {db}: the folder {folder} is not writable (permission denied), "
                "and reading the store creates memory.db-shm there; make the folder "
                "writable, or copy the file to one that is"), done.stderr
            assert len(done.stderr.strip().splitlines()) == 1
        folder.chmod(0o755)
        db.chmod(0o000)
        unreadable = cli(tmp_path, "--db", str(db), "stats", as_anyone=True)
        assert unreadable.stderr.strip().endswith(
            f"cannot open {db}: the file is not readable (permission denied)"), unreadable.stderr
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)
