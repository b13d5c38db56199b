"""Store, recall, forget, list, stats, dedup, TTL and purge on real SQLite files."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.errors import InvalidMemory
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import sqlite as sqlite_store

pytestmark = pytest.mark.both_stores
#: Each store's keyword channels.
KEYWORD = {"sqlite": "porter", "postgresql": "pg_fulltext"}
CHANNELS = {"sqlite": {"porter", "trigram"}, "postgresql": {"pg_fulltext", "pg_trigram"}}

DAY = 86_400


def test_store_then_recall_returns_memory_with_metadata(engine: MemoryEngine) -> None:
    result = engine.store_one(NewMemory("We deploy the billing service with Helm charts",
                                        kind="decision", source="chat", project="infra",
                                        tags=["deploy", "helm"]))
    assert result.status == "new" and result.uid
    hits = engine.recall("how is billing deployed", k=5)
    assert [h.memory.uid for h in hits] == [result.uid]
    hit = hits[0]
    assert hit.memory.kind == "decision" and hit.memory.project == "infra"
    assert hit.memory.tags == ["deploy", "helm"]
    assert hit.ranks[KEYWORD[engine.store.name]] == 1 and hit.score > 0
    data = hit.to_dict()
    assert data["uid"] == result.uid and data["created_at"].endswith("+00:00")


def test_memory_is_searchable_as_soon_as_store_returns(engine: MemoryEngine) -> None:
    for i in range(20):
        uid = engine.store_one(NewMemory(f"unique marker token zq{i}x recorded")).uid
        assert [h.memory.uid for h in engine.recall(f"zq{i}x")] == [uid]


def test_recall_filters(engine: MemoryEngine) -> None:
    engine.ingest([
        NewMemory("redis cache eviction policy is allkeys-lru", project="a", kind="decision"),
        NewMemory("redis cache runs on port 6380", project="b", kind="fact", source="tool"),
    ])
    assert {h.memory.project for h in engine.recall("redis cache")} == {"a", "b"}
    assert [h.memory.project for h in engine.recall("redis", filters=RecallFilters(project="a"))] == ["a"]
    assert [h.memory.kind for h in engine.recall("redis", filters=RecallFilters(kind="fact"))] == ["fact"]
    assert [h.memory.source for h in engine.recall("redis", filters=RecallFilters(source="tool"))] == ["tool"]
    future = time.time() + 3600
    assert engine.recall("redis", filters=RecallFilters(since=future)) == []


def test_forget_hides_memory_and_unknown_uid_is_false(engine: MemoryEngine) -> None:
    uid = engine.store_one(NewMemory("the staging password rotates monthly")).uid
    assert engine.forget(uid) is True
    assert engine.recall("staging rotates") == []
    assert engine.forget(uid) is False
    assert engine.forget("nope") is False
    assert engine.get(uid).deleted is True
    assert engine.stats()["forgotten"] == 1


def test_list_newest_first_with_pagination_and_filters(engine: MemoryEngine) -> None:
    uids = [engine.store_one(NewMemory(f"note number {i}", project="p" if i % 2 else "q")).uid
            for i in range(5)]
    listed = engine.list(limit=3)
    assert [m.uid for m in listed] == uids[::-1][:3]
    assert [m.uid for m in engine.list(limit=3, offset=3)] == uids[::-1][3:]
    assert {m.project for m in engine.list(RecallFilters(project="p"))} == {"p"}
    assert engine.count(RecallFilters(project="q")) == 3


def test_stats_counts_kinds_sources_projects_and_channels(engine: MemoryEngine) -> None:
    engine.ingest([NewMemory("a1", kind="fact", project="x"),
                   NewMemory("a2", kind="decision", project="x", source="tool")])
    stats = engine.stats()
    assert stats["memories"] == 2
    assert stats["by_kind"] == {"fact": 1, "decision": 1} or stats["by_kind"] == {"decision": 1, "fact": 1}
    assert stats["by_project"] == {"x": 2}
    assert {c["name"] for c in stats["channels"]} >= CHANNELS[engine.store.name]
    assert stats["db_bytes"] > 0 and stats["schema_version"] >= 1
    assert stats["store"] == engine.store.name


def test_exact_duplicate_refreshes_timestamp_instead_of_inserting(engine: MemoryEngine) -> None:
    first = engine.store_one(NewMemory("Always run ruff before committing"))
    before = engine.get(first.uid).updated_at
    time.sleep(0.01)
    again = engine.store_one(NewMemory("  Always run   ruff before committing \n"))
    assert again.status == "duplicate" and again.uid == first.uid
    assert engine.get(first.uid).updated_at > before
    assert engine.count() == 1
    batch = engine.ingest([NewMemory("twice in one batch"), NewMemory("twice in one batch")])
    assert [r.status for r in batch] == ["new", "duplicate"] and batch[0].uid == batch[1].uid


def test_the_same_text_in_two_projects_is_two_memories(engine: MemoryEngine) -> None:
    """Duplicates are per project, as recall's filter is: a note that both repositories need
    must be found in each (it used to be refused in the second as the first's duplicate)."""
    text = "The release script lives in scripts/release.sh and needs GH_TOKEN"
    web = engine.store_one(NewMemory(text, project="web"))
    api = engine.store_one(NewMemory(text, project="api"))
    anywhere = engine.store_one(NewMemory(text))
    assert [web.status, api.status, anywhere.status] == ["new", "new", "new"]
    assert len({web.uid, api.uid, anywhere.uid}) == 3
    for project, uid in (("web", web.uid), ("api", api.uid)):
        hits = engine.recall("release script", k=5, filters=RecallFilters(project=project))
        assert [h.memory.uid for h in hits] == [uid]
    again = engine.ingest([NewMemory(text, project="api"), NewMemory(text, project="docs"),
                           NewMemory(text, project="docs")])
    assert [r.status for r in again] == ["duplicate", "new", "duplicate"]
    assert again[0].uid == api.uid and again[1].uid == again[2].uid
    assert engine.count() == 4


def test_forgotten_content_can_be_stored_again(engine: MemoryEngine) -> None:
    uid = engine.store_one(NewMemory("temporary thought")).uid
    engine.forget(uid)
    again = engine.store_one(NewMemory("temporary thought"))
    assert again.status == "new" and again.uid != uid


@pytest.mark.parametrize("bad, field", [
    (NewMemory(""), "content"),
    (NewMemory("   \n"), "content"),
    (NewMemory("x" * 100_001), "content"),
    (NewMemory("bin\x00ary"), "content"),
    (NewMemory("ok", kind="has space"), "kind"),
    (NewMemory("ok", source=""), "source"),
    (NewMemory("ok", tags=["x" * 65]), "tags"),
    (NewMemory("ok", tags="notalist"), "tags"),  # type: ignore[arg-type]
    (NewMemory(123), "content"),  # type: ignore[arg-type]
    (NewMemory("ok", project="  "), "project"),
])
def test_invalid_memory_is_refused_with_field_and_nothing_written(
    engine: MemoryEngine, bad: NewMemory, field: str
) -> None:
    engine.store_one(NewMemory("kept"))
    with pytest.raises(InvalidMemory, match=field):
        engine.ingest([NewMemory("valid one in the same batch"), bad])
    assert [m.content for m in engine.list()] == ["kept"]


def test_a_project_name_is_taken_without_surrounding_whitespace(engine: MemoryEngine) -> None:
    """ "web " (a shell variable, a pasted name) is the project "web": stored under "web "
    it was a project of its own, which no recall in "web" reached."""
    stored = engine.store_one(NewMemory("The web deploy runs from GitHub Actions",
                                        project=" web\n"))
    assert engine.get(stored.uid).project == "web"
    hits = engine.recall("web deploy", filters=RecallFilters(project="web"), with_global=False)
    assert [h.memory.uid for h in hits] == [stored.uid]
    assert engine.recall("web deploy", filters=RecallFilters(project=" web "),
                         with_global=False)[0].memory.uid == stored.uid
    assert engine.update(stored.uid, project=" api ").memory.project == "api"
    assert engine.update(stored.uid, project="   ").memory.project is None  # as "": global


def test_kind_and_source_are_taken_in_lower_case(engine: MemoryEngine) -> None:
    """ "Fact" was a kind of its own: the supersession rule (fact, preference, decision) left
    it alone, so the old port outranked the new one, and `--kind fact` did not list it."""
    old = engine.store_one(NewMemory("The staging database listens on port 6543", kind="Fact",
                                     source="CLI", project="web")).uid
    assert (engine.get(old).kind, engine.get(old).source) == ("fact", "cli")
    new = engine.store_one(NewMemory("The staging database now listens on port 6544",
                                     project="web")).uid
    assert engine.get(old).superseded_by == new
    hits = engine.recall("staging database port", filters=RecallFilters(kind="FACT",
                                                                        source="Chat"))
    assert [h.memory.uid for h in hits] == [new]
    assert engine.update(new, kind="Decision").memory.kind == "decision"


def _sql(engine: MemoryEngine, sql: str) -> str:
    """`sql` with the store's own parameter marks (psycopg writes %s)."""
    return sql.replace("?", engine.store.placeholder)


def _age(engine: MemoryEngine, uid: str, days: float) -> None:
    with engine.store.write() as conn:
        ts = time.time() - days * DAY
        conn.execute(_sql(engine, "UPDATE memories SET created_at = ?, updated_at = ? WHERE uid = ?"),
                     (ts, ts, uid))


def test_purge_applies_ttl_tiers_and_removes_forgotten(settings: Settings) -> None:
    engine = MemoryEngine(replace(settings, ttl_artifact_days=90))
    old_artifact = engine.store_one(NewMemory("old tool output", kind="artifact")).uid
    new_artifact = engine.store_one(NewMemory("fresh tool output", kind="artifact")).uid
    old_decision = engine.store_one(NewMemory("old decision", kind="decision")).uid
    forgotten = engine.store_one(NewMemory("forget me")).uid
    for uid in (old_artifact, old_decision):
        _age(engine, uid, 91)
    engine.forget(forgotten)
    injection = engine.record_injection(uids=[new_artifact], harness="test")
    with engine.store.write() as conn:
        conn.execute(_sql(engine, "UPDATE injections SET ts = ? WHERE id = ?"),
                     (time.time() - 91 * DAY, injection))

    report = engine.purge()
    assert report.to_dict() == {"soft_deleted": 1, "expired_artifacts": 1,
                                "expired_injections": 1, "vacuumed": True}
    assert engine.get(old_artifact) is None and engine.get(forgotten) is None
    assert engine.get(new_artifact) is not None and engine.get(old_decision) is not None
    # FTS rows went with the memories: the index stays consistent.
    assert engine.recall("old tool output")[0].memory.uid in (new_artifact,)
    assert engine.stats()["injections"]["total"] == 0
    assert engine.purge().to_dict() == {"soft_deleted": 0, "expired_artifacts": 0,
                                        "expired_injections": 0, "vacuumed": False}
    engine.close()


def test_ttl_zero_never_expires(settings: Settings) -> None:
    engine = MemoryEngine(replace(settings, ttl_artifact_days=0))
    uid = engine.store_one(NewMemory("ancient tool output", kind="artifact")).uid
    _age(engine, uid, 10_000)
    assert engine.purge().expired_artifacts == 0 and engine.get(uid) is not None
    engine.close()


def test_startup_maintenance_respects_setting(settings: Settings) -> None:
    on = MemoryEngine(replace(settings, maintenance_on_start=True, forget_grace_days=0))
    uid = on.store_one(NewMemory("to be purged")).uid
    on.forget(uid)
    assert on.startup_maintenance().soft_deleted == 1
    off = MemoryEngine(replace(settings, maintenance_on_start=False))
    assert off.startup_maintenance() is None
    on.close(), off.close()


@pytest.mark.sqlite_only
def test_fts_index_stays_consistent_after_deletes(engine: MemoryEngine) -> None:
    uids = [engine.store_one(NewMemory(f"consistency probe {i}")).uid for i in range(10)]
    for uid in uids[:5]:
        engine.forget(uid)
    engine.purge()
    conn = sqlite3.connect(engine.store.path)
    for table in ("memories_fts", "memories_fts_tri"):
        conn.execute(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
    conn.close()
    assert len(engine.recall("consistency probe", k=50)) == 5


@pytest.mark.sqlite_only
def test_wal_gives_space_back_after_a_bulk_write(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "WAL_SIZE_LIMIT", 256 * 1024)
    engine = MemoryEngine(settings)
    try:
        filler = " ".join(f"word{i}" for i in range(200))
        engine.ingest([NewMemory(f"{i} {filler}") for i in range(3000)])  # several MB of WAL
        wal = Path(f"{engine.store.path}-wal")
        peak = wal.stat().st_size
        engine.store.optimize()
        engine.store_one(NewMemory("one more after the bulk write"))
        assert peak > 4 * 256 * 1024
        assert wal.stat().st_size <= 256 * 1024 + 64 * 1024
        assert engine.count() == 3001
    finally:
        engine.close()


def test_a_nul_in_a_filter_matches_nothing_and_in_a_query_is_a_space(
        engine: MemoryEngine, caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL text cannot hold a NUL and psycopg refuses to send one (a 500 for
    `/api/memories?project=p%00q`, a channel failing): the PostgreSQL store answers as SQLite
    does. A filter or lookup holding a NUL matches nothing, a query's NUL cuts words as a space."""
    uid = engine.ingest([NewMemory("the release train leaves on thursdays", project="p")])[0].uid
    engine.store.record_injection({"ts": time.time(), "harness": "h", "hook": "prompt",
                                   "project": "p", "query": "release\0train", "chars": 10,
                                   "session": "s1"}, [uid])
    nul = RecallFilters(project="p\0q")
    assert engine.store.list(nul, 10, 0) == [] and engine.store.count(nul) == 0
    assert engine.recall("release train", k=5, filters=nul) == []
    assert engine.store.get(uid + "\0") is None
    assert engine.store.injected_in_session("s1\0") == set()
    assert engine.store.injections("h\0", None, 10, 0) == []
    assert engine.store.injected_in_session("s1") == {uid}
    assert engine.store.values("project", "p\0q") == []
    assert engine.store.values("project", "p") == [("p", 1)]
    for query in ("release\0train", "thurs\0days", "\0release"):
        assert [h.memory.uid for h in engine.recall(query, k=5)] == [uid], query
    assert "failed" not in caplog.text


def test_accents_are_folded_by_the_keyword_search_at_every_size(engine: MemoryEngine,
                                                                store_kind: str) -> None:
    """"resume" finds "résumé" on SQLite (porter's `remove_diacritics`) and on PostgreSQL's own
    full-text search (`memory_fold`), not only once a big store's keyword mirror serves; and
    the other way round."""
    keyword = KEYWORD[store_kind]
    uid = engine.ingest([NewMemory("Café naïve résumé"),
                         NewMemory("the release train leaves on thursdays")])[0].uid
    for query in ("resume", "cafe naive", "RÉSUMÉ", "résumé", "naïve"):
        hits = engine.recall(query, k=5)
        assert hits[0].memory.uid == uid and keyword in hits[0].ranks, query
    plain = engine.ingest([NewMemory("a plain resume for the cafe")])[0].uid
    assert {h.memory.uid for h in engine.recall("résumé", k=2)} == {uid, plain}


def test_a_threads_read_connection_closes_when_the_thread_ends(tmp_path: Path) -> None:
    """The service reads on anyio's worker threads, which end after 10 s idle and are started
    anew by the next burst of requests. Each thread's read connection stayed open for good
    (a list kept them for `close`): 6 more open files per burst, until every read failed
    with "unable to open database file". A finished thread's connection is closed now."""
    import gc
    import os
    import threading

    from semantic_memory.stores.sqlite import SQLiteStore

    db = tmp_path / "m.db"
    store = SQLiteStore(db)

    def open_files() -> int:
        return sum(os.path.realpath(f"/proc/self/fd/{fd}") == str(db)
                   for fd in os.listdir("/proc/self/fd"))

    try:
        before = open_files()
        for _ in range(10):  # ten bursts of eight worker threads, each reading once
            threads = [threading.Thread(target=lambda: store.read().execute("SELECT 1"))
                       for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            gc.collect()
        # SQLite's unix VFS keeps a closed connection's descriptor while another connection
        # of the process holds a lock on the file, and gives it to the next one it opens: at
        # most about one burst's worth stays open (it was 80 after ten bursts).
        assert open_files() <= before + 8
        assert store.read().execute("SELECT count(*) FROM memories").fetchone() == (0,)
    finally:
        store.close()
    assert open_files() == 0


def test_close_leaves_a_reader_another_live_thread_is_using(tmp_path: Path) -> None:
    """`close` closed every thread's read connection, one a channel's search that outlived
    its deadline was still using (released at shutdown): its next statement met a closed
    connection, and a close racing a statement crashed the process in the sqlite3 module.
    Another live thread's reader now closes with its thread."""
    import threading

    from semantic_memory.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    opened, closed = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def search_outliving_close() -> None:
        try:
            with store.snapshot() as conn:
                conn.execute("SELECT count(*) FROM memories").fetchone()
                opened.set()
                assert closed.wait(30)
                conn.execute("SELECT count(*) FROM memories").fetchone()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    worker = threading.Thread(target=search_outliving_close)
    worker.start()
    assert opened.wait(30)
    store.close()
    closed.set()
    worker.join(30)
    assert not worker.is_alive() and failures == []
