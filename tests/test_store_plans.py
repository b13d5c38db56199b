"""The queries that grow with a store read what they answer from an index, in the order they
answer it: no sort of a project's memories, no walk over every row to find a rare kind, no
row read per injection item. Checked with EXPLAIN QUERY PLAN of every statement of the shared
store SQL that these paths run, on a real SQLite store of a few thousand memories shaped as a
big one (one project holding half of them, a rare kind, 1% forgotten, 1% replaced, injection
reports). Unanalyzed, SQLite plans the same at every size (the engine never runs ANALYZE);
each case runs again on the store analyzed, as a user may leave it. A 1M-memory store took
seconds on each of these paths before (docs/benchmarks.md, "Big stores")."""

from __future__ import annotations

import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores.base import SQLMemoryStore

MEMORIES = 4_000
DAY = 86_400
#: Partial indexes: what they hold are the few forgotten or replaced memories.
PARTIAL = ("memories_forgotten", "memories_superseded")
#: The aliases and names of the tables whose rows grow with the store.
TABLES = {"m", "memories", "i", "injection_items", "s", "injections"}
Plan = tuple[str, list[str]]


def _fill(path: Path) -> None:
    """MEMORIES memories over a year, newest last: half of them in project "big", the rest in
    ten projects and 2% global; kinds note, fact, decision and one in 200 an artifact;
    sources import, chat and hook; 1% forgotten a day ago, 1% replaced; 600 injection
    reports of 3 memories each. Nothing is due for the start-up purge."""
    MemoryEngine(Settings(db_path=str(path), device="cpu")).close()  # schema and channels
    now = time.time()
    rows = []
    for i in range(MEMORIES):
        project = "big" if i % 2 else None if i % 50 == 2 else f"p{i % 10}"
        kind = ("artifact" if i % 200 == 11 else ("note", "note", "fact", "decision")[i % 4])
        source = ("import", "import", "chat", "hook")[i % 4]
        ts = now - (MEMORIES - i) * 365 * DAY / MEMORIES
        if kind == "artifact":
            ts = now - DAY  # the TTL's range is empty, but planned all the same
        rows.append((f"u{i}", f"memory {i} about the release train", f"h{i}", kind, source,
                     project, ts, ts))
    conn = sqlite3.connect(path)
    with conn:
        conn.executemany("INSERT INTO memories (uid, content, content_hash, kind, source, "
                         "project, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("UPDATE memories SET deleted = 1, updated_at = ? WHERE id % 100 = 7",
                     (now - DAY,))
        conn.execute("UPDATE memories SET superseded_by = 'u' || (id + 1) "
                     "WHERE id % 100 = 42")
        for n in range(600):
            report = conn.execute("INSERT INTO injections (ts, harness, chars) "
                                  "VALUES (?, 'claude-code', 300)", (now - n * 60,)).lastrowid
            conn.executemany("INSERT INTO injection_items (injection_id, uid) VALUES (?, ?)",
                             [(report, f"u{(n * k) % 500}") for k in (1, 3, 7)])
    conn.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plans") / "built.db"
    _fill(path)
    return path


@pytest.fixture(params=["unanalyzed", "analyzed"])
def engine(request: pytest.FixtureRequest, built: Path, tmp_path: Path) -> Iterator[MemoryEngine]:
    path = tmp_path / "memory.db"
    shutil.copyfile(built, path)
    if request.param == "analyzed":
        conn = sqlite3.connect(path)
        conn.execute("ANALYZE")
        conn.commit()
        conn.close()
    engine = MemoryEngine(Settings(db_path=str(path), device="cpu"))
    yield engine
    engine.close()


@contextmanager
def planned() -> Iterator[list[Plan]]:
    """Every statement of the shared store SQL run inside (`SQLMemoryStore._run`: every query
    these paths make), with its plan, explained on its own connection with its own
    parameters as it runs (SQLite plans a bound LIMIT unlike a literal one)."""
    plans: list[Plan] = []
    run = SQLMemoryStore._run

    def explained(store: SQLMemoryStore, conn: Any, sql: str, params: Any = ()) -> Any:
        if re.match(r"\s*(SELECT|DELETE|UPDATE|WITH)\b", sql, re.IGNORECASE):
            plans.append((sql, [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql,
                                                           params)]))
        return run(store, conn, sql, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SQLMemoryStore, "_run", explained)
        yield plans


def _walks_rows(step: str) -> bool:
    """A step reading every row of a growing table: a table scan, or a walk of a whole index
    reading the row of each entry. An index-only scan (a count of index entries) and a scan
    of a partial index (the few forgotten or replaced rows) read no row per memory."""
    scan = re.match(r"SCAN (\w+)(?: USING (COVERING )?INDEX (\w+))?", step)
    if scan is None or scan[1] not in TABLES:
        return False
    return not scan[2] and scan[3] not in PARTIAL


def _reads_only_partial(steps: list[str]) -> bool:
    reads = [s for s in steps if re.match(r"(SCAN|SEARCH) (m|memories)\b", s)]
    return bool(reads) and all(any(p in s for p in PARTIAL) for s in reads)


def assert_bounded(plans: list[Plan], sorting: tuple[str, ...] = ()) -> None:
    """No statement walks every row; none sorts, except one whose rows come from a partial
    index (a few) or whose SQL holds one of `sorting` (a ranking of groups)."""
    assert plans
    for sql, steps in plans:
        assert not any(_walks_rows(s) for s in steps), (sql, steps)
        if any("TEMP B-TREE" in s for s in steps):
            assert _reads_only_partial(steps) or any(t in sql for t in sorting), (sql, steps)


def uses(plans: list[Plan], sql_pattern: str, index: str) -> None:
    """Every statement matching `sql_pattern` (there is one) reads `index`."""
    matching = [(sql, steps) for sql, steps in plans if re.search(sql_pattern, sql)]
    assert matching, [sql for sql, _ in plans]
    for sql, steps in matching:
        assert any(f"INDEX {index} " in s + " " for s in steps), (sql, steps)


def test_start_up_maintenance_reads_only_the_forgotten_and_expired(
        engine: MemoryEngine) -> None:
    """F1: the purge of memories forgotten before the grace period read `memories_updated`
    over every memory older than the cutoff, the artifact TTL every memory older than its
    own: ~2 s at 1M memories with nothing to purge, inside the write lock at every start."""
    with planned() as plans:
        report = engine.startup_maintenance()
    assert report is not None and report.soft_deleted == report.expired_artifacts == 0
    assert_bounded(plans)
    uses(plans, r"deleted = 1 AND \+?updated_at <", "memories_forgotten")
    uses(plans, r"kind = \S+ AND updated_at <", "memories_kind")


@pytest.mark.parametrize("filters", [
    RecallFilters(project="big"), RecallFilters(project="p4"), RecallFilters(global_only=True),
    RecallFilters(project="big", since=time.time() - 30 * DAY)],
    ids=["big", "small", "global", "big-since"])
def test_a_projects_page_reads_its_newest_entries_unsorted(engine: MemoryEngine,
                                                           filters: RecallFilters) -> None:
    """F2: a project's page sorted all its memories (half the store: 2.6 s at 1M)."""
    with planned() as plans:
        page = engine.list(filters, 20, 0)
        total = engine.count(filters)
    assert len(page) == 20 and total > 20
    assert_bounded(plans)
    uses(plans, r"ORDER BY m.updated_at DESC", "memories_project_updated")


@pytest.mark.parametrize("column, value, index", [
    ("kind", "artifact", "memories_kind"), ("kind", "absent", "memories_kind"),
    ("kind", "note", "memories_kind"), ("source", "hook", "memories_source")])
def test_a_kind_or_source_page_and_its_count_read_their_own_index(
        engine: MemoryEngine, column: str, value: str, index: str) -> None:
    """F3: a kind or source page walked every memory newest first until it had a page (a
    rare kind: all of them), and its exact count read every row."""
    filters = RecallFilters(**{column: value})
    with planned() as plans:
        page = engine.list(filters, 20, 0)
        total = engine.count(filters)
        bounded = engine.count(filters, at_most=100)
    with engine.store.snapshot() as conn:
        expected = conn.execute(
            f"SELECT count(*) FROM memories WHERE {column} = ? AND deleted = 0 "
            "AND superseded_by IS NULL", (value,)).fetchone()[0]
    assert total == expected and bounded == min(expected, 100)
    assert len(page) == min(expected, 20)
    assert_bounded(plans)
    uses(plans, r"ORDER BY m.updated_at DESC", index)


@pytest.mark.parametrize("filters, index", [
    (RecallFilters(project="p4", kind="note"), "memories_project_updated"),
    (RecallFilters(project="big", kind="artifact"), "memories_kind"),
    (RecallFilters(project="p4", kind="absent"), "memories_kind"),
    (RecallFilters(kind="note", source="hook", project="p7"), "memories_project_updated")],
    ids=["small-project-common-kind", "big-project-rare-kind", "absent-kind", "three"])
def test_a_page_of_two_filters_reads_the_index_of_the_narrower(
        engine: MemoryEngine, filters: RecallFilters, index: str) -> None:
    """F6: a page of a small project's notes walked every note of the store newest first to
    find that project's (0.3 s a page at 1M for a project of two memories), and its count read
    the row of each note."""
    where, params = filters.sql("m")
    with engine.store.snapshot() as conn:
        expected = conn.execute(f"SELECT uid FROM memories m WHERE {where} "
                                "ORDER BY updated_at DESC, id DESC", params).fetchall()
    with planned() as plans:
        page = engine.list(filters, 20, 0)
        total = engine.count(filters)
        bounded = engine.count(filters, at_most=5)
    assert [m.uid for m in page] == [uid for uid, in expected[:20]]
    assert total == len(expected) and bounded == min(len(expected), 5)
    assert_bounded(plans)
    uses(plans, r"ORDER BY m.updated_at DESC", index)
    uses(plans, r"LIMIT \?\) AS page", index)


#: What `values` answered before: a pass over every row (3.4 s at 1M memories).
ROW_BY_ROW_VALUES = ("SELECT {column}, count(*) FROM memories WHERE deleted = 0 AND "
                     "superseded_by IS NULL AND {column} IS NOT NULL AND lower({column}) "
                     "LIKE ? ESCAPE '\\' GROUP BY {column} ORDER BY 2 DESC, 1")


@pytest.mark.parametrize("column, prefix", [
    ("project", ""), ("project", "P"), ("project", "bi"), ("project", "%"), ("kind", "d"),
    ("kind", ""), ("source", "H")])
def test_values_count_index_entries_and_answer_as_before(engine: MemoryEngine, column: str,
                                                         prefix: str) -> None:
    """F4: MCP resources/list and completion read every row for the values of a column."""
    with planned() as plans:
        values, matching = engine.values(column, prefix)
    like = prefix.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    with engine.store.snapshot() as conn:
        before = conn.execute(ROW_BY_ROW_VALUES.format(column=column), (like,)).fetchall()
    assert engine.store.values(column, prefix) == before
    assert values == [v for v, _ in before] and matching == len(before)
    assert_bounded(plans)


#: What `top_injected` answered before: every item joined to its memory, then grouped.
JOINED_TOP = ("SELECT i.uid, count(*) AS n, min(m.content) FROM injection_items i "
              "LEFT JOIN memories m ON m.uid = i.uid GROUP BY i.uid ORDER BY n DESC, i.uid "
              "LIMIT ?")


def test_top_injected_joins_only_the_top_memories(engine: MemoryEngine) -> None:
    """F5: the injection summary joined every injection item to its memory before grouping
    (0.9 s for 500k items); grouped first, the memories of the top ten are read."""
    with engine.store.snapshot() as conn:
        expected = conn.execute(JOINED_TOP, (10,)).fetchall()
    with planned() as plans, engine.store.snapshot() as conn:
        top = engine.store.top_injected(conn, 10)
    assert top == expected and len(top) == 10
    assert_bounded(plans, sorting=("ORDER BY n DESC",))
    (_, steps), = plans
    ranked = next(i for i, s in enumerate(steps) if re.match(r"SCAN t\b", s))
    joined = next(i for i, s in enumerate(steps) if re.match(r"SEARCH m\b", s))
    assert ranked < joined, steps  # the memories are read for the ranked rows only


def test_health_counts_come_from_indexes(engine: MemoryEngine) -> None:
    """F5: /health's counts summed every injection report's characters for its total."""
    with planned() as plans:
        counts = engine.counts()
    assert counts == {"memories": MEMORIES - 2 * MEMORIES // 100,
                      "forgotten": MEMORIES // 100, "injections": 600}
    assert_bounded(plans)
