"""`memory-mcp backup` and `restore`, and `export -o` refusing the store's own files.

A QA pass lost data three ways: `cp backup.db memory.db` under a running service (the old WAL
replayed over the restored pages, writes still acknowledged), the same copy with the service
stopped after a kill -9 left `memory.db-wal` beside it (SQLite replayed the newer WAL onto the
older file), and `export -o memory.db` (JSON lines renamed over the database). `backup` copies
a consistent snapshot while the service writes; `restore` refuses while anything holds the
store, keeps the current db as `memory.db.before-restore` and removes the stale `-wal`/`-shm`.
Everything here runs the real CLI and the real service.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from test_service_support import Service, Writer, start_service

PLUGINS = "bm25_porter,bm25_trigram"


def cli(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), MEMORY_DEVICE="cpu", MEMORY_PLUGINS=PLUGINS,
                       **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=environment,
                          capture_output=True, text=True, timeout=120)


def text(i: int) -> str:
    return f"Memory number {i}: the zebracorn deployment uses port {10000 + i} for shard w{i}x"


def write(service: Service, numbers: range) -> None:
    with service.client() as http:
        answer = http.post("/ingest", json={"items": [
            {"content": text(i), "project": "qa"} for i in numbers]})
        assert answer.status_code == 200, answer.text


def numbers_in(db: Path) -> set[int]:
    """The memory numbers the file at `db` holds (read-only: the file is left as it is)."""
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT content FROM memories").fetchall()
    return {int(re.match(r"Memory number (\d+):", row[0]).group(1)) for row in rows}


def integrity(db: Path) -> str:
    with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def recalls(db: Path, i: int) -> bool:
    """Whether `recall` on `db` finds memory `i` first by its shard name."""
    found = cli(db, "recall", f"shard w{i}x", "-k", "1", "--json")
    assert found.returncode == 0, found.stderr
    return text(i) in found.stdout


def one_line_error(result: subprocess.CompletedProcess[str], words: str) -> None:
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert words in result.stderr, result.stderr


def test_a_backup_taken_while_the_service_writes_is_whole_and_consistent(tmp_path: Path) -> None:
    service = start_service(tmp_path / "s", MEMORY_PLUGINS=PLUGINS)
    db = tmp_path / "s" / "memory.db"
    try:
        write(service, range(200))
        writer = Writer(service, 200, text)
        writer.start()
        copies = []
        for round_ in range(3):
            before = writer.next
            copy = tmp_path / f"copy{round_}.db"
            made = cli(db, "backup", str(copy))
            assert made.returncode == 0, made.stderr
            assert writer.next > before  # the service kept acknowledging writes meanwhile
            copies.append(copy)
        writer.stopping.set()
        writer.join()
        assert writer.is_alive() is False
    finally:
        service.stop()
    for copy in copies:
        assert copy.stat().st_mode & 0o777 == 0o600
        assert integrity(copy) == "ok"
        held = numbers_in(copy)
        # One writer wrote 0, 1, 2, … in turn: a snapshot holds exactly the first n of them.
        assert len(held) >= 200 and held == set(range(len(held)))
        assert recalls(copy, 150) and recalls(copy, len(held) - 1)
        assert not Path(f"{copy}-wal").exists()  # one self-contained file
    assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".")] == []  # no temp left


def test_restore_is_refused_while_the_service_serves_the_store(tmp_path: Path) -> None:
    service = start_service(tmp_path / "s", MEMORY_PLUGINS=PLUGINS)
    db = tmp_path / "s" / "memory.db"
    try:
        write(service, range(20))
        assert cli(db, "backup", str(tmp_path / "backup.db")).returncode == 0
        write(service, range(20, 40))
        refused = cli(db, "restore", str(tmp_path / "backup.db"))
        one_line_error(refused, "served by a running service")
        write(service, range(40, 45))  # still served, nothing moved
        assert not Path(f"{db}.before-restore").exists()
    finally:
        service.stop()
    assert numbers_in(db) == set(range(45)) and integrity(db) == "ok"


def test_restore_is_refused_while_a_service_without_a_discovery_file_holds_it(
        tmp_path: Path) -> None:
    """No discovery file names it (MEMORY_DISCOVERY_FILE=off; a --stdio server is the same):
    the WAL its open connection keeps tells."""
    service = start_service(tmp_path / "s", MEMORY_PLUGINS=PLUGINS, MEMORY_DISCOVERY_FILE="off")
    db = tmp_path / "s" / "memory.db"
    try:
        write(service, range(10))
        assert cli(db, "backup", str(tmp_path / "backup.db")).returncode == 0
        write(service, range(10, 20))
        one_line_error(cli(db, "restore", str(tmp_path / "backup.db")), "open in another process")
        write(service, range(20, 25))
    finally:
        service.stop()
    assert numbers_in(db) == set(range(25)) and not Path(f"{db}.before-restore").exists()


def test_restore_after_a_crash_that_left_a_wal_gives_the_backup_whole(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    service = start_service(folder, MEMORY_PLUGINS=PLUGINS)
    db = folder / "memory.db"
    write(service, range(200))
    assert cli(db, "backup", str(tmp_path / "backup.db")).returncode == 0
    write(service, range(200, 400))
    service.stop(signal.SIGKILL)
    assert Path(f"{db}-wal").stat().st_size > 0  # the newer writes, not yet in memory.db

    restored = cli(db, "restore", str(tmp_path / "backup.db"))
    assert restored.returncode == 0, restored.stderr
    assert "restored 200 memories" in restored.stdout
    assert integrity(db) == "ok" and numbers_in(db) == set(range(200))
    assert db.stat().st_mode & 0o777 == 0o600
    kept = Path(f"{db}.before-restore")  # what was there, its WAL checkpointed into it
    assert not Path(f"{kept}-wal").exists()  # (before a read here makes one)
    assert integrity(kept) == "ok" and numbers_in(kept) == set(range(400))
    assert recalls(db, 150) and not recalls(db, 350)

    service = start_service(folder, MEMORY_PLUGINS=PLUGINS)  # and it serves again
    try:
        write(service, range(400, 405))
        with service.client() as http:
            hits = http.post("/recall", json={"query": "shard w402x"}).json()
        assert text(402) in str(hits)
    finally:
        service.stop()
    assert integrity(db) == "ok" and numbers_in(db) == set(range(200)) | set(range(400, 405))


def test_restore_refuses_what_is_not_a_store_it_can_read(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert cli(db, "store", text(1)).returncode == 0
    export = tmp_path / "backup.jsonl"
    assert cli(db, "export", "-o", str(export)).returncode == 0
    one_line_error(cli(db, "restore", str(export)), "not a store that can be restored")
    newer = tmp_path / "newer.db"
    assert cli(db, "backup", str(newer)).returncode == 0
    with sqlite3.connect(newer) as conn:
        conn.execute("PRAGMA user_version = 999")
    one_line_error(cli(db, "restore", str(newer)), "schema version 999, newer than")
    one_line_error(cli(db, "restore", str(db)), "the store's own file")
    one_line_error(cli(db, "backup", str(db)), "the store's own file")
    one_line_error(cli(db, "backup", f"{db}-wal"), "the store's own file memory.db-wal")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["backup.jsonl", "memory.db",
                                                          "newer.db"]
    assert numbers_in(db) == {1}


def test_restore_says_what_is_wrong_with_a_url_a_device_or_a_full_disk(tmp_path: Path) -> None:
    """A URL was read as a folder path ("no file postgresql:/x@/y"), a device as no file, and
    a disk that could not take the copy blamed the backup ("not a store that can be
    restored")."""
    db = tmp_path / "memory.db"
    for i in range(30):
        assert cli(db, "store", text(i) + " " + "padding " * 300).returncode == 0
    backup = tmp_path / "backup.db"
    assert cli(db, "backup", str(backup)).returncode == 0
    one_line_error(cli(db, "restore", "postgresql://x@/y"), "is a URL")
    one_line_error(cli(db, "restore", "/dev/null"), "/dev/null is not a regular file")
    before = db.read_bytes()
    # the copy beside the db may not grow past 100 kB: the disk, not the backup, refuses
    limited = subprocess.run(
        ["prlimit", f"--fsize={100_000}", sys.executable, "-m", "semantic_memory", "restore",
         str(backup)], env={**{k: v for k, v in os.environ.items()
                               if not k.startswith("MEMORY_")},
                            "MEMORY_DB_PATH": str(db), "MEMORY_PLUGINS": PLUGINS},
        capture_output=True, text=True, timeout=120)
    one_line_error(limited, "cannot write the copy beside")
    assert db.read_bytes() == before and numbers_in(db) == set(range(30))


def test_export_onto_the_stores_own_files_is_refused_and_the_db_kept(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    assert cli(db, "store", text(7)).returncode == 0
    (tmp_path / "alias.db").symlink_to(db)
    for target in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "alias.db"):
        one_line_error(cli(db, "export", "-o", str(target)), "the store's own file")
    assert integrity(db) == "ok" and recalls(db, 7)


def test_backup_and_restore_of_a_postgresql_store_point_to_pg_dump(tmp_path: Path) -> None:
    """Refused before any connection: nothing of the store is read."""
    url = "postgresql://memory@127.0.0.1:1/nowhere"
    for args in (("backup", str(tmp_path / "b.db")), ("restore", str(tmp_path / "b.db"))):
        one_line_error(cli(tmp_path / "memory.db", "--db", url, *args), "pg_dump")


def _file_size_limited() -> None:
    """The child may write no file past 200 KB (a disk that fills, as far as a write sees)."""
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))


def test_a_copy_that_cannot_be_written_names_the_copy_not_the_store(tmp_path: Path) -> None:
    """`backup` onto a disk that fills said `cannot copy <the store>: …`, which read as the
    store's disk: the copy is what could not be written, and nothing is left of it."""
    db = tmp_path / "memory.db"
    lines = "".join(f'{{"content": "{text(i)}"}}\n' for i in range(3000))
    (tmp_path / "in.jsonl").write_text(lines)
    assert cli(db, "import", str(tmp_path / "in.jsonl")).returncode == 0
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), MEMORY_DEVICE="cpu", MEMORY_PLUGINS=PLUGINS)
    target = tmp_path / "copies" / "backup.db"
    target.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "semantic_memory", "backup", str(target)],
                          env=environment, capture_output=True, text=True, timeout=120,
                          preexec_fn=_file_size_limited)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"Error: cannot write the copy {target}: disk I/O error (a "
                                   "file size limit, a failing disk; the store is only read)")
    assert list(target.parent.iterdir()) == []
