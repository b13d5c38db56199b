"""The BM25 hot paths: batched ingest, prefix terms, the bounded OR query, the unfiltered search."""

from __future__ import annotations

import pytest
from semantic_memory import keywords
from semantic_memory.channels import Channel, Prepares
from semantic_memory.stores import fts5
from semantic_memory.stores.fts5 import MatchCounts
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine


def search_contents(engine: MemoryEngine, name: str, query: str, filters=None) -> list[str]:
    channel = next(c for c in engine.channels if c.name == name)
    with engine.store.snapshot() as conn:
        hits = channel.search(conn, query, 10, filters or RecallFilters())
        memories = engine.store.load(conn, [h.id for h in hits])
    return [memories[h.id].content for h in hits]


def test_batch_ingest_dedups_within_the_batch_and_against_the_store(engine: MemoryEngine) -> None:
    first = engine.store_one(NewMemory("alpha beta gamma"))
    results = engine.ingest([
        NewMemory("one new line", project="p"),
        NewMemory("alpha   beta gamma"),  # same text after whitespace collapse
        NewMemory("one new line", project="p"),
        NewMemory("two new line", tags=["b", "a", "a"], created_at=1_000.0),
    ])
    assert [r.status for r in results] == ["new", "duplicate", "duplicate", "new"]
    assert results[1].uid == first.uid and results[2].uid == results[0].uid
    assert engine.count() == 3
    listed = {m.content: m for m in engine.list()}
    assert listed["two new line"].tags == ["a", "b"]
    assert listed["two new line"].created_at == 1_000.0
    assert listed["one new line"].project == "p"
    by_id = sorted(listed.values(), key=lambda m: m.id)  # ids follow the batch's order
    assert [m.content for m in by_id] == ["alpha beta gamma", "one new line", "two new line"]
    for text in ("one new line", "two new line"):  # indexed by both channels' triggers
        assert search_contents(engine, "porter", text.split()[0])[:1] == [text]
        assert search_contents(engine, "trigram", text.split()[0])[:1] == [text]


def test_porter_matches_long_terms_as_stemmed_prefixes(engine: MemoryEngine) -> None:
    engine.store_one(NewMemory("Stay healthy and keep painting"))
    engine.store_one(NewMemory("The car is red"))
    assert search_contents(engine, "porter", "health") == ["Stay healthy and keep painting"]
    assert search_contents(engine, "porter", "paint") == ["Stay healthy and keep painting"]
    assert search_contents(engine, "porter", "ca") == []  # short terms stay exact


def test_bounded_query_is_exact_below_the_budget_and_drops_common_terms_above(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory(f"common filler note {i}") for i in range(40)]
                  + [NewMemory("common zebra sighting")])
    query = "common zebra"
    exact = search_contents(engine, "porter", query)
    assert exact[0] == "common zebra sighting" and len(exact) == 10
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 5)
    assert search_contents(engine, "porter", query) == ["common zebra sighting"]  # "common" cut
    assert search_contents(engine, "porter", "common")[:1]  # a lone term is never cut
    assert search_contents(engine, "trigram", query) == ["common zebra sighting"]


def test_cut_query_widens_when_a_filter_leaves_too_few(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory("shared words first", project="b")]  # b spans every id
                  + [NewMemory(f"rare{i % 3} shared words {i}", project="a") for i in range(30)]
                  + [NewMemory("shared words only here", project="b")])
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 10)
    hits = search_contents(engine, "porter", "rare0 shared", RecallFilters(project="b"))
    assert sorted(hits) == ["shared words first", "shared words only here"]
    hits = search_contents(engine, "porter", "rare0 shared", RecallFilters(kind="fact"))
    assert len(hits) == 10 and all("rare0" in h for h in hits[:10])
    assert search_contents(engine, "porter", "shared", RecallFilters(project="none")) == []


def test_unfiltered_search_skips_soft_deleted_memories(engine: MemoryEngine) -> None:
    uids = [engine.store_one(NewMemory(f"needle number {i}")).uid for i in range(30)]
    for uid in uids[:25]:
        engine.forget(uid)
    for name in ("porter", "trigram"):
        found = search_contents(engine, name, "needle")
        assert sorted(found) == sorted(f"needle number {i}" for i in range(25, 30))
    assert len(engine.recall("needle", k=10)) == 5


def test_row_by_row_path_still_used_for_near_duplicate_channels(tmp_path) -> None:
    class NearDup(Channel, Prepares):
        name = "neardup"
        indexed = 0

        def prepare(self, memories):
            return [None] * len(memories)

        def index(self, conn, memories, prepared=None):
            self.indexed += len(memories)

        def search(self, conn, query, k, filters):
            return []

        def find_duplicate(self, conn, item, prepared):
            return None

    channel = NearDup()

    class Plugin:
        @staticmethod
        @__import__("semantic_memory.hookspecs", fromlist=["hookimpl"]).hookimpl
        def register_channels(register, settings):
            register(channel)

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "n.db"), plugins="bm25_porter"),
                          plugins=[Plugin])
    try:
        results = engine.ingest([NewMemory("x one"), NewMemory("x two"), NewMemory("x one")])
        assert [r.status for r in results] == ["new", "new", "duplicate"]
        assert channel.indexed == 2
    finally:
        engine.close()


def test_a_term_commoner_than_the_budget_ranks_its_newest_matches(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory(f"common note {i}") for i in range(30)])
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 8)
    for name in ("porter", "trigram"):
        found = search_contents(engine, name, "common")
        budget = 8 if name == "porter" else 2  # trigram: a quarter of the budget
        assert sorted(found) == sorted(f"common note {i}" for i in range(30 - budget, 30))
    assert len(search_contents(engine, "porter", "common", RecallFilters(project="x"))) == 0


def test_left_out_common_terms_still_score_what_the_cut_query_matches(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory(f"common filler note {i}") for i in range(10)]
                  + [NewMemory(f"other filler line {i}") for i in range(40)]
                  + [NewMemory("zebra sighting"),
                     NewMemory("common zebra sighting")])
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 5)  # "common" (11 memories) is cut
    assert search_contents(engine, "porter", "common zebra") == [
        "common zebra sighting", "zebra sighting"]
    monkeypatch.setattr(fts5, "RESCORE_FACTOR", 0)  # without rescoring: length decides
    assert search_contents(engine, "porter", "common zebra") == [
        "zebra sighting", "common zebra sighting"]


def test_two_left_out_common_terms_together_still_select_a_memory(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory(f"caroline filler note {i}") for i in range(30)]
                  + [NewMemory(f"started filler line {i}") for i in range(30)]
                  + [NewMemory("painting zebra"),
                     NewMemory("caroline started painting")])  # no rare term
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 5)  # "caroline" and "started" are cut
    found = search_contents(engine, "porter", "when caroline started zebra")
    assert found[:2] == ["painting zebra", "caroline started painting"]
    monkeypatch.setattr(fts5, "MAX_COMMON_PAIRS", 0)  # without the pairs it is missed
    assert search_contents(engine, "porter", "when caroline started zebra") == ["painting zebra"]


def test_match_counts_reuse_only_what_their_bounds_settle(engine: MemoryEngine) -> None:
    engine.ingest([NewMemory(f"common note {i}") for i in range(20)]
                  + [NewMemory(f"rare{i} thing") for i in range(3)])
    counts, statements = MatchCounts(), []
    conn = engine.store.read()
    conn.set_trace_callback(  # the counting statements only, not FTS5's own
        lambda sql: sql.startswith("SELECT count(*) FROM (") and statements.append(sql))
    try:
        hi = engine.count()
        assert counts.count(conn, "memories_fts", '"common"', 6, (1, hi)) == 6  # capped
        assert counts.count(conn, "memories_fts", '"rare1"', 6, (1, hi)) == 1  # exact
        asked = len(statements)
        # Ids only grow: "at least 6" holds for any longer range, "exactly 1" for a range
        # grown by a little (answered with its upper bound), neither for a shorter range.
        assert counts.count(conn, "memories_fts", '"common"', 4, (1, hi + 50)) == 4
        assert counts.count(conn, "memories_fts", '"rare1"', 6, (1, hi + 2)) == 3
        assert len(statements) == asked
        assert counts.count(conn, "memories_fts", '"common"', 6, (1, hi - 5)) == 6
        assert counts.count(conn, "memories_fts", '"common"', 100, (1, hi)) == 20  # cap raised
        assert counts.count(conn, "memories_fts", '"rare1"', 6, (1, hi + 30)) == 1  # grew a lot
        assert len(statements) == asked + 3
    finally:
        conn.set_trace_callback(None)


def test_remembered_counts_keep_search_results_exact_as_the_store_grows(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 5)
    engine.ingest([NewMemory(f"common filler {i}") for i in range(10)])
    # "common" is over the budget (remembered so) and cut; "zebra" matches nothing yet.
    assert search_contents(engine, "porter", "common zebra") == []
    engine.store_one(NewMemory("common zebra sighting"))
    assert search_contents(engine, "porter", "common zebra") == ["common zebra sighting"]
    assert search_contents(engine, "trigram", "common zebra") == ["common zebra sighting"]


def test_optimize_merges_every_fts_index_and_search_still_works(engine: MemoryEngine) -> None:
    for i in range(5):  # five write transactions: five segments per index
        engine.ingest([NewMemory(f"segment{i} note {j}") for j in range(20)])
    def pages(conn) -> int:  # FTS5 keeps each segment's leaves as rows of its _data table
        return conn.execute("SELECT count(*) FROM memories_fts_data").fetchone()[0]

    before = pages(engine.store.read())
    assert {"memories_fts", "memories_fts_tri"} <= set(engine.store.optimize())
    assert pages(engine.store.read()) < before
    assert search_contents(engine, "porter", "segment3 note 7")[0] == "segment3 note 7"
    found = search_contents(engine, "trigram", "segment4")
    assert len(found) == 10 and all(f.startswith("segment4 note") for f in found)


def test_indexed_documents_counts_the_index_not_the_content(engine: MemoryEngine) -> None:
    engine.ingest([NewMemory(f"english note {i}") for i in range(12)]
                  + [NewMemory("坐标投影 的 说明"), NewMemory("投影 坐标系")])
    conn = engine.store.read()
    assert fts5.indexed_documents(conn, "memories_fts") == 14
    assert fts5.indexed_documents(conn, "memories_fts_tri") == 14
    assert fts5.indexed_documents(conn, "memories_fts_bigram") == 2  # CJK text only


def test_idf_coverage_with_remembered_counts_matches_a_fresh_count(engine: MemoryEngine) -> None:
    engine.ingest([NewMemory(f"common filler {i}") for i in range(30)]
                  + [NewMemory("common zebra sighting"), NewMemory("zebra crossing")])
    porter = next(c for c in engine.channels if c.name == "porter")
    conn = engine.store.read()
    ids = {m.content: m.id for m in engine.list(limit=100)}
    both = fts5.idf_coverage(conn, "memories_fts", ["common", "zebra"],
                                 ids["common zebra sighting"])
    assert both == 1.0
    lacking = ids["zebra crossing"]
    partial = fts5.idf_coverage(conn, "memories_fts", ["common", "zebra"], lacking)
    assert 0.9 < partial < 1.0  # "common" (31 of 32 memories) weighs almost nothing
    for _ in range(2):  # the second call answers from the channel's remembered counts
        assert porter.confidence(conn, "common zebra", [lacking]) == pytest.approx(partial)


def binary_hits(engine: MemoryEngine, phrases: list[str], filters=None) -> list[tuple[str, float]]:
    with engine.store.snapshot() as conn:
        top = conn.execute("SELECT max(id) FROM memories").fetchone()[0]
        hits = fts5.binary_tf_search(conn, "memories_fts_tri", phrases, 10,
                                      filters or RecallFilters(), (1, top))
        memories = engine.store.load(conn, [h.id for h in hits])
    return [(memories[h.id].content, h.score) for h in hits]


def test_binary_tf_ranks_by_the_idf_of_the_phrases_a_memory_contains(engine: MemoryEngine) -> None:
    """BM25 with k1 = 0: a phrase counts once per memory; rarer phrases weigh more; equal
    scores go newest first; filters and forgotten memories apply."""
    engine.ingest([NewMemory(f"gateway retry note {i}", project="api") for i in range(6)])
    engine.ingest([NewMemory("gateway gateway gateway timeout", project="api"),
                   NewMemory("timeout of the gateway", project="web"),
                   NewMemory("a timeout alone", project="api")])
    hits = binary_hits(engine, ['"gateway"', '"timeout"'])
    contents = [c for c, _ in hits]
    # Both phrases beat one; among the two-phrase memories the newer wins (repeats don't count).
    assert contents[:2] == ["timeout of the gateway", "gateway gateway gateway timeout"]
    assert hits[0][1] == hits[1][1]
    # "timeout" (3 memories) is rarer than "gateway" (8): alone it outranks "gateway" alone.
    assert contents[2] == "a timeout alone" and hits[2][1] > hits[3][1]
    assert contents[3:] == [f"gateway retry note {i}" for i in range(5, -1, -1)]
    # Filters, and forgotten memories, as in every channel.
    only_web = binary_hits(engine, ['"gateway"', '"timeout"'], RecallFilters(project="web"))
    assert [c for c, _ in only_web] == ["timeout of the gateway"]
    engine.forget(next(m.uid for m in engine.list() if m.content == "timeout of the gateway"))
    assert "timeout of the gateway" not in [c for c, _ in binary_hits(engine, ['"timeout"'])]


def test_trigram_channel_ranks_with_binary_tf_on_both_search_paths(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.ingest([NewMemory(f"getUserAccountBalance call {i}") for i in range(12)]
                  + [NewMemory("AccountBalance and Overdraft checks")])
    query = "AccountBalance overdraft"
    exact = search_contents(engine, "trigram", query)  # 13 memories: within any budget
    assert exact[0] == "AccountBalance and Overdraft checks"
    assert exact[1:] == [f"getUserAccountBalance call {i}" for i in range(11, 2, -1)]
    monkeypatch.setattr(keywords, "MATCH_BUDGET", 8)  # trigram gets a quarter: 2 matches
    # Over budget "accountbalance" (13 matches) is cut; "overdraft" (1) is kept.
    assert search_contents(engine, "trigram", query) == ["AccountBalance and Overdraft checks"]
