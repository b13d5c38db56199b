"""PostgreSQL at parity (issue #25): what the faster write and read paths must not change.

A batch import of thousands is all there, in order, deduplicated inside a batch and against
earlier ones; the full-text channel's BM25 equals a plain Python BM25 over PostgreSQL's own
lexemes (its term frequencies now come back as `lexeme:n` pairs matched to terms in Python); the
trigram channel's `strpos` test is ILIKE's; the candidate plan (`newest_first`) never changes a
result; session neighbours read in one statement are the shared loop's; pooled connections plan
every statement for its own parameters.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import pg
import psycopg
import pytest
import semantic_memory_postgres.channels as pgchannels
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores.base import SQLMemoryStore
from semantic_memory_postgres.channels import (
    PgFullTextChannel,
    PgTrigramChannel,
    like_pattern,
    newest_first,
)
from semantic_memory_postgres.schema import SCHEMA_VERSION
from semantic_memory_postgres.store import PostgresStore
from test_postgres_channels import add, conn, search, setup  # noqa: F401 (conn: a fixture)

VOCAB = ['deploy', 'deployment', 'deploying', 'kubectl', 'rollout', 'payment', 'payments',
         'retry', 'webhook', 'cache', 'caching', 'database', 'credential', 'rotate', 'migration',
         'schema', 'index', 'latency', 'budget', 'queue', 'worker', 'scheduler', 'release',
         'hotfix', 'incident', 'review', 'work', 'workload', 'workers', "o'brien", 'back\\slash']


@pytest.fixture
def engine(tmp_path) -> Iterator[MemoryEngine]:  # type: ignore[no-untyped-def]
    eng = MemoryEngine(Settings(db_path=str(tmp_path / "unused.db"), device="cpu",
                                db_url=pg.new_database(), plugins="postgres"))
    yield eng
    eng.close()


def test_a_batch_import_of_thousands_is_all_there_in_order(engine: MemoryEngine) -> None:
    texts = [f"note {i}: {' '.join(random.Random(i).choices(VOCAB, k=8))}" for i in range(3000)]
    batch = [NewMemory(t, kind="note", source="import", project=f"p{i % 7}")
             for i, t in enumerate(texts[:2000])]
    batch.insert(500, NewMemory(texts[10], kind="note", source="import",
                                project="p3"))  # same text and project, same batch
    first = engine.ingest(batch, batch_is_session=False)
    assert [r.status for r in first].count("new") == 2000
    assert first[500].status == "duplicate" and first[500].uid == first[10].uid
    second = engine.ingest([NewMemory(texts[42], project="p0"),
                            *(NewMemory(t) for t in texts[2000:])], batch_is_session=False)
    assert second[0].status == "duplicate" and second[0].uid == first[42].uid
    assert [r.status for r in second[1:]] == ["new"] * 1000
    assert engine.count() == 3000
    with engine.store.snapshot() as c:
        stored = c.execute("SELECT content FROM memories ORDER BY id").fetchall()
    assert [r[0] for r in stored] == texts  # every text once, in the order given
    hits = engine.recall(texts[2999], k=3)
    assert hits and hits[0].memory.content == texts[2999]


def _python_bm25(db: psycopg.Connection, channel: PgFullTextChannel, query: str
                 ) -> list[tuple[int, float]]:
    """BM25 as the channel defines it, computed here from PostgreSQL's lexemes: exact document
    frequencies, positions counted per term (a prefix term over every lexeme it covers)."""
    terms = channel.lexemes(db, query)
    docs: dict[int, dict[str, int]] = {}
    for memory_id, lexeme, n in db.execute(
            "SELECT m.id, u.lexeme, cardinality(u.positions) FROM memories m, unnest(m.tsv) u "
            "WHERE m.deleted = 0"):
        docs.setdefault(memory_id, {})[lexeme] = n
    live = db.execute("SELECT count(*) FROM memories WHERE deleted = 0").fetchone()[0]
    # the channel's average length is over a sample of all rows (here all of them)
    avgdl = db.execute("SELECT avg(length(tsv))::float8 FROM memories").fetchone()[0]

    def tf(doc: dict[str, int], lexeme: str, prefix: bool) -> int:
        return sum(n for lex, n in doc.items()
                   if lex == lexeme or (prefix and lex.startswith(lexeme)))

    idf = []
    for lexeme, prefix in terms:
        df = sum(1 for d in docs.values() if tf(d, lexeme, prefix))
        idf.append(math.log(1 + (live - df + 0.5) / (df + 0.5)))
    scored = []
    for memory_id, doc in docs.items():
        tfs = [tf(doc, lexeme, prefix) for lexeme, prefix in terms]
        if not any(tfs):
            continue
        norm = 1.2 * (1 - 0.75 + 0.75 * len(doc) / avgdl)
        scored.append((memory_id, sum(w * t * 2.2 / (t + norm)
                                      for w, t in zip(idf, tfs, strict=True) if t)))
    scored.sort(key=lambda r: (round(r[1], 9), r[0]), reverse=True)
    return scored


def test_fulltext_bm25_equals_a_python_bm25_over_the_same_lexemes(
        conn: psycopg.Connection) -> None:  # noqa: F811
    fts = PgFullTextChannel()
    setup(conn, fts)
    rng = random.Random(25)
    for i in range(300):
        add(conn, " ".join(rng.choices(VOCAB, k=rng.randint(3, 14))), deleted=i % 50 == 0)
    for query in ["deploy payments", "caching the database credentials", "rotate",
                  "deployment rollout kubectl incident", "webhooks retrying worker queue",
                  "work on the schema", "O'Brien's back\\slash", "work"]:
        expected = _python_bm25(conn, fts, query)[:20]
        with conn.transaction():
            got = fts.search(conn, query, 20, RecallFilters())
        assert [h.id for h in got] == [i for i, _ in expected], query
        assert [h.score for h in got] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_trigram_strpos_is_ilike(conn: psycopg.Connection) -> None:  # noqa: F811
    """The channel tells which terms a candidate holds with strpos(lower(text), lower(term));
    the server agrees with ILIKE '%term%' on case, accents, CJK and LIKE metacharacters."""
    texts = ["Straße und STRASSE", "ÉCOLE élève", "東京タワーの夜景", "100%_done\\path",
             "MixedCase Identifier fooBar"]
    terms = ["straße", "strasse", "école", "élève", "タワー", "100%", "_done", "\\path",
             "foobar", "identifier", "missing"]
    for text in texts:
        for term in terms:
            by_ilike, by_strpos = conn.execute(
                "SELECT %s ILIKE %s, strpos(lower(%s), lower(%s)) > 0",
                (text, like_pattern(term), text, term)).fetchone()
            assert by_ilike == by_strpos, (text, term)


@pytest.mark.parametrize("channel_class", [PgFullTextChannel, PgTrigramChannel])
def test_the_candidate_plan_never_changes_results(
        conn: psycopg.Connection, channel_class: type,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert newest_first(10 * pgchannels.SORT_MAX_FACTOR + 1, 10) == "m.id DESC"
    assert newest_first(10, 10) == "m.id + 0 DESC"
    channel = channel_class()
    setup(conn, channel)
    rng = random.Random(7)
    for i in range(400):
        add(conn, " ".join(rng.choices(VOCAB, k=rng.randint(3, 12))), project=f"p{i % 3}")
    monkeypatch.setattr(channel_class, "budget", 40)  # candidates cut to the newest 40
    queries = ["deploy payments", "cache database", "rotate credential schema", "worker"]
    results = {}
    for factor in (0, 10**9):  # walk the primary key / sort what the text index finds
        monkeypatch.setattr(pgchannels, "SORT_MAX_FACTOR", factor)
        results[factor] = [(search(conn, channel, q, 15),
                            search(conn, channel, q, 15, RecallFilters(project="p1")))
                           for q in queries]
    assert results[0] == results[10**9]


def test_session_neighbours_in_one_statement_are_the_shared_loops(engine: MemoryEngine) -> None:
    """The store's one-statement `adjacent` (a LATERAL pair of index scans per memory) returns
    what the shared two-queries-per-memory loop does: gaps from forgotten and filtered
    memories skipped, session edges, memories outside any session, every window."""
    rng = random.Random(11)
    for session in range(3):  # three sessions of 12, alternating projects and kinds
        engine.ingest([NewMemory(f"session {session} turn {turn}: "
                                 + " ".join(rng.choices(VOCAB, k=6)),
                                 project=f"p{turn % 2}", kind="note" if turn % 3 else "fact")
                       for turn in range(12)])
    engine.ingest([NewMemory("a note outside any session", source="import")],
                  batch_is_session=False)
    listed = engine.store.list(RecallFilters(), limit=100, offset=0)
    for memory in rng.sample(listed, 6):
        engine.store.forget(memory.uid, 0.0)
    memories = engine.store.list(RecallFilters(include_superseded=True), limit=100, offset=0)
    assert any(m.session is None for m in memories)
    store = engine.store
    assert isinstance(store, PostgresStore)
    for filters in (RecallFilters(), RecallFilters(project="p1"), RecallFilters(kind="fact")):
        for window in (1, 2, 5):
            with store.snapshot() as snap:
                one = store.adjacent(snap, memories, window, filters)
                loop = SQLMemoryStore.adjacent(store, snap, memories, window, filters)
            assert one == loop, (filters, window)
            assert sum(len(v) for v in one.values()) > 0


def test_pooled_connections_plan_for_their_own_parameters() -> None:
    store = PostgresStore(pg.new_database())
    try:
        assert store.read().execute("SHOW plan_cache_mode").fetchone()[0] == \
            "force_custom_plan"
        assert store.read().execute("SHOW jit").fetchone()[0] == "off"
    finally:
        store.close()


def test_a_v3_database_loses_its_redundant_hash_index() -> None:
    url = pg.new_database()
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as c:  # as a v3 store left it
        c.execute("CREATE INDEX memories_hash ON memories(content_hash)")
        c.execute("UPDATE store_meta SET value = '3' WHERE key = 'schema_version'")
    store = PostgresStore(url)
    try:
        assert store.schema_version == SCHEMA_VERSION
        assert store.read().execute(
            "SELECT to_regclass('memories_hash')").fetchone()[0] is None
    finally:
        store.close()


def test_a_v4_database_dedups_per_project(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """v4 held one live memory per text over all projects, so a note stored for a second
    project was refused as the first's duplicate and never recalled there."""
    url = pg.new_database()
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as c:  # as a v4 store left it
        c.execute("DROP INDEX memories_live_project_hash")
        c.execute("CREATE UNIQUE INDEX memories_live_hash ON memories(content_hash) "
                  "WHERE deleted = 0")
        c.execute("UPDATE store_meta SET value = '4' WHERE key = 'schema_version'")
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "unused.db"), device="cpu",
                                   db_url=url, plugins="postgres"))
    try:
        assert engine.store.schema_version == SCHEMA_VERSION >= 5
        indexes = {r[0] for r in engine.store.read().execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")}
        assert "memories_live_project_hash" in indexes and "memories_live_hash" not in indexes
        text = "The release script lives in scripts/release.sh and needs GH_TOKEN"
        results = engine.ingest([NewMemory(text, project="web"), NewMemory(text, project="api"),
                                 NewMemory(text, project="api")])
        assert [r.status for r in results] == ["new", "new", "duplicate"]
        hits = engine.recall("release script", k=5, filters=RecallFilters(project="api"))
        assert [h.memory.uid for h in hits] == [results[1].uid]
    finally:
        engine.close()


IDENTIFIER_NOTES = ["The primary database host is db-01.internal",
                    "Errors go to /var/log/app/service.log", "Config lives in src/config.py",
                    "Mail ops@example.com when the pager fires",
                    "Pin lib v1.2.3 until the fix lands", "Run on node 18 (see the .nvmrc)",
                    "The CI job lint-js-ts fails on windows", "Set k8s HPA min to 3",
                    "Wrap it in <kbd>Ctrl-C</kbd> and rate 3.14 at -5 degrees"]


@pytest.mark.parametrize("query", [
    "db-01", "db", "01", "internal", "v1.2.3", "1.2.3", "service.log", "log", "config.py",
    "example.com", "ops", "nvmrc", "k8s", "lint-js-ts", "js", "kbd", "ctrl", "3.14", "14", "5"])
def test_identifiers_are_found_by_their_parts_as_on_sqlite(tmp_path: Path, query: str) -> None:
    """A host, a version, a path, an address: PostgreSQL's parser kept `db-01.internal` or
    `v1.2.3` as one lexeme while the query was cut into words (`db`, `01`), so recall on
    PostgreSQL missed what SQLite's word split finds. Both sides now see the same words."""
    found = []
    for db_url in ("", pg.new_database()):
        engine = MemoryEngine(Settings(db_path=str(tmp_path / f"{bool(db_url)}.db"),
                                       device="cpu", db_url=db_url))
        try:
            engine.ingest([NewMemory(note) for note in IDENTIFIER_NOTES])
            found.append(sorted(h.memory.content for h in engine.recall(query, k=10)))
        finally:
            engine.close()
    sqlite, postgres = found
    assert sqlite and postgres == sqlite
