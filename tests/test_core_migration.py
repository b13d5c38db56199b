"""Opening a db written by an older schema version upgrades it in place, losing nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from old_schemas import as_written_before_v9, as_written_before_v11

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError
from semantic_memory.stores.base import top_values
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


@pytest.mark.both_stores
def test_names_stored_as_given_are_normalized_on_upgrade(settings: Settings) -> None:
    """Projects with padding and kinds or sources in capitals, as earlier releases stored them,
    were out of reach of every filter once filters normalized their input. The upgrade rewrites
    them; a memory that then repeats one of its project word for word is forgotten in favour
    of the older one, and what it had replaced points at that one."""
    engine = MemoryEngine(settings)
    text = "Use pnpm, not npm, for installs in this repo"
    kept = engine.store_one(NewMemory(text, project="web")).uid
    twin = engine.store_one(NewMemory(text, project="tmp")).uid
    decision = engine.store_one(NewMemory("We chose Postgres for the team store",
                                          kind="decision", project="api")).uid
    spaced = engine.store_one(NewMemory("Deploys go through the staging cluster")).uid
    older = engine.store_one(NewMemory("Use yarn for installs in this repo", project="web")).uid
    engine.update(decision, content="We chose PostgreSQL 18 for the team store")
    engine.close()
    as_written_before_v9(settings, [
        ("UPDATE memories SET project = ? WHERE uid = ?", ("web ", twin)),
        ("UPDATE memories SET superseded_by = ? WHERE uid = ?", (twin, older)),
        ("UPDATE memories SET kind = ?, source = ?, project = ? WHERE uid = ?",
         ("Decision", "MCP", "\tapi", decision)),
        ("UPDATE memory_revisions SET kind = ?, project = ?", ("Decision", "\tapi")),
        ("UPDATE memories SET project = ? WHERE uid = ?", ("   ", spaced)),
    ])

    engine = MemoryEngine(settings)
    try:
        if settings.db_url:
            from semantic_memory_postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION

            assert engine.store.schema_version == PG_SCHEMA_VERSION
        else:
            assert engine.store.schema_version == SCHEMA_VERSION
        assert engine.get(twin).deleted and not engine.get(kept).deleted
        assert engine.get(older).superseded_by == kept
        web = engine.recall("pnpm installs", filters=RecallFilters(project="web"))
        assert [h.memory.uid for h in web] == [kept]
        found = engine.list(RecallFilters(project="api", kind="decision", source="mcp"))
        assert [m.uid for m in found] == [decision]
        assert engine.get(spaced).project is None  # blank: a global memory
        rows = engine.store.read().execute(
            engine.store._q("SELECT kind, project FROM memory_revisions")).fetchall()
        assert [tuple(r) for r in rows] == [("decision", "api")]
        with engine.store.snapshot() as conn:
            # current memories: `older` is superseded, `twin` forgotten
            assert top_values(engine.store.value_counts(conn, ("project",))["project"]) == {
                "web": 1, "api": 1, "": 1}
    finally:
        engine.close()


CAFE_NFC, CAFE_NFD = "caf\u00e9-app", "cafe\u0301-app"


@pytest.mark.both_stores
def test_decomposed_names_are_composed_on_upgrade(settings: Settings) -> None:
    """A folder macOS names in decomposed form ("cafe" + combining acute) and the name a user
    types ("café", one code point) were two projects: a hook's memories never reached
    `--project café-app`. v11 composes stored names (NFC), as ingest and every filter now do;
    a memory that then repeats one of its project word for word is forgotten."""
    engine = MemoryEngine(settings)
    text = "Use pnpm, not npm, for installs in this repo"
    kept = engine.store_one(NewMemory(text, project=CAFE_NFC)).uid
    twin = engine.store_one(NewMemory(text, project="other")).uid
    hooked = engine.store_one(NewMemory("The cafe app deploys from the main branch",
                                        project="other")).uid
    engine.close()
    as_written_before_v11(settings, [
        ("UPDATE memories SET project = ? WHERE uid IN (?, ?)", (CAFE_NFD, twin, hooked)),
        ("UPDATE memories SET kind = ? WHERE uid = ?", ("de\u0301cision", hooked)),
    ])
    engine = MemoryEngine(settings)
    try:
        assert engine.get(twin).deleted and not engine.get(kept).deleted
        assert engine.get(hooked).project == CAFE_NFC
        assert engine.get(hooked).kind == "d\u00e9cision"
        for asked in (CAFE_NFC, CAFE_NFD):
            found = engine.list(RecallFilters(project=asked))
            assert sorted(m.uid for m in found) == sorted([kept, hooked])
            hits = engine.recall("deploys main branch", filters=RecallFilters(project=asked))
            assert [h.memory.uid for h in hits][:1] == [hooked]
    finally:
        engine.close()


@pytest.mark.both_stores
def test_a_repository_named_in_two_letter_cases_is_one_project_on_upgrade(
        settings: Settings) -> None:
    """Clones of one GitHub repository whose remotes differ only in letter case stored their
    memories under two projects ("github.com/Acme/App", "github.com/acme/app"); GitHub, GitLab
    and Bitbucket names are case-insensitive, so v11 lower-cases those stored names: one
    project, and a memory that repeats one of it word for word is forgotten. Other hosts'
    names keep their case."""
    engine = MemoryEngine(settings)
    text = "Run the app's migrations with make migrate before the tests"
    kept = engine.store_one(NewMemory(text, project="github.com/acme/app")).uid
    twin = engine.store_one(NewMemory(text, project="other")).uid
    cloned = engine.store_one(NewMemory("The app's staging cluster runs on eu-west-1",
                                        project="other")).uid
    own_host = engine.store_one(NewMemory("Self-hosted git keeps its case",
                                          project="git.acme.dev/Acme/App")).uid
    engine.close()
    as_written_before_v11(settings, [
        ("UPDATE memories SET project = ? WHERE uid IN (?, ?)",
         ("github.com/Acme/App", twin, cloned)),
    ])
    engine = MemoryEngine(settings)
    try:
        assert engine.get(twin).deleted and not engine.get(kept).deleted
        assert engine.get(cloned).project == "github.com/acme/app"
        assert engine.get(own_host).project == "git.acme.dev/Acme/App"
        for asked in ("github.com/acme/app", "github.com/Acme/App", "GitHub.com/ACME/app"):
            found = engine.list(RecallFilters(project=asked))
            assert sorted(m.uid for m in found) == sorted([kept, cloned]), asked
        assert [m.uid for m in engine.list(RecallFilters(project="git.acme.dev/acme/app"))] == []
    finally:
        engine.close()


def test_a_decomposed_project_name_is_stored_composed(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db")))
    try:
        uid = engine.store_one(NewMemory("The cafe app deploys on Fridays", project=CAFE_NFD)).uid
        assert engine.get(uid).project == CAFE_NFC
        assert [m.uid for m in engine.list(RecallFilters(project=CAFE_NFC))] == [uid]
    finally:
        engine.close()


PAGE_INDEXES = {"memories_project_updated": ["project", "updated_at"],
                "memories_kind": ["kind", "updated_at"],
                "memories_source": ["source", "updated_at"]}


def test_a_v9_store_gains_an_index_per_filter_of_a_list_page(tmp_path: Path) -> None:
    """v10: a project's, kind's or source's list page reads its newest entries in an index of
    its own, built once on upgrade (before, a big project's page sorted all its memories and
    a rare kind's walked every memory)."""
    path = tmp_path / "v9.db"
    engine = MemoryEngine(Settings(db_path=str(path)))
    engine.ingest([NewMemory(text, project="api", kind="decision") for text in (
        "We chose Postgres for the api", "The api is versioned in its path",
        "Api errors follow RFC 9457")] + [NewMemory("the web app builds with vite")])
    engine.close()
    conn = sqlite3.connect(path)
    conn.executescript("DROP INDEX memories_project_updated; DROP INDEX memories_kind; "
                       "DROP INDEX memories_source; PRAGMA user_version = 9;")
    conn.close()
    engine = MemoryEngine(Settings(db_path=str(path)))
    conn = engine.store.read()
    assert engine.store.schema_version == SCHEMA_VERSION
    assert {name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
            for name in PAGE_INDEXES} == PAGE_INDEXES
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM memories m WHERE m.deleted = 0 AND m.kind = ? "
        "ORDER BY m.updated_at DESC, m.id DESC LIMIT 20", ("decision",)))
    assert "memories_kind" in plan and "TEMP B-TREE" not in plan
    assert [m.content for m in engine.list(RecallFilters(project="api"), 2)] == [
        "Api errors follow RFC 9457", "The api is versioned in its path"]
    assert engine.count(RecallFilters(kind="decision")) == 3
    engine.close()
