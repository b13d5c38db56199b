"""The SQLite store on a disk that refuses a write: a full disk is a one-line StoreError naming
the file (the service answers a JSON 503, the CLI one line), not sqlite3's "database or disk is
full" as a 500, and the store writes again once there is room."""

from __future__ import annotations

import resource
import subprocess
from pathlib import Path

import httpx2
from lock_support import PLUGINS, seed, serving
from test_service_support import memory_mcp_command, service_env

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

LONG = " ".join(f"word{i}" for i in range(9_000))  # ~80 KB: more pages than are left


def test_a_full_db_is_a_json_503_and_the_store_writes_again(tmp_path: Path) -> None:
    """`max_page_count` at the db's size makes SQLite answer SQLITE_FULL, as a full disk does."""
    db = tmp_path / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=PLUGINS,
                                   maintenance_on_start=False))
    try:
        engine.store_one(NewMemory("seed memory"))
        writer = engine.store._writer  # type: ignore[attr-defined]
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages}")
        with serving(engine) as (url, _):
            answer = httpx2.post(f"{url}/ingest", json={"content": LONG}, timeout=60)
        assert answer.status_code == 503, answer.text
        assert answer.json() == {"error": f"no space left on the disk of {db}: free some, "
                                          "then try again"}
        writer.execute(f"PRAGMA max_page_count = {2 * 1024 ** 3}")  # room again
        assert engine.store_one(NewMemory(LONG)).status == "new"
        assert engine.count() == 2
    finally:
        engine.close()


def test_a_commit_the_disk_refuses_is_one_line(tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE) fails the WAL's write at COMMIT as a disk I/O error."""
    db = tmp_path / "memory.db"
    seed(db, ["seed memory"])
    limit = db.stat().st_size + 32 * 1024

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    refused = subprocess.run([*memory_mcp_command(), "store", LONG], capture_output=True,
                             text=True, timeout=120, preexec_fn=cap,
                             env=service_env(tmp_path, MEMORY_PLUGINS=PLUGINS))
    assert refused.returncode == 1
    assert refused.stderr.endswith(f"disk I/O error on {db}\n"), refused.stderr
    assert len(refused.stderr.splitlines()) == 1
