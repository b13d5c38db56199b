"""`memory-mcp migrate` while the service writes.

A QA pass found the documented "copy everything" failing while the service took writes: the
counts were read in one transaction and the rows in others, so a good copy ended with "counts
differ" (exit 1), and the retry was refused as not empty. The copy now reads one snapshot of
the source. Everything here runs the real CLI, the real service and a real PostgreSQL server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pg
from test_service_support import Service, start_service

from semantic_memory.config import Settings
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


class Writer(threading.Thread):
    """Posts /ingest one memory at a time, numbered from `start`, until stopped."""

    def __init__(self, service: Service, start: int) -> None:
        super().__init__(daemon=True)
        self.service, self.start_at, self.next = service, start, start
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.service.client() as http:
            while not self.stopping.is_set():
                answer = http.post("/ingest", json={"content": text(self.next),
                                                    "project": "qa"})
                assert answer.json()["status"] == "new", answer.text
                self.next += 1

    def wait_for(self, writes: int) -> None:
        """Until `writes` more memories were stored (the writer is under way)."""
        goal = self.next + writes
        while self.next < goal and self.is_alive():
            time.sleep(0.01)


def _migrate_while_writing(tmp_path: Path, target: str) -> tuple[dict, int]:
    """Migrate the service's store to `target` while a writer adds memories through /ingest
    before, during and after; returns the JSON summary and how many the writer stored while
    the migrate ran."""
    service = start_service(tmp_path / "s", MEMORY_PLUGINS=PLUGINS)
    writer = Writer(service, 100_000)
    try:
        with service.client() as http:
            for start in range(0, 3000, 500):
                answer = http.post("/ingest", json={"items": [
                    {"content": text(i), "project": "qa"} for i in range(start, start + 500)]})
                assert answer.status_code == 200, answer.text
        writer.start()
        writer.wait_for(5)
        before = writer.next
        done = cli(str(tmp_path / "s" / "memory.db"), "migrate", "--to", target)
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
