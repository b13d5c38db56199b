"""The PostgreSQL store's keyword mirror lets the words of purged memories go: its FTS5 indexes
kept them in their segments (a delete only adds markers, which hold the word too), and its
freed bytes as they were, for as long as the file lived. Now a sync that applies purges marks
the file; a service then merges each index a step at a time in the background (searches go
on), with secure_delete on its writer, and cuts the WAL. The mark is kept in the file, so a
purge a one-off command applied is scrubbed by the next service to sync."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pg
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_postgres.channels import PgFullTextChannel
from semantic_memory_postgres.mirror import KeywordMirror
from test_service_support import start_service

WORD = b"zyxwvutsrq"


def mirror_files_holding(folder: Path) -> list[str]:
    return sorted(f.name for f in (folder / "pg-mirror").glob("*.db*")
                  if f.is_file() and WORD in f.read_bytes().lower())


def make(db_url: str, folder: Path, serving: bool = True) -> MemoryEngine:
    return MemoryEngine(Settings.from_env({"MEMORY_PG_MIRROR_MIN": "0"},
                                          db_path=str(folder / "memory.db"), db_url=db_url,
                                          device="cpu", serving=serving))


def mirror_of(engine: MemoryEngine) -> KeywordMirror:
    mirror = next(c for c in engine.channels if isinstance(c, PgFullTextChannel)).mirror
    assert mirror is not None
    return mirror


def fillers() -> list[dict[str, str]]:
    return [{"content": f"filler note {i} about build tooling and the pnpm cache {i}",
             "project": "web"} for i in range(30)]


def test_a_purge_takes_the_words_out_of_a_services_mirror(tmp_path: Path) -> None:
    url = pg.new_database()
    service = start_service(tmp_path, "serve", MEMORY_DB_URL=url, MEMORY_PG_MIRROR_MIN="0",
                            MEMORY_MAINTENANCE_ON_START="0")
    try:
        with service.client() as http:
            http.post("/ingest", json={"items": fillers()}).raise_for_status()
            uid = http.post("/ingest", json={
                "content": "Customer Zyxwvutsrq Holdings is behind on payments",
                "project": "web"}).json()["uid"]
            deadline = time.monotonic() + 60
            while not mirror_files_holding(tmp_path):  # the first recall starts the build
                assert time.monotonic() < deadline
                http.post("/recall", json={"query": "Zyxwvutsrq payments"})
                time.sleep(0.2)
            # an edit: the version it replaced leaves the mirror's rows, not its index pages
            assert http.patch(f"/api/memories/{uid}", json={
                "content": "Customer Zyxwvutsrq Holdings is far behind on payments"
            }).status_code == 200
            assert http.delete(f"/api/memories/{uid}").status_code == 200
            http.post("/recall", json={"query": "payments"}).raise_for_status()
            assert mirror_files_holding(tmp_path)  # forgotten, not purged: still there
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        env.update(MEMORY_DB_URL=url, MEMORY_DB_PATH=str(tmp_path / "cli" / "memory.db"))
        purged = subprocess.run([sys.executable, "-m", "semantic_memory", "purge"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert purged.returncode == 0 and '"soft_deleted": 1' in purged.stdout, purged.stderr
        deadline = time.monotonic() + 30
        with service.client() as http:
            while mirror_files_holding(tmp_path):  # a search applies the purge: scrubbed
                assert time.monotonic() < deadline, mirror_files_holding(tmp_path)
                hits = http.post("/recall", json={"query": "filler note pnpm"}).json()
                assert hits["count"] > 0
                time.sleep(0.2)
    finally:
        service.stop()
    assert mirror_files_holding(tmp_path) == []


def test_a_purge_a_one_off_command_applied_is_scrubbed_by_the_service(tmp_path: Path) -> None:
    url = pg.new_database()
    service = make(url, tmp_path)
    one_off = make(url, tmp_path, serving=False)  # the same folder: one mirror file
    try:
        service.ingest([NewMemory(f["content"], project="web") for f in fillers()])
        uid = service.ingest([NewMemory("Customer Zyxwvutsrq Holdings pays late",
                                        project="web")])[0].uid
        mirror = mirror_of(service)
        service.recall("warm up", k=1)
        mirror.wait(60)
        service.recall("warm up", k=1)
        assert mirror.ready and mirror_files_holding(tmp_path)
        assert uid is not None and service.forget(uid)
        assert service.purge().soft_deleted == 1
        assert one_off.recall("filler note", k=1)  # applies the purge to the shared file
        assert mirror_of(one_off).ready
        assert mirror_files_holding(tmp_path)  # a one-off command never merges
        assert service.recall("filler note", k=1)  # the service's sync finds the mark
        mirror.wait(60)
        assert mirror_files_holding(tmp_path) == []
        assert [h.memory.content for h in service.recall("pnpm cache 7", k=1)] == [
            "filler note 7 about build tooling and the pnpm cache 7"]
    finally:
        one_off.close()
        service.close()
