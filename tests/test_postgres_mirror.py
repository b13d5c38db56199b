"""The PostgreSQL store's keyword mirror (semantic_memory_postgres/mirror.py) against a real
server: it answers as the SQLite channels do, follows every kind of change another service
makes before each search, is never built below its threshold nor followed inside a write
transaction, and a damaged, stale or lagging mirror never costs an answer."""

from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pg
import psycopg
import pytest
import semantic_memory_postgres.mirror as mirror_module
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_postgres.channels import PgFullTextChannel, PgTrigramChannel
from semantic_memory_postgres.mirror import KeywordMirror
from semantic_memory_postgres.schema import SCHEMA_VERSION
from test_service_support import start_service

TEXTS = [f"note {i}: the {word} job runs on the {host} host every {day}"
         for i, (word, host, day) in enumerate(
             (w, h, d) for w in ("backup", "billing", "deploy", "reindex")
             for h in ("alpha", "beta", "gamma") for d in ("monday", "friday"))]
TEXTS += ["the quokkaService handler logs to /var/log/quokka-svc.log",
          "部署脚本在周五运行", "decided to pin psycopg to 3.2 because of the pool bug"]
QUERIES = ["billing job on beta", "friday deploy", "quokka", "svc.log", "周五运行", "pool bug",
           "psycopg pin decision", "reindex gamma monday"]


def make(db_url: str, folder: Path, *, mirror_min: int = 0, mirror: str = "",
         serving: bool = True) -> MemoryEngine:
    env = {"MEMORY_PG_MIRROR_MIN": str(mirror_min), "MEMORY_PG_MIRROR": mirror}
    return MemoryEngine(Settings.from_env(env, db_path=str(folder / "memory.db"), db_url=db_url,
                                          device="cpu", serving=serving))


def mirror_of(engine: MemoryEngine) -> KeywordMirror:
    fulltext = next(c for c in engine.channels if isinstance(c, PgFullTextChannel))
    trigram = next(c for c in engine.channels if isinstance(c, PgTrigramChannel))
    assert fulltext.mirror is trigram.mirror is not None
    return fulltext.mirror


def ready(engine: MemoryEngine) -> KeywordMirror:
    """The engine's mirror once built and in use (a recall starts the build, the next opens it)."""
    mirror = mirror_of(engine)
    engine.recall("warm up", k=1)
    mirror.wait(60)
    engine.recall("warm up", k=1)
    assert mirror.ready
    return mirror


def contents(engine: MemoryEngine, query: str, **filters: object) -> list[str]:
    return [h.memory.content for h in engine.recall(query, k=5, filters=RecallFilters(**filters))]


@pytest.fixture
def db_url() -> str:
    return pg.new_database()


@pytest.fixture
def engine(db_url: str, tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = make(db_url, tmp_path / "a")
    eng.ingest([NewMemory(t, project="ops") for t in TEXTS])
    yield eng
    eng.close()


def test_the_mirror_answers_as_the_sqlite_channels_do(engine: MemoryEngine, tmp_path: Path
                                                      ) -> None:
    """Over the same memories, each keyword channel's hits on the mirror are the SQLite
    channel's hits on a SQLite store, and a recall (a hook's, vouched for, too) is the SQLite
    store's recall."""
    ready(engine)
    sqlite = MemoryEngine(Settings(db_path=str(tmp_path / "sqlite.db"), device="cpu",
                                   plugins="bm25_porter,bm25_trigram"))
    others = [NewMemory("the billing job on beta moved to the web team", project="web"),
              NewMemory("never deploy on friday", kind="decision"),
              NewMemory("the reindex job on gamma is global", kind="preference")]
    try:
        sqlite.ingest([NewMemory(t, project="ops") for t in TEXTS])
        for service in (engine, sqlite):
            service.ingest(others)
        names = {"pg_fulltext": "porter", "pg_trigram": "trigram"}
        pg_channels = {c.name: c for c in engine.channels if c.name in names}
        sqlite_channels = {c.name: c for c in sqlite.channels}
        every_filter = [RecallFilters(), RecallFilters(project="ops"), RecallFilters(kind="fact"),
                        RecallFilters(project="web"), RecallFilters(global_only=True),
                        RecallFilters(kind="decision"), RecallFilters(since=0.0, source="chat")]
        answered: Counter[str] = Counter()
        for query in QUERIES:
            for (pg_name, sqlite_name), filters in itertools.product(names.items(), every_filter):
                with engine.store.snapshot() as conn:
                    ours = pg_channels[pg_name].search(conn, query, 5, filters)
                with sqlite.store.snapshot() as conn:
                    theirs = sqlite_channels[sqlite_name].search(conn, query, 5, filters)
                assert [(h.id, round(h.score, 9)) for h in ours] == \
                    [(h.id, round(h.score, 9)) for h in theirs], (query, pg_name, filters)
                answered[repr(filters)] += bool(ours)
            assert contents(engine, query) == contents(sqlite, query), query
            vouched = [[(h.memory.content, h.signals.get("coverage"))
                        for h in service.recall(query, k=5, relevant_only=True)]
                       for service in (engine, sqlite)]
            assert vouched[0] == vouched[1], query  # what a hook would inject
        assert len(answered) == len(every_filter) and all(answered.values())  # none vacuous
        assert contents(engine, "quokka")[0].startswith("the quokkaService")
        assert contents(engine, "周五运行")[0] == "部署脚本在周五运行"
    finally:
        sqlite.close()


def test_every_change_another_service_makes_is_searched_at_once(
        engine: MemoryEngine, db_url: str, tmp_path: Path) -> None:
    """Inserts, edits, project moves, supersession, forgetting and purging made through a
    service without a mirror reach the next search of the one with it."""
    mirror = ready(engine)
    other = make(db_url, tmp_path / "b", mirror="off")
    try:
        other.ingest([NewMemory("the wombat cache warms at dawn", project="ops")])
        assert contents(engine, "wombat cache") == ["the wombat cache warms at dawn"]
        uid = engine.recall("wombat", k=1)[0].memory.uid

        other.update(uid, content="the wombat cache warms at dusk")
        assert contents(engine, "wombat dusk")[0] == "the wombat cache warms at dusk"
        assert contents(engine, "dawn") == []

        other.update(uid, project="web")
        assert contents(engine, "wombat", project="ops") == []
        assert contents(engine, "wombat", project="web") == ["the wombat cache warms at dusk"]

        other.ingest([NewMemory("the wombat cache now warms at noon", project="web")])
        newer = engine.recall("wombat noon", k=1)[0].memory
        with other.store.write() as conn:
            other.store.supersede(conn, [engine.store.get(uid).id], newer.uid)
        assert contents(engine, "wombat cache", project="web") == [
            "the wombat cache now warms at noon"]

        assert other.forget(newer.uid)
        assert "the wombat cache now warms at noon" not in contents(engine, "wombat noon")
        file = sqlite3.connect(mirror._path)  # the forgotten text left the mirror too
        assert file.execute("SELECT count(*) FROM memories WHERE content LIKE '%noon%'"
                            ).fetchone()[0] == 0

        assert other.purge().soft_deleted == 1
        assert contents(engine, "wombat") == ["the wombat cache warms at dusk"]
        assert file.execute("SELECT count(*) FROM memories").fetchone()[0] == \
            other.counts()["memories"] + other.counts().get("forgotten", 0)
        assert mirror.ready  # every answer above came from the mirror
    finally:
        other.close()


def test_services_sharing_a_folder_share_one_mirror(engine: MemoryEngine, db_url: str,
                                                     tmp_path: Path) -> None:
    mirror = ready(engine)
    second = make(db_url, tmp_path / "a")
    try:
        assert ready(second)._path == mirror._path
        second.ingest([NewMemory("the narwhal queue drains hourly", project="ops")])
        engine.ingest([NewMemory("the narwhal queue has a dead-letter topic", project="ops")])
        for service in (engine, second):
            assert sorted(contents(service, "narwhal queue")) == [
                "the narwhal queue drains hourly", "the narwhal queue has a dead-letter topic"]
    finally:
        second.close()


def test_stats_say_whether_the_mirror_answers(db_url: str, tmp_path: Path) -> None:
    def status(engine: MemoryEngine) -> str | None:
        channels = {c["name"]: c["status"] for c in engine.stats()["channels"]}
        assert channels["pg_trigram"] is None  # one line for the mirror both channels use
        return channels["pg_fulltext"]

    off = make(db_url, tmp_path / "off", mirror="off")
    service = make(db_url, tmp_path / "a")
    try:
        assert status(off) == "keyword mirror off"
        assert status(service).startswith("no keyword mirror yet")
        ready(service)
        assert status(service).startswith("keyword mirror ") and status(service).endswith(
            "MB in " + str(tmp_path / "a" / "pg-mirror") + ", in use")
        one_off = make(db_url, tmp_path / "a", serving=False)
        try:
            assert status(one_off).endswith(", used from the next search")
        finally:
            one_off.close()
    finally:
        off.close()
        service.close()


def test_no_mirror_below_its_threshold_or_when_off(db_url: str, tmp_path: Path) -> None:
    for folder, eng in ((tmp_path / "small", make(db_url, tmp_path / "small", mirror_min=100)),
                        (tmp_path / "off", make(db_url, tmp_path / "off", mirror="off"))):
        try:
            eng.ingest([NewMemory(t) for t in TEXTS])
            assert contents(eng, "quokka")[0].startswith("the quokkaService")
            mirror = next(c for c in eng.channels if isinstance(c, PgFullTextChannel)).mirror
            if mirror is not None:
                mirror.wait(60)
                assert not mirror.ready
            assert not (folder / "pg-mirror").exists()
        finally:
            eng.close()


def test_a_one_off_command_uses_a_mirror_but_never_builds_one(db_url: str, tmp_path: Path
                                                              ) -> None:
    """A process that is not a service (`memory-mcp recall`) would leave a build half done
    when it exits: it searches PostgreSQL until a service has built the mirror, then uses it."""
    one_off = make(db_url, tmp_path / "a", serving=False)
    try:
        one_off.ingest([NewMemory(t) for t in TEXTS])
        assert contents(one_off, "quokka")[0].startswith("the quokkaService")
        mirror_of(one_off).wait(60)
        assert not mirror_of(one_off).ready and not (tmp_path / "a" / "pg-mirror").exists()
        service = make(db_url, tmp_path / "a")
        try:
            ready(service)
        finally:
            service.close()
        assert contents(one_off, "quokka")[0].startswith("the quokkaService")
        assert mirror_of(one_off).ready
    finally:
        one_off.close()


def test_a_write_transaction_is_never_followed(engine: MemoryEngine) -> None:
    """A search inside a write transaction (which may roll back) is PostgreSQL's own."""
    mirror = ready(engine)
    fulltext = next(c for c in engine.channels if isinstance(c, PgFullTextChannel))
    with pytest.raises(RuntimeError), engine.store.write() as conn:
        conn.execute("UPDATE memories SET content = 'the ibis ledger' WHERE id = 1")
        hits = fulltext.search(conn, "ibis ledger", 3, RecallFilters())
        assert [h.id for h in hits] == [1]  # PostgreSQL sees its own transaction's write
        raise RuntimeError("roll back")
    assert contents(engine, "ibis ledger") == []
    assert mirror.ready


def test_a_damaged_mirror_is_built_again_while_postgresql_answers(
        engine: MemoryEngine, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = ready(engine)._path
    engine.close()
    path.write_bytes(b"not a database" * 100)
    Path(f"{path}-wal").unlink(missing_ok=True)
    again = make(db_url, tmp_path / "a")
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory.postgres"):
            assert contents(again, "quokka")[0].startswith("the quokkaService")
        assert [r.getMessage() for r in caplog.records if "keyword mirror" in r.getMessage()]
        assert ready(again)._path == path
        assert contents(again, "quokka")[0].startswith("the quokkaService")
    finally:
        again.close()


def test_a_mirror_another_service_is_writing_is_not_waited_for(
        engine: MemoryEngine, db_url: str, tmp_path: Path) -> None:
    """While another service holds the mirror file's write lock, a search that has changes to
    apply answers from PostgreSQL (after SQLite's short busy wait), and the mirror stays."""
    mirror = ready(engine)
    other = make(db_url, tmp_path / "b", mirror="off")
    holder = sqlite3.connect(mirror._path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        other.ingest([NewMemory("the osprey export runs at midnight", project="ops")])
        assert contents(engine, "osprey export") == ["the osprey export runs at midnight"]
        holder.execute("ROLLBACK")
        assert mirror.ready and mirror._path.exists()
        assert contents(engine, "osprey export") == ["the osprey export runs at midnight"]
        assert sqlite3.connect(mirror._path).execute(
            "SELECT count(*) FROM memories WHERE content LIKE '%osprey%'").fetchone()[0] == 1
    finally:
        holder.close()
        other.close()


def test_a_store_restored_to_an_earlier_state_is_mirrored_again(
        engine: MemoryEngine, db_url: str) -> None:
    """The change log going back (a backup restored under a running service) drops the
    mirror; PostgreSQL answers until it is built again from the restored store."""
    mirror = ready(engine)
    engine.ingest([NewMemory("the pelican report is due on thursday", project="ops")])
    assert contents(engine, "pelican report")
    with psycopg.connect(db_url, autocommit=True) as conn:  # as a restore would leave it
        conn.execute("DELETE FROM memories WHERE content LIKE '%pelican%'")
        conn.execute("DELETE FROM memories_removed")
        conn.execute("SELECT setval('memories_change_seq', "
                     "(SELECT max(change_seq) FROM memories))")
    assert contents(engine, "pelican report") == []
    mirror.wait(60)
    assert contents(engine, "pelican report") == []
    assert ready(engine) is mirror
    assert contents(engine, "quokka")[0].startswith("the quokkaService")


def test_a_restart_catches_up_and_a_long_backlog_waits_for_no_one(
        engine: MemoryEngine, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changes made while a service was down are applied by its first search; a backlog
    longer than one search may apply goes in the background while PostgreSQL answers."""
    ready(engine)
    engine.close()
    other = make(db_url, tmp_path / "b", mirror="off")
    try:
        other.ingest([NewMemory(f"the heron batch {i} finished", project="ops")
                      for i in range(5)])
        again = make(db_url, tmp_path / "a")
        try:
            assert len(contents(again, "heron batch")) == 5
            assert mirror_of(again).ready  # opened, caught up, answered
        finally:
            again.close()
        other.ingest([NewMemory(f"the egret batch {i} finished", project="ops")
                      for i in range(5)])
        monkeypatch.setattr(mirror_module, "SYNC_LIMIT", 2)
        lagging = make(db_url, tmp_path / "a")
        try:
            assert len(contents(lagging, "egret batch")) == 5  # PostgreSQL's own answer
            mirror = mirror_of(lagging)
            mirror.wait(60)
            assert len(contents(lagging, "egret batch")) == 5
            assert mirror.ready
        finally:
            lagging.close()
    finally:
        other.close()


def test_changes_are_numbered_in_commit_order(engine: MemoryEngine, db_url: str) -> None:
    """A write that bypasses the store's lock still waits for it (the trigger takes it), so a
    change committed later never carries a lower number than one a follower has seen."""
    done = threading.Event()

    def bypass() -> None:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("UPDATE memories SET kind = 'decision' WHERE id = 2")
        done.set()

    with engine.store.write() as conn:
        conn.execute("UPDATE memories SET kind = 'decision' WHERE id = 1")
        writer = threading.Thread(target=bypass)
        writer.start()
        time.sleep(0.3)
        assert not done.is_set()  # held back by the write lock
    writer.join(10)
    with psycopg.connect(db_url) as conn:
        first, second = (conn.execute("SELECT change_seq FROM memories WHERE id = %s", (i,)
                                      ).fetchone()[0] for i in (1, 2))
    assert first < second


def test_a_store_upgraded_to_the_change_log_is_mirrored_whole(db_url: str, tmp_path: Path
                                                              ) -> None:
    """A store of schema 6 (no change log) gets numbers for what it holds, and a name."""
    eng = make(db_url, tmp_path / "a", mirror="off")
    eng.ingest([NewMemory(t) for t in TEXTS])
    eng.close()
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER memories_change ON memories; "
                     "DROP TRIGGER memories_removal ON memories; "
                     "DROP TABLE memories_removed; ALTER TABLE memories DROP COLUMN change_seq; "
                     "DELETE FROM store_meta WHERE key = 'store_id'; "
                     "UPDATE store_meta SET value = '6' WHERE key = 'schema_version'")
    upgraded = make(db_url, tmp_path / "a")
    try:
        assert upgraded.store.schema_version == SCHEMA_VERSION
        mirror = ready(upgraded)
        rows = sqlite3.connect(mirror._path).execute("SELECT count(*) FROM memories").fetchone()
        assert rows[0] == len(TEXTS)
        assert contents(upgraded, "svc.log")[0].startswith("the quokkaService")
    finally:
        upgraded.close()


def test_two_real_services_each_search_the_others_writes_in_their_mirrors(tmp_path: Path
                                                                          ) -> None:
    """`memory-mcp serve` twice on one database, each with its own mirror: every memory stored
    through one, while both write, is the top hit of a recall through the other at once."""
    url = pg.new_database()
    services = [start_service(tmp_path / f"svc{n}", "serve", MEMORY_DB_URL=url,
                              MEMORY_PG_MIRROR_MIN="0", MEMORY_MAINTENANCE_ON_START="0")
                for n in range(2)]
    try:
        with services[0].client() as http:  # the first recall starts the builds
            http.post("/recall", json={"query": "warm up"}).raise_for_status()
        with services[1].client() as http:
            http.post("/recall", json={"query": "warm up"}).raise_for_status()
        failures: list[str] = []

        def write_and_check(n: int) -> None:
            mine, theirs = services[n], services[1 - n]
            for i in range(15):
                text = f"service {n} heard the kestrel{n}x{i} alarm"
                with mine.client() as http:
                    http.post("/ingest", json={"content": text, "project": "team"}
                              ).raise_for_status()
                with theirs.client() as http:
                    hits = http.post("/recall", json={"query": f"kestrel{n}x{i} alarm",
                                                      "project": "team"}).json()["items"]
                if not hits or hits[0]["content"] != text:
                    failures.append(text)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(write_and_check, range(2)))
        assert failures == []
        for service in services:  # both searched from their own mirror, which after one more
            with service.client() as http:  # search holds all 30
                http.post("/recall", json={"query": "kestrel alarm"}).raise_for_status()
            files = list((service.tmp / "pg-mirror").glob("*.db"))
            assert len(files) == 1
            count = sqlite3.connect(files[0]).execute(
                "SELECT count(*) FROM memories WHERE content LIKE '%kestrel%'").fetchone()[0]
            assert count == 30
            log = (service.tmp / "stderr.log").read_text()  # the store it serves, by its URL
            assert "with db postgresql://" in log and "memory.db" not in log, log
    finally:
        for service in services:
            service.stop()
