"""FTS5 index levels stay bounded (stores/sqlite.py `merge_fts_step`, `bound_fts_levels`).

FTS5 reads an index of more than 2000 levels as corrupt: every search and every write of the
store then fails with "database disk image is malformed". A full merge that finds segments
written since the one before adds levels (two each on SQLite 3.40, never removed), and the
step-wise scrub used to start the merge afresh at every step: with writes between its
steps, one level more a step.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import STARTUP_RECLAIM_SHARE, MemoryEngine
from semantic_memory.stores import sqlite as sqlite_store
from semantic_memory.stores.sqlite import FTS_LEVEL_BOUND, fts_levels
from test_fixbatch_g_grace_purge import random_notes

PLUGINS = "bm25_porter,bm25_trigram"
TABLES = ("memories_fts", "memories_fts_tri")


def open_engine(db: Path, **settings: Any) -> MemoryEngine:
    return MemoryEngine(Settings(db_path=str(db), plugins=PLUGINS, device="cpu", **settings))


def levels(engine: MemoryEngine) -> dict[str, int]:
    conn = engine.store.read()
    return {table: fts_levels(conn, table) for table in TABLES}


def test_a_scrub_with_writes_between_its_steps_adds_two_levels_not_one_a_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = open_engine(tmp_path / "memory.db")
    try:
        notes = random_notes(3000, 36)
        for start in range(0, len(notes), 300):  # segments on several levels
            engine.ingest([NewMemory(text, project="web") for text in notes[start:start + 300]],
                          batch_is_session=False)
        uid = engine.ingest([NewMemory("Customer Qwertzuiop pays late", project="web")])[0].uid
        assert uid is not None and engine.forget(uid)
        before = levels(engine)
        steps = []
        real_step = sqlite_store.merge_fts_step

        def step_after_a_write(conn: sqlite3.Connection, table: str, pages: int,
                               first: bool) -> bool:
            # what a hook's write between two steps leaves: a segment newer than the merge's
            engine.ingest([NewMemory(f"a note written during step {len(steps)}",
                                     project="web")])
            steps.append(table)
            return real_step(conn, table, pages, first)

        monkeypatch.setattr(sqlite_store, "SCRUB_STEP_PAGES", 16)
        monkeypatch.setattr(sqlite_store, "merge_fts_step", step_after_a_write)
        report = engine.purge(STARTUP_RECLAIM_SHARE, 0)
        monkeypatch.undo()
        assert report.soft_deleted == 1 and not report.vacuumed and report.warning is None
        assert steps.count("memories_fts_tri") > 20  # many steps, each after a write
        after = levels(engine)
        for table in TABLES:  # the restructure of the first step, and the merge's output
            assert after[table] <= before[table] + 2, (table, before, after)
        with engine.store.write() as conn:
            for table in TABLES:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        assert engine.recall(notes[1234], k=1)[0].memory.content == notes[1234]
        assert not engine.recall("Qwertzuiop", k=5)
    finally:
        engine.close()


def seed(engine: MemoryEngine, text: str) -> str:
    """Store `text` among 400 other notes (FTS5 promotes a small index's merged segment back
    down, so that its levels do not grow: a store's index soon outgrows that); its uid."""
    engine.ingest([NewMemory(note, project="web") for note in random_notes(400, 20)],
                  batch_is_session=False)
    uid = engine.ingest([NewMemory(text, project="web")])[0].uid
    assert uid is not None
    return uid


def grow_levels(db: Path, table: str, target: int) -> None:
    """Leave FTS5 index `table` with `target` levels or more, as repeated full merges with a
    write before each do on SQLite 3.40 (a plain connection of its own)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN")
        statements = [  # a row no memory has, in and out again, each time merged
            f"INSERT INTO {table}(rowid, content) VALUES (-1, 'grown level')",
            f"INSERT INTO {table}({table}) VALUES ('optimize')",
            f"INSERT INTO {table}({table}, rowid, content) VALUES ('delete', -1, 'grown level')",
            f"INSERT INTO {table}({table}) VALUES ('optimize')"]
        while fts_levels(conn, table) < target:
            conn.execute(statements[0])
            statements.append(statements.pop(0))
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_an_index_past_what_fts5_reads_is_rebuilt_by_the_maintenance(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    engine = open_engine(db)
    uid = seed(engine, "The staging database listens on port 6543")
    engine.close()
    if sqlite3.sqlite_version_info >= (3, 42):
        pytest.xfail(f"SQLite {sqlite3.sqlite_version} stops FTS5 at 64 levels")
    grow_levels(db, "memories_fts", 2001)
    broken = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError):  # "malformed", or the table cannot be opened
        broken.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH 'staging'"
                       ).fetchall()
    broken.close()

    engine = open_engine(db, maintenance_on_start=True)
    try:
        engine.startup_maintenance()
        assert levels(engine)["memories_fts"] < 10
        hits = engine.recall("staging database port", k=3)
        assert [hit.memory.uid for hit in hits] == [uid]
        assert engine.ingest([NewMemory("The staging cache is Redis 7", project="web")])
    finally:
        engine.close()


@pytest.mark.parametrize("how", ["optimize", "scrub"])
def test_a_full_merge_of_an_index_at_the_bound_rebuilds_it(tmp_path: Path, how: str) -> None:
    db = tmp_path / "memory.db"
    engine = open_engine(db)
    uid = seed(engine, "Deploys go out on Thursdays after the standup")
    engine.close()
    grow_levels(db, "memories_fts_tri", FTS_LEVEL_BOUND)
    engine = open_engine(db)
    try:
        if how == "optimize":
            engine.store.optimize()
        else:
            engine.store.scrub_indexes()
        assert levels(engine)["memories_fts_tri"] < 10
        assert [hit.memory.uid for hit in engine.recall("Thursdays deploys", k=3)] == [uid]
    finally:
        engine.close()
