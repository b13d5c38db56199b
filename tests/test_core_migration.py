"""Opening a db written by an older schema version upgrades it in place, losing nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError
from semantic_memory.stores.sqlite import SCHEMA_VERSION, SQLiteStore

V1_SCHEMA = """
CREATE TABLE memories (
    id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'fact', source TEXT NOT NULL DEFAULT 'chat', project TEXT,
    tags TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL, updated_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE injections (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, harness TEXT, hook TEXT, project TEXT,
    query TEXT, uids TEXT NOT NULL DEFAULT '[]', chars INTEGER NOT NULL DEFAULT 0);
PRAGMA user_version = 1;
"""


def make_v1(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.executemany(
        "INSERT INTO memories (uid, content, kind, project, tags, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [("u1", "Prefer tabs over spaces in Makefiles", "preference", "tools", '["style"]', 1e9, 1e9),
         ("u2", "The API gateway times out after 30 s", "fact", "api", "[]", 1e9, 1e9)],
    )
    conn.execute("INSERT INTO injections (ts, harness, uids, chars) VALUES (?, ?, ?, ?)",
                 (2e9, "opencode", json.dumps(["u1", "u1", "u2"]), 120))
    conn.commit()
    conn.close()


def test_v1_db_is_migrated_and_fully_usable(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    make_v1(path)
    engine = MemoryEngine(Settings(db_path=str(path)))
    assert engine.store.schema_version == SCHEMA_VERSION
    assert {m.uid for m in engine.list()} == {"u1", "u2"}
    assert engine.get("u1").tags == ["style"]
    # Channels indexed the old rows; the hash was backfilled so dedup sees old content.
    assert engine.recall("makefile tabs")[0].memory.uid == "u1"
    dup = engine.store_one(NewMemory("Prefer tabs over spaces in Makefiles", project="tools"))
    assert dup.status == "duplicate" and dup.uid == "u1"
    # Telemetry items were split out of the JSON column.
    items = engine.store.read().execute(
        "SELECT uid, count(*) FROM injection_items GROUP BY uid ORDER BY uid").fetchall()
    assert items == [("u1", 2), ("u2", 1)]
    # v3: forgotten memories are counted and filtered through their own index.
    assert engine.forget("u2")
    assert engine.counts()["memories"] == 1 and engine.counts()["forgotten"] == 1
    assert engine.recall("gateway times out") == []
    assert project_index_columns(engine.store.read()) == ["project", "id"]
    # v5: injection reports carry the agent session; old reports have none.
    assert engine.injected_in_session("s1") == frozenset()
    engine.record_injection(uids=["u1"], harness="claude-code", session="s1")
    assert engine.injected_in_session("s1") == {"u1"}
    # v6: memories keep their place in a session; old ones have none (and no neighbours).
    assert engine.get("u1").session is None
    batch = engine.ingest([NewMemory("after the upgrade one"), NewMemory("after the upgrade two")])
    placed = [engine.get(r.uid) for r in batch]
    assert placed[0].session == placed[1].session and [m.seq for m in placed] == [0, 1]
    engine.close()
    # Opening again is a no-op.
    again = MemoryEngine(Settings(db_path=str(path)))
    assert again.count() == 3 and again.store.schema_version == SCHEMA_VERSION
    again.close()


def project_index_columns(conn: sqlite3.Connection) -> list[str]:
    return [r[2] for r in conn.execute("PRAGMA index_info(memories_project)")]


def test_v3_project_index_is_rebuilt_by_id(tmp_path: Path) -> None:
    """v4: a project's id range (the bound of its searches) comes from two index seeks."""
    path = tmp_path / "v3.db"
    engine = MemoryEngine(Settings(db_path=str(path)))
    for i in range(3):
        engine.store_one(NewMemory(f"deploy step {i} of the api", project="api"))
    engine.store_one(NewMemory("deploy the web app", project="web"))
    engine.close()
    conn = sqlite3.connect(path)
    conn.executescript("DROP INDEX memories_project; "
                       "CREATE INDEX memories_project ON memories(project, updated_at); "
                       "PRAGMA user_version = 3;")
    conn.close()
    engine = MemoryEngine(Settings(db_path=str(path)))
    conn = engine.store.read()
    assert engine.store.schema_version == SCHEMA_VERSION
    assert project_index_columns(conn) == ["project", "id"]
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT (SELECT min(id) FROM memories WHERE project = ?1)", ("api",)))
    assert "memories_project" in plan
    hits = engine.recall("deploy", filters=RecallFilters(project="api"))
    assert len(hits) == 3 and {h.memory.project for h in hits} == {"api"}
    engine.close()


def test_newer_schema_is_refused_not_damaged(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY)")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1


def test_a_file_that_is_not_a_database_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="cannot open"):
        SQLiteStore(path)


def test_parent_directories_are_created(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a" / "b" / "memory.db")
    assert store.path.exists()
    store.close()
