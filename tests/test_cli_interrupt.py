"""Ctrl-C in the CLI: one line on stderr saying what was and was not done, exit code 130, as
`import` answered it; click's "Aborted!" and exit code 1 told a script nothing, and told a
person nothing had happened after a purge had deleted for good.

Each child starts with SIGINT at its default (a child of a background job ignores it), and is
interrupted where it waits on something the test holds (a lock, a reader, a pipe), not after a
guessed delay."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from test_service_support import memory_mcp_command

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child")

HANG_GUARD_S = 120  # only so a regression fails instead of hanging the suite


def _env(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    return {**env, "MEMORY_DB_PATH": str(db), "HOME": str(db.parent / "home"),
            "MEMORY_DEVICE": "cpu"}


def _run(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], input=stdin, capture_output=True,
                          text=True, env=_env(db), timeout=HANG_GUARD_S)


def _start(db: Path, *args: str, **popen: object) -> subprocess.Popen[str]:
    return subprocess.Popen([*memory_mcp_command(), *args], env=_env(db), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            **popen)  # type: ignore[call-overload]


def _wait_for(check: Callable[[], bool], child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not check():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _interrupt(child: subprocess.Popen[str]) -> tuple[str, str]:
    child.send_signal(signal.SIGINT)
    try:
        return child.communicate(timeout=HANG_GUARD_S)
    finally:
        child.kill()


def _count(db: Path, where: str = "1") -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT count(*) FROM memories WHERE {where}").fetchone()[0]


def _half_forgotten(db: Path, count: int = 3000, word: str = "note") -> None:
    lines = "".join(json.dumps({"uid": f"u{i:08d}", "content": f"{word} {i} about caches and "
                                f"deploys {i * 7}", "forgotten": i % 2 == 0}) + "\n"
                    for i in range(count))
    assert _run(db, "import", "-", stdin=lines).returncode == 0


def _reader(db: Path) -> sqlite3.Connection:
    """A reader on the store's current state: the WAL cut after a purge waits for it (5 s)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("SELECT count(*) FROM memories").fetchone()
    return conn


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Aborted" not in err and "Traceback" not in err, err
    return lines[0]


def test_purge_interrupted_after_its_delete_says_so_and_the_next_purge_finishes(
        tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db)
    reader = _reader(db)
    try:
        child = _start(db, "purge")
        _wait_for(lambda: _count(db, "deleted = 1") == 0, child)  # the delete is committed
        out, err = _interrupt(child)
    finally:
        reader.close()
    assert child.returncode == 130 and out == ""
    assert _one_line(err).startswith("interrupted: the purge was committed: 1500 forgotten "
                                     "memories are gone for good; the index merge, VACUUM and "
                                     "WAL cut after it did not finish: `memory-mcp purge` again")
    assert _count(db) == 1500
    # Nothing is left to delete, and the VACUUM runs all the same; then it is done.
    again = _run(db, "purge")
    assert json.loads(again.stdout) == {"soft_deleted": 0, "expired_artifacts": 0,
                                        "expired_injections": 0, "vacuumed": True}
    assert json.loads(_run(db, "purge").stdout)["vacuumed"] is False


def test_purge_interrupted_while_waiting_for_the_lock_purged_nothing(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process's write: the purge waits for it
    try:
        child = _start(db, "purge")
        _wait_for(lambda: Path(f"{db}.purge-unfinished").exists(), child)
        out, err = _interrupt(child)
    finally:
        writer.rollback()
        writer.close()
    assert child.returncode == 130 and out == ""
    assert _one_line(err) == ("interrupted: nothing was purged (1500 forgotten memories wait: "
                              "`memory-mcp purge` again)")
    assert _count(db, "deleted = 1") == 1500


def test_purge_matching_interrupted_after_its_delete_says_so(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db, word="alpha")
    assert _run(db, "store", "the zebra passphrase is kept in the vault").returncode == 0
    reader = _reader(db)
    try:
        child = _start(db, "purge", "--matching", "zebra", "--yes")
        _wait_for(lambda: _count(db, "content LIKE '%zebra%'") == 0, child)
        out, err = _interrupt(child)
    finally:
        reader.close()
    assert child.returncode == 130 and out == ""
    line = _one_line(err)
    assert line.startswith("interrupted: 0 spooled memories holding the text were deleted; 1 "
                           "memories, 0 earlier versions and 0 injection prompts holding it are "
                           "gone for good"), line
    assert "zebra" not in line  # a text purged for good is not printed again
    again = json.loads(_run(db, "purge", "--matching", "zebra", "--yes").stdout)
    assert again["memories"] == 0 and again["vacuumed"] is True


def test_a_command_without_its_own_line_says_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert _run(db, "store", "first").returncode == 0
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        child = _start(db, "store", "second")
        time.sleep(1)  # it waits up to 60 s for the lock: anywhere in that wait will do
        out, err = _interrupt(child)
    finally:
        writer.rollback()
        writer.close()
    assert child.returncode == 130 and out == ""
    assert _one_line(err).startswith("interrupted")
    assert _count(db) == 1


def _locked_out(path: Path) -> sqlite3.Connection:
    """A connection that keeps every other one from reading `path` until it closes."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("SELECT count(*) FROM memories").fetchone()
    return conn


def _temp_copies(folder: Path) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


def test_backup_interrupted_leaves_the_earlier_backup_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db, count=200)
    target = tmp_path / "out" / "backup.db"
    target.parent.mkdir()
    assert _run(db, "backup", str(target)).returncode == 0
    before = target.read_bytes()
    assert _run(db, "store", "one more").returncode == 0
    lock = _locked_out(db)
    try:
        child = _start(db, "backup", str(target))
        _wait_for(lambda: bool(_temp_copies(target.parent)), child)  # copying: it waits
        child.send_signal(signal.SIGINT)
    finally:
        lock.close()  # the copy goes on, and the interrupt ends it before the rename
    out, err = child.communicate(timeout=HANG_GUARD_S)
    assert child.returncode == 130 and out == ""
    assert _one_line(err) == f"interrupted: nothing was written: {target} is as it was"
    assert target.read_bytes() == before and _temp_copies(target.parent) == []


def test_restore_interrupted_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db, count=200)
    backup = tmp_path / "backup.db"
    assert _run(db, "backup", str(backup)).returncode == 0
    assert _run(db, "store", "written after the backup").returncode == 0
    inode = db.stat().st_ino
    lock = _locked_out(backup)
    try:
        child = _start(db, "restore", str(backup))
        _wait_for(lambda: bool(_temp_copies(tmp_path)), child)
        child.send_signal(signal.SIGINT)
    finally:
        lock.close()
    out, err = child.communicate(timeout=HANG_GUARD_S)
    assert child.returncode == 130 and out == ""
    assert _one_line(err) == f"interrupted: nothing was restored: the store {db} is as it was"
    assert db.stat().st_ino == inode and _count(db, "content = 'written after the backup'") == 1
    assert _temp_copies(tmp_path) == [] and not Path(f"{db}.before-restore").exists()


def test_export_to_a_reader_that_waits_says_it_is_incomplete(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    _half_forgotten(db)
    child = _start(db, "export")
    assert child.stdout is not None
    assert json.loads(child.stdout.readline())["uid"]  # writing; then the pipe fills up
    out, err = _interrupt(child)
    assert child.returncode == 130 and out.count("\n") < 1500
    assert _one_line(err) == "interrupted: the export on standard output is incomplete"


def test_import_interrupted_right_after_a_batch_committed_counts_it(tmp_path: Path) -> None:
    """The batch is committed, its results not yet counted (here: its rejected lines are being
    reported to a stderr nobody reads yet; else a Ctrl-C during its COMMIT): the summary and
    `interrupted_at_line` were a batch behind what the store held."""
    db = tmp_path / "memory.db"
    secret = json.dumps({"content": "ghp_" + "a" * 36}) + "\n"  # refused: a secret alone
    lines = secret * 1500 + "".join(json.dumps({"content": f"fact number {i}"}) + "\n"
                                    for i in range(500))
    child = _start(db, "import", "-", stdin=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.write(lines)  # one batch of 2,000 lines; the import waits for more input
    child.stdin.flush()
    _wait_for(lambda: db.exists() and _stored_or_zero(db) == 500, child)
    out, err = _interrupt(child)
    assert child.returncode == 130, err
    assert json.loads(out) == {"new": 500, "duplicate": 0, "rejected": 1500, "bad": 0,
                               "interrupted_at_line": 2001}
    assert err.strip().splitlines()[-1].startswith("interrupted: 500 new memories are stored")


def _stored_or_zero(db: Path) -> int:
    try:
        return _count(db)
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0


def test_ctrl_c_while_the_cli_loads_is_one_line(tmp_path: Path) -> None:
    """Python reports each module as it is imported (PYTHONPROFILEIMPORTTIME): the Ctrl-C
    comes while `from .cli import main` runs, before any command (a traceback through
    entry.py, cli.py, pipeline.py …)."""
    db = tmp_path / "memory.db"
    env = {**_env(db), "PYTHONPROFILEIMPORTTIME": "1"}
    child = subprocess.Popen([*memory_mcp_command(), "list"], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stderr is not None
    seen = []
    while "| semantic_memory." not in (line := child.stderr.readline()) or \
            "semantic_memory.entry" in line:
        assert line, seen
        seen.append(line)
    out, err = _interrupt(child)
    said = [line for line in err.splitlines() if not line.startswith("import time:")]
    assert child.returncode == 130, err
    assert len(said) == 1 and said[0].startswith("interrupted"), said
