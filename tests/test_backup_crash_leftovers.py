"""A killed `memory-mcp backup FILE` left `.FILE.XXXXXXXX.tmp` (and its `-journal`) beside FILE:
a hidden full copy of the store, purged texts included, under a new random name each time,
never removed. Now the copy is named for its process (`.FILE.<pid>.tmp`) and the next backup
(or restore) removes the copies of processes that are gone, and those untouched for an hour.

The real CLI is killed at the exact moment: a `sitecustomize` on its PYTHONPATH SIGKILLs it as
it renames its checked copy over FILE.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from test_ops_support import run_cli

from semantic_memory.backup import backup, restore
from semantic_memory.config import Settings

SECRET = "The billing mascot is named Zorblax"
#: Older than LEFTOVER_STALE_S (an hour): a copy no live backup is writing.
UNTOUCHED_S = 2 * 3600
#: Kills the process when it renames its copy of the store into place.
DIES_BEFORE_RENAME = """
import os, signal
_replace = os.replace
def replace(src, dst, *args, **kwargs):
    if os.path.basename(str(src)).startswith(".bk.db."):
        os.kill(os.getpid(), signal.SIGKILL)
    return _replace(src, dst, *args, **kwargs)
os.replace = replace
"""


def gone_pid() -> int:
    """The pid of a process that ran and was reaped: no process has it now."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def hidden(folder: Path) -> list[str]:
    return sorted(f.name for f in folder.iterdir() if f.name.startswith(".bk.db."))


def aged(path: Path, seconds: float) -> Path:
    """A file `path` last written `seconds` ago."""
    path.write_bytes(b"")
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


def test_the_copy_a_killed_backup_left_is_removed_by_the_next(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "store", SECRET).returncode == 0
    killer = tmp_path / "killer"
    killer.mkdir()
    (killer / "sitecustomize.py").write_text(DIES_BEFORE_RENAME)
    target = tmp_path / "bk.db"
    died = run_cli(tmp_path, "backup", str(target), PYTHONPATH=str(killer))
    assert died.returncode == -signal.SIGKILL, died.stderr
    (left,) = hidden(tmp_path)
    assert left.startswith(".bk.db.") and left.endswith(".tmp")
    pid = left[len(".bk.db."):-len(".tmp")]
    assert pid.isdigit(), left  # its process named in it: the next backup knows it is dead
    assert SECRET.encode() in (tmp_path / left).read_bytes()  # every memory, hidden
    assert not target.exists()

    # An earlier release's random names: one untouched for over an hour (dead), one fresh (a
    # backup of that release may be at work); and a live backup's copy (this process).
    old = aged(tmp_path / ".bk.db.x371m98m.tmp", UNTOUCHED_S)
    old_journal = aged(tmp_path / ".bk.db.x371m98m.tmp-journal", UNTOUCHED_S)
    fresh = tmp_path / ".bk.db.fdrx0ble.tmp"
    live = tmp_path / f".bk.db.{os.getpid()}.tmp"
    for file in (fresh, live):
        file.write_bytes(b"")
    again = run_cli(tmp_path, "backup", str(target))
    assert again.returncode == 0, again.stderr
    assert target.is_file()
    assert again.stderr.startswith("removed 2 unfinished copy(ies) of the store that a killed "
                                   f"backup or restore left in {tmp_path}: "), again.stderr
    assert left in again.stderr and ".bk.db.x371m98m.tmp" in again.stderr
    assert hidden(tmp_path) == sorted([fresh.name, live.name])
    assert not old.exists() and not old_journal.exists()


def test_a_backup_and_a_restore_say_which_copies_they_removed(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "store", SECRET).returncode == 0
    db, target = tmp_path / "memory.db", tmp_path / "bk.db"
    dead = tmp_path / f".bk.db.{gone_pid()}.tmp"
    dead.write_bytes(b"every memory")
    Path(f"{dead}-journal").write_bytes(b"")
    copy = backup(db, target)
    assert copy.cleared == (dead,) and not Path(f"{dead}-journal").exists()
    assert copy.cleared_note == (f"removed 1 unfinished copy(ies) of the store that a killed "
                                 f"backup or restore left in {tmp_path}: {dead.name}")
    assert backup(db, target).cleared == () and backup(db, target).cleared_note is None

    beside_db = tmp_path / f".memory.db.{gone_pid()}.tmp"
    beside_db.write_bytes(b"every memory")
    restored, _ = restore(Settings(db_path=str(db), device="cpu"), db, target)
    assert restored.cleared == (beside_db,) and not beside_db.exists()
