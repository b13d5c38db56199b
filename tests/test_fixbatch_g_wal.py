"""A purge while the service serves takes the purged text out of `memory.db-wal` too: the WAL
restarts from its start and kept its old frames (up to `journal_size_limit`, 16 MB), so after
`memory-mcp purge` or the browse page's Purge… the text stayed in the WAL, beside a clean db
file, for as long as the service ran. The purge's VACUUM is now followed by a TRUNCATE
checkpoint; when a reader holds an older snapshot all along, the purge says so."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from test_service_support import Service, start_service

SECRET = "QQSECRETTOKEN12345abc"
TOKEN = "fixbatch-g-wal-token-0123456789abcdef"


def files_holding(folder: Path, text: str) -> list[str]:
    """The store's files (db, WAL, shm) whose bytes hold `text`."""
    return sorted(f.name for f in folder.glob("memory.db*")
                  if f.is_file() and text.encode() in f.read_bytes())


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(folder / "memory.db"), MEMORY_DEVICE="cpu",
               MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def serve_with_a_forgotten_secret(folder: Path) -> Service:
    """A service whose WAL has seen the secret written, recalled and forgotten."""
    service = start_service(folder, MEMORY_PLUGINS="bm25_porter,bm25_trigram",
                            MEMORY_TOKEN=TOKEN)
    with service.client() as http:
        http.post("/ingest", json={"items": [
            {"content": f"filler memory {i} about build tooling and the pnpm cache {i}",
             "project": "web"} for i in range(40)]})
        uid = http.post("/ingest", json={
            "content": f"Customer Zyxwvutsrq Holdings pays late; key {SECRET}",
            "project": "web"}).json()["uid"]
        for _ in range(3):
            http.post("/recall", json={"query": "Zyxwvutsrq invoices", "project": "web"})
        assert http.delete(f"/api/memories/{uid}").status_code == 200
    assert files_holding(folder, SECRET)  # the file holds it before the purge
    return service


def assert_gone_while_serving(service: Service, folder: Path) -> None:
    wal = folder / "memory.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert files_holding(folder, SECRET) == []
    with service.client() as http:  # ordinary writes after it: nothing comes back
        for i in range(3):
            http.post("/ingest", json={"content": f"later note {i} about docker compose"})
    assert files_holding(folder, SECRET) == []
    assert service.stop() == 0
    assert files_holding(folder, SECRET) == []
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_cli_purge_while_the_service_serves_leaves_nothing_in_the_wal(tmp_path: Path) -> None:
    service = serve_with_a_forgotten_secret(tmp_path)
    try:
        purged = cli(tmp_path, "purge")
        assert purged.returncode == 0, purged.stderr
        report = json.loads(purged.stdout)
        assert report["soft_deleted"] == 1 and report["vacuumed"] and "warning" not in report
        assert_gone_while_serving(service, tmp_path)
    finally:
        if service.proc.poll() is None:
            service.stop()


def test_the_browse_pages_purge_leaves_nothing_in_the_wal(tmp_path: Path) -> None:
    service = serve_with_a_forgotten_secret(tmp_path)
    try:
        with service.client() as http:
            report = http.post("/api/maintenance/purge", json={}).json()
        assert report["soft_deleted"] == 1 and "warning" not in report
        assert_gone_while_serving(service, tmp_path)
    finally:
        if service.proc.poll() is None:
            service.stop()


def test_a_reader_holding_an_old_snapshot_is_named_not_waited_for_forever(
        tmp_path: Path) -> None:
    service = serve_with_a_forgotten_secret(tmp_path)
    reader = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM memories").fetchone()  # its snapshot, from now on
        with service.client() as http:  # a write after it: the snapshot is an older one
            http.post("/ingest", json={"content": "a note written after the reader began"})
        purged = cli(tmp_path, "purge")
        assert purged.returncode == 0, purged.stderr
        report = json.loads(purged.stdout)
        assert report["soft_deleted"] == 1 and report["vacuumed"]
        assert "memory.db-wal was not cut: another connection kept reading" in report["warning"]
        assert "Traceback" not in purged.stderr
        reader.execute("COMMIT")
        with service.client() as http:  # the reader gone, the next purge cuts it
            uid = http.post("/ingest", json={"content": "a note to forget"}).json()["uid"]
            http.delete(f"/api/memories/{uid}")
            report = http.post("/api/maintenance/purge", json={}).json()
        assert report["soft_deleted"] == 1 and "warning" not in report
        assert files_holding(tmp_path, SECRET) == []
    finally:
        reader.close()
        service.stop()
