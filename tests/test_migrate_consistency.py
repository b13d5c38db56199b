"""`memory-mcp migrate` while the service writes, and into a disk that fills up.

A QA pass found the documented "copy everything" failing two ways: while the service took
writes, the counts were read in one transaction and the rows in others, so a good copy ended
with "counts differ" (exit 1), and the retry was refused as not empty; and a copy into a full
disk left a half-filled SQLite file that opened as a normal store, so "free some, then try
again" was refused too. The copy now reads one snapshot of the source; a SQLite target is
filled from a verified copy beside it in one transaction, so a failure leaves it as it was.
Everything here runs the real CLI, the real service and a real PostgreSQL server.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pg
from test_service_support import Writer, start_service

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

PLUGINS = "bm25_porter,bm25_trigram,postgres"


def cli(source: str, *args: str, preexec_fn: Callable[[], None] | None = None
        ) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DEVICE="cpu", MEMORY_PLUGINS=PLUGINS)
    return subprocess.run([sys.executable, "-m", "semantic_memory", "--db", source, *args],
                          env=environment, capture_output=True, text=True, timeout=300,
                          preexec_fn=preexec_fn)


def text(i: int) -> str:
    return f"Memory number {i}: the zebracorn deployment uses port {10000 + i} for shard w{i}x"


def _migrate_while_writing(tmp_path: Path, target: str, source_url: str | None = None
                           ) -> tuple[dict, int]:
    """Migrate the service's store (its SQLite file, or `source_url`) to `target` while a
    writer adds memories through /ingest before, during and after; returns the JSON summary
    and how many the writer stored while the migrate ran."""
    service = start_service(tmp_path / "s", MEMORY_PLUGINS=PLUGINS,
                            **({"MEMORY_DB_URL": source_url} if source_url else {}))
    writer = Writer(service, 100_000, text)
    try:
        with service.client() as http:
            for start in range(0, 3000, 500):
                answer = http.post("/ingest", json={"items": [
                    {"content": text(i), "project": "qa"} for i in range(start, start + 500)]})
                assert answer.status_code == 200, answer.text
        writer.start()
        writer.wait_for(5)
        before = writer.next
        done = cli(source_url or str(tmp_path / "s" / "memory.db"), "migrate", "--to", target)
        during = writer.next - before
        writer.wait_for(5)
    finally:
        writer.stopping.set()
        writer.join(30)
        service.stop()
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), during


def test_migrate_to_sqlite_while_the_service_writes_copies_one_consistent_state(
        tmp_path: Path) -> None:
    """Used to exit 1 with "counts differ after the copy" (the memories counted, then more
    exported), the copy left behind and the retry refused as not empty."""
    summary, during = _migrate_while_writing(tmp_path, str(tmp_path / "backup.db"))
    assert during > 0, "the writer stored nothing while migrate ran"
    assert summary["verified"] and summary["copied"] == summary["expected"], summary
    copied = summary["copied"]["memories"]
    assert copied >= 3000
    copy = MemoryEngine(Settings(db_path=str(tmp_path / "backup.db"), plugins=PLUGINS))
    try:
        assert copy.counts()["memories"] == copied
        numbers = {int(m.content.split()[2].rstrip(":"))
                   for m in copy.store.export(include_deleted=True)}
    finally:
        copy.close()
    # one state of the source: the first writes and an unbroken run of the writer's after
    assert numbers == set(range(3000)) | set(range(100_000, 100_000 + copied - 3000))


def test_migrate_to_postgres_while_the_service_writes_copies_one_consistent_state(
        tmp_path: Path) -> None:
    url = pg.new_database()
    summary, during = _migrate_while_writing(tmp_path, url)
    assert during > 0, "the writer stored nothing while migrate ran"
    assert summary["verified"] and summary["copied"] == summary["expected"], summary
    copy = MemoryEngine(Settings(db_path=str(tmp_path / "unused.db"), db_url=url,
                                 plugins=PLUGINS))
    try:
        assert copy.counts()["memories"] == summary["copied"]["memories"] >= 3000
    finally:
        copy.close()


def test_migrate_from_postgres_while_the_service_writes_copies_one_consistent_state(
        tmp_path: Path) -> None:
    """A PostgreSQL source read each statement on its own pooled connection, even inside
    the copy's snapshot: counted and copied were two states, "counts differ"."""
    summary, during = _migrate_while_writing(tmp_path, str(tmp_path / "copy.db"),
                                             source_url=pg.new_database())
    assert during > 0, "the writer stored nothing while migrate ran"
    assert summary["verified"] and summary["copied"] == summary["expected"], summary
    assert summary["copied"]["memories"] >= 3000


def _file_size_limit(size: int) -> Callable[[], None]:
    """A preexec_fn: no file the command writes may pass `size` bytes (EFBIG past it), as a
    disk that fills up at that point would refuse them."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return limit


def test_a_migrate_that_runs_out_of_room_leaves_nothing_half_written(tmp_path: Path) -> None:
    """Used to leave the first batches in the target, a store that opened as a normal one
    (stats showed nothing wrong), and refuse the retry as not empty."""
    source = MemoryEngine(Settings(db_path=str(tmp_path / "src.db"), plugins=PLUGINS))
    source.ingest([NewMemory(f"Note {i}: the {'alpha bravo charlie delta echo'[i % 20:]} "
                             f"subsystem owns ticket T{i:05d} " + "detail " * 40, project="qa")
                   for i in range(4000)], batch_is_session=False)
    source.close()
    folder = tmp_path / "small"
    folder.mkdir()
    target = folder / "t.db"
    full = cli(str(tmp_path / "src.db"), "migrate", "--to", str(target),
               preexec_fn=_file_size_limit(2_000_000))
    assert full.returncode == 1, (full.stdout, full.stderr)
    assert full.stderr.strip().count("\n") == 0 and "Traceback" not in full.stderr, full.stderr
    assert "nothing was written" in full.stderr, full.stderr
    # nothing beside it (no partial copy), and the target holds no memory
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("t.db")) == []
    if target.exists():
        with sqlite3.connect(target) as conn:
            assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
    # "try again" with room: accepted, and whole
    again = cli(str(tmp_path / "src.db"), "migrate", "--to", str(target))
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["verified"] and summary["copied"]["memories"] == 4000


def test_a_migrate_into_postgres_that_fails_midway_says_what_to_do(tmp_path: Path) -> None:
    """A PostgreSQL target is written in place: a server that goes away midway leaves part of
    the copy there. The one-line error says how to start again, and so does the next migrate's
    refusal."""
    source = MemoryEngine(Settings(db_path=str(tmp_path / "src.db"), plugins=PLUGINS))
    source.ingest([NewMemory(text(i), project="qa") for i in range(20_000)],
                  batch_is_session=False)
    source.close()
    server = pg.ExtraServer()
    url = server.url
    try:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        environment.update(MEMORY_DEVICE="cpu", MEMORY_PLUGINS=PLUGINS)
        proc = subprocess.Popen([sys.executable, "-m", "semantic_memory", "--db",
                                 str(tmp_path / "src.db"), "migrate", "--to", url],
                                env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and not _memories_in(url):
            time.sleep(0.05)
        server.stop()
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 1, stderr
        # (the connection pool may log its own line before it: the last one is the answer)
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("Error: ") and "Traceback" not in stderr, stderr
        assert "drop and recreate" in last, stderr
        server.start()
        again = cli(str(tmp_path / "src.db"), "migrate", "--to", url)
        assert again.returncode == 1 and "is not empty" in again.stderr, again.stderr
        assert "drop and recreate" in again.stderr, again.stderr
    finally:
        server.stop()


def _memories_in(url: str) -> int:
    """How many memories the database at `url` holds (0 before the schema is there)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('memories')").fetchone()[0] is None:
            return 0
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def _staged(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".migrating")]


def test_the_copy_a_killed_migrate_left_is_removed_by_the_next_one(tmp_path: Path) -> None:
    """A `migrate` killed outright left its hidden copy (as big as the source) beside the
    target for good; the docs said to find and delete it by hand."""
    source = MemoryEngine(Settings(db_path=str(tmp_path / "src.db"), plugins=PLUGINS))
    source.ingest([NewMemory(f"Note {i}: subsystem owns ticket T{i:05d} " + "detail " * 40,
                             project="qa") for i in range(6000)], batch_is_session=False)
    source.close()
    folder = tmp_path / "to"
    folder.mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DEVICE="cpu", MEMORY_PLUGINS=PLUGINS)
    killed = subprocess.Popen([sys.executable, "-m", "semantic_memory", "--db",
                               str(tmp_path / "src.db"), "migrate", "--to", str(folder / "t.db")],
                              env=environment, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        while not _staged(folder) and killed.poll() is None:
            time.sleep(0.005)
    finally:
        killed.kill()
        killed.wait(30)
    left = _staged(folder)
    assert len(left) == 1, sorted(p.name for p in folder.iterdir())
    # a copy some migration still works on (its lock held) is not taken away
    from semantic_memory.filelock import exclusive

    busy = folder / ".t.db.busy.migrating"
    busy.write_bytes(b"")
    with exclusive(folder / ".t.db.busy.migrating.lock") as held:
        assert held
        again = cli(str(tmp_path / "src.db"), "migrate", "--to", str(folder / "t.db"))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["copied"]["memories"] == 6000
    assert _staged(folder) == [busy]
    assert not any(p.name.startswith(left[0].name) for p in folder.iterdir())
