"""A db file replaced (a backup restored with `mv`) or deleted, or its -wal deleted, while a
process has it open: the open handles still reach the old files, so every write was answered
`new` and then lost for good at the next start. A write now fails with one line (a 503 from
the service, which a hook spools) and is stored once the service opens the file again."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from test_service_support import memory_mcp_command, start_service

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db")))
    yield engine
    engine.close()


def backup(db: Path) -> Path:
    """A copy of `db` as `memory-mcp` users make one (`VACUUM INTO`), beside it."""
    copy = db.with_name("backup.db")
    conn = sqlite3.connect(db)
    try:
        conn.execute(f"VACUUM INTO '{copy}'")
    finally:
        conn.close()
    return copy


@pytest.mark.parametrize("how", ["restored over", "deleted", "wal deleted"])
def test_a_write_to_a_db_replaced_under_the_store_is_refused(
        tmp_path: Path, engine: MemoryEngine, how: str) -> None:
    db = tmp_path / "memory.db"
    engine.store_one(NewMemory("the deploy script lives in ops/deploy.sh"))
    copy = backup(db)
    if how == "restored over":
        os.replace(copy, db)
    elif how == "deleted":
        db.unlink()
    else:
        Path(f"{db}-wal").unlink()
    with pytest.raises(StoreError) as refused:
        engine.store_one(NewMemory("the cache lives on redis-2"))
    said = str(refused.value)
    assert ("deleted" if how != "restored over" else "replaced") in said and "\n" not in said
    assert "nothing was written" in said
    if how == "restored over":
        assert engine.count() == 1  # reads answer, from the file now at the path


def test_a_hook_spools_what_the_service_cannot_write_and_a_restart_stores_it(
        tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        with service.client() as client:
            assert client.post("/ingest", json={"content": "the queue runs on worker 7"}
                               ).status_code == 200
        # a backup restored under the service (`mv`)
        os.replace(backup(tmp_path / "memory.db"), tmp_path / "memory.db")
        with service.client() as client:
            answer = client.post("/ingest", json={"content": "the cache lives on redis-2"})
        assert answer.status_code == 503 and "replaced" in answer.json()["error"]
        # /health (what `doctor` reads) says so too, not "ok" with the old file's counts
        with service.client() as client:
            health = client.get("/health")
        assert health.status_code == 503 and health.json()["ok"] is False, health.text
        assert "replaced while this process had it open" in health.json()["error"]
        doctor = subprocess.run([*memory_mcp_command(), "doctor"], capture_output=True,
                                text=True, env=hook_env(tmp_path, service.url), timeout=60)
        assert doctor.returncode == 1, doctor.stdout
        assert "replaced while this process had it open" in doctor.stdout, doctor.stdout
        said = run_hook("example", "prompt", {"session": "s1", "cwd": "/tmp", "prompt":
                                              "remember that the staging db is on port 6543"},
                        hook_env(tmp_path, service.url))
        assert said.returncode == 0 and hook_log(tmp_path)[-1]["outcome"] == "spooled"
    finally:
        service.stop()
    service = start_service(tmp_path)  # opens the file now at the path; drains the spool
    try:
        with service.client() as client:
            for _ in range(300):
                items = client.get("/api/memories", params={"limit": 50}).json()["items"]
                if any("6543" in m["content"] for m in items):
                    break
                time.sleep(0.1)
        contents = [m["content"] for m in items]
        assert "the queue runs on worker 7" in contents
        assert sum("6543" in c for c in contents) == 1
    finally:
        service.stop()
