"""Channels, query safety and fusion arithmetic."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from semantic_memory import neighbours
from semantic_memory.config import ConfigError, Settings
from semantic_memory.fusion import rrf, score_fusion, with_share
from semantic_memory.models import NewMemory, RecallFilters, RecallHit
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores


def channel(engine: MemoryEngine, name: str):
    return next(c for c in engine.channels if c.name == name)


def search_uids(engine: MemoryEngine, name: str, query: str) -> list[str]:
    with engine.store.snapshot() as conn:
        hits = channel(engine, name).search(conn, query, 10, RecallFilters())
    return [engine.store.load(conn, [h.id])[h.id].uid for h in hits]


@pytest.mark.sqlite_only  # SQLite's own channels
def test_porter_stems_english_words(engine: MemoryEngine) -> None:
    uid = engine.store_one(NewMemory("The migrations were running slowly on deploys")).uid
    engine.store_one(NewMemory("Unrelated note about coffee"))
    assert search_uids(engine, "porter", "migration run slow deploy") == [uid]
    assert search_uids(engine, "porter", "migrating") == [uid]


@pytest.mark.sqlite_only  # SQLite's own channels
def test_trigram_matches_substrings_and_identifiers(engine: MemoryEngine) -> None:
    uid = engine.store_one(NewMemory("Call getUserAccountBalance() before charging")).uid
    assert search_uids(engine, "porter", "AccountBalance") == []
    assert search_uids(engine, "trigram", "AccountBalance") == [uid]
    assert [h.memory.uid for h in engine.recall("AccountBalance")] == [uid]


def test_trigram_matches_cjk_words_of_three_or_more_characters(engine: MemoryEngine) -> None:
    zh = engine.store_one(NewMemory("坐标系转换必须使用投影算法")).uid
    ja = engine.store_one(NewMemory("データベースの移行は金曜日に行う")).uid
    ko = engine.store_one(NewMemory("데이터베이스 마이그레이션은 금요일에 한다")).uid
    th = engine.store_one(NewMemory("ฐานข้อมูลย้ายในวันศุกร์")).uid
    assert [h.memory.uid for h in engine.recall("坐标系转换")] == [zh]
    assert [h.memory.uid for h in engine.recall("投影算法")][0] == zh
    assert [h.memory.uid for h in engine.recall("データベース")][0] == ja
    assert [h.memory.uid for h in engine.recall("마이그레이션")][0] == ko
    assert [h.memory.uid for h in engine.recall("ฐานข้อมูล")][0] == th


def test_porter_covers_spaced_scripts(engine: MemoryEngine) -> None:
    de = engine.store_one(NewMemory("Die Datenbank läuft auf dem Server")).uid
    ru = engine.store_one(NewMemory("База данных работает на сервере")).uid
    assert [h.memory.uid for h in engine.recall("datenbank server")][0] == de
    assert [h.memory.uid for h in engine.recall("сервере")][0] == ru


def test_german_compound_found_by_substring(engine: MemoryEngine) -> None:
    uid = engine.store_one(NewMemory("Die Krankenversicherungspflicht gilt ab Januar")).uid
    assert [h.memory.uid for h in engine.recall("versicherung")] == [uid]


NASTY = [
    "", " ", '"', '""', "'", "*", "prefix*", ":", "a:b", "col:value", "-", "-term", "NEAR",
    "NEAR(a b, 3)", "a NEAR b", "AND", "OR", "NOT", "a AND OR NOT b", "(", ")", "((a)", "a)",
    "{a b}", "^start", "+", "🙂🙃🔥", "x" * 10_000, "word " * 2_000, "\x00", "\n\t\r",
    "'; DROP TABLE memories; --", "\\", "%", "_", "content:foo", "memories_fts:bar", "\u200b",
]


def test_fts_syntax_and_odd_text_never_raise(engine: MemoryEngine) -> None:
    engine.store_one(NewMemory("NEAR the prefix* of a col:value (with brackets) and 🙂 emoji"))
    for query in NASTY:
        hits = engine.recall(query, k=5)
        assert isinstance(hits, list)
    assert engine.recall("col:value")[0].memory.content.startswith("NEAR")
    assert engine.count() == 1


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=300))
def test_any_text_is_a_safe_query(engine: MemoryEngine, query: str) -> None:
    for ch in engine.channels:
        with engine.store.snapshot() as conn:
            ch.search(conn, query, 5, RecallFilters())
    engine.recall(query, k=5)


def test_rrf_arithmetic() -> None:
    fused = rrf({"a": [1, 2, 3], "b": [3, 1]}, k=60)
    scores = {f.id: f.score for f in fused}
    assert abs(scores[1] - (1 / 61 + 1 / 62)) < 1e-12
    assert abs(scores[2] - 1 / 62) < 1e-12
    assert abs(scores[3] - (1 / 63 + 1 / 61)) < 1e-12
    assert [f.id for f in fused] == [1, 3, 2]
    assert fused[0].ranks == {"a": 1, "b": 2}


def test_rrf_weights_and_k() -> None:
    fused = rrf({"a": [1, 2], "b": [2, 1]}, weights={"a": 2.0, "b": 0.5}, k=10)
    scores = {f.id: f.score for f in fused}
    assert abs(scores[1] - (2 / 11 + 0.5 / 12)) < 1e-12
    assert abs(scores[2] - (2 / 12 + 0.5 / 11)) < 1e-12
    zero = rrf({"a": [1], "b": [2]}, weights={"b": 0.0})
    assert [f.id for f in zero] == [1, 2] and zero[1].score == 0 and zero[1].ranks == {"b": 1}


def test_rrf_counts_a_repeated_id_once_and_keeps_tie_order() -> None:
    fused = rrf({"a": [7, 7, 8], "b": [9]})
    assert {f.id: f.ranks for f in fused}[7] == {"a": 1}
    assert [f.id for f in rrf({"a": [4], "b": [5]})] == [4, 5]
    assert rrf({}) == []


def test_rrf_limit_keeps_the_best() -> None:
    fused = rrf({"a": [1, 2, 3], "b": [3, 4]}, limit=2)
    assert [f.id for f in fused] == [3, 1]
    assert fused[0].ranks == {"a": 3, "b": 1}
    assert len(rrf({"a": [1, 2]}, limit=5)) == 2


def test_channel_weights_from_settings(tmp_path) -> None:
    from semantic_memory.config import Settings

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "w.db"), channel_weights="trigram=0"))
    assert engine.weights["trigram"] == 0.0
    engine.store_one(NewMemory("Zebra crossing"))
    hit = engine.recall("zebra")[0]
    assert hit.ranks == {"porter": 1, "trigram": 1}
    engine.close()


# --- relevance bar and agent contexts (what hook injections ask for) --------------------------


def test_relevant_only_keeps_what_covers_the_query(engine: MemoryEngine) -> None:
    """A hit must contain at least MEMORY_INJECT_MIN_COVERAGE of the query, IDF-weighted: the
    nearest memories are not injected merely for being nearest."""
    fact = engine.store_one(NewMemory("The staging database runs PostgreSQL 16 on port 5433")).uid
    engine.store_one(NewMemory("We use port forwarding to debug the web app"))
    engine.store_one(NewMemory("Lunch is at noon on Fridays"))
    query = "which port does the staging database use?"
    assert len(engine.recall(query)) == 2  # both share a word with the query
    hits = engine.recall(query, relevant_only=True)
    assert [h.memory.uid for h in hits] == [fact]
    assert hits[0].signals["coverage"] > 0.5
    assert engine.recall("what is for dinner on Mondays?", relevant_only=True) == []


def test_a_query_of_stopwords_alone_vouches_for_nothing(engine: MemoryEngine) -> None:
    """"why?" or "do it" searched all their words (nothing else is left) and judged by them
    too: a memory holding "why" covered the whole query, and its session's neighbours came
    into the hook's block with it. The bar now lets nothing through."""
    why = engine.store_one(NewMemory("Why does the Safari test fail? The iframe loads late.",
                                     session="s1")).uid
    engine.store_one(NewMemory("Do it with pnpm up next, then run the e2e suite", session="s1"))
    for prompt in ("why?", "do it", "and then?", "can you do that"):
        assert engine.recall(prompt, relevant_only=True) == [], prompt
    assert [h.memory.uid for h in engine.recall("why does the Safari test fail",
                                                relevant_only=True)][:1] == [why]


def test_relevance_is_asked_of_the_top_k_then_of_the_rest_at_once(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The relevant hits below a weak top k are found in one more call per channel, not one
    per page of k (the global memories of a hook's recall took 4.3 pages on average)."""
    engine.ingest([NewMemory(f"Deploy note {i}: the runner cache was warm") for i in range(30)]
                  + [NewMemory("Deploy the billing service with the blue-green script")],
                  batch_is_session=False)  # no session: no neighbours brought along
    asked: list[int] = []
    for channel in engine.channels:
        original = channel.relevant
        monkeypatch.setattr(channel, "relevant", lambda conn, query, hits, _f=original: (
            asked.append(len(hits)), _f(conn, query, hits))[1])
    hits = engine.recall("deploy the billing service", k=3, relevant_only=True)
    assert [h.memory.content for h in hits] == [
        "Deploy the billing service with the blue-green script"]
    judges = sum(1 for c in engine.channels if c.active)
    assert len(asked) <= 2 * judges and max(asked) > 3


def test_quotes_in_a_query_are_not_query_syntax(engine: MemoryEngine) -> None:
    """A question in quotes (`opencode run "…"` sends it so) is searched as its words, never as
    one phrase that matches nothing: the same relevant hits as the bare words, on every store."""
    flags = engine.store_one(NewMemory("Feature flags live in the config-service, not in "
                                       "LaunchDarkly")).uid
    engine.store_one(NewMemory("The staging database runs PostgreSQL 16 on port 5433"))
    words = "which service holds our feature flags?"
    for query in (words, f'"{words}"', f'"\\"{words}\\""', f"\u201c{words}\u201d",
                  'which service holds our "feature flags"?', '"service flags"'):
        assert [h.memory.uid for h in engine.recall(query, relevant_only=True)] == [flags], query


def test_relevance_counts_prefixes_and_judges_unspaced_scripts(engine: MemoryEngine) -> None:
    """German compounds through porter's prefix terms, Chinese through the bigram channel:
    porter sees a Chinese sentence as one word and cannot judge it."""
    de = engine.store_one(NewMemory("Die Datenbankverbindung läuft über einen Pool")).uid
    zh = engine.store_one(NewMemory("地图模块统一使用 WGS84 坐标")).uid
    assert [h.memory.uid for h in engine.recall("Datenbank", relevant_only=True)] == [de]
    assert [h.memory.uid for h in engine.recall("坐标", relevant_only=True)] == [zh]


def test_session_context_leaves_out_injected_and_flushed_memories(engine: MemoryEngine) -> None:
    injected = engine.store_one(NewMemory("Deploys go through Argo CD on the infra cluster")).uid
    flushed = engine.store_one(NewMemory("User: how do deploys work?\nAssistant: Argo CD syncs",
                                         tags=["session:s1"])).uid
    other = engine.store_one(NewMemory("Argo CD deploys need a signed image")).uid
    engine.record_injection(uids=[injected], harness="claude-code", session="s1")
    in_s1 = engine.recall("argo cd deploys", exclude=engine.in_session_context("s1"))
    assert [h.memory.uid for h in in_s1] == [other]
    # After a compaction the context is "s1+1": both may come back.
    after = engine.recall("argo cd deploys", exclude=engine.in_session_context("s1+1"))
    assert {h.memory.uid for h in after} == {injected, flushed, other}


# --- neighbour expansion --------------------------------------------------------------------

CHAT = [
    "Caroline: I went to the LGBTQ support group yesterday",
    "Melanie: How did it go?",
    "Caroline: It was powerful, the stories were inspiring",
    "Melanie: I painted a sunrise last weekend",
    "Caroline: The lake looked beautiful at dawn",
]


def test_a_hit_brings_its_session_neighbours_in_order(engine: MemoryEngine) -> None:
    uids = [r.uid for r in engine.ingest([NewMemory(t, project="chat") for t in CHAT])]
    engine.store_one(NewMemory("Melanie: support group meets on Tuesdays", project="other"))
    hits = engine.recall("support group", k=5, filters=RecallFilters(project="chat"))
    assert hits[0].memory.uid == uids[0] and hits[0].neighbour_of is None
    # The hit at rank 0 brings the next two turns of its batch (distance 1 and 2), each marked.
    brought = {h.memory.uid: h.neighbour_of for h in hits if h.neighbour_of}
    assert brought == {uids[1]: uids[0], uids[2]: uids[0]}
    assert hits[1].memory.uid == uids[1] and hits[2].memory.uid == uids[2]
    assert "neighbour_of" in hits[1].to_dict() and "neighbour_of" not in hits[0].to_dict()


def test_neighbours_obey_filters_exclusions_forgetting_and_the_setting(
        engine: MemoryEngine, settings) -> None:
    uids = [r.uid for r in engine.ingest([NewMemory(t, kind="note") for t in CHAT])]
    engine.forget(uids[1])
    hits = engine.recall("support group", k=5)
    assert uids[1] not in [h.memory.uid for h in hits]  # forgotten: the next one steps in
    assert [h.memory.uid for h in hits[:3]] == [uids[0], uids[2], uids[3]]
    only_facts = engine.recall("support group", k=5, filters=RecallFilters(kind="fact"))
    assert only_facts == []
    skip = engine.recall("support group", k=5, exclude=lambda m: m.uid == uids[2])
    assert uids[2] not in [h.memory.uid for h in skip]
    engine.settings = replace(settings, neighbours=0)
    assert [h.memory.uid for h in engine.recall("support group", k=5)] == [uids[0]]


def test_a_named_session_keeps_its_order_across_ingests(engine: MemoryEngine) -> None:
    first = engine.ingest([NewMemory(t, session="claude-code:s1") for t in CHAT[:2]])
    later = engine.store_one(NewMemory(CHAT[2], session="claude-code:s1"))
    alone = engine.store_one(NewMemory("Caroline: a lone support group note"))
    assert [engine.get(r.uid).seq for r in (*first, later)] == [0, 1, 2]
    assert engine.get(alone.uid).session is None  # one memory alone has no neighbours
    hits = engine.recall("It was powerful", k=3)
    assert [h.memory.uid for h in hits] == [later.uid, first[1].uid, first[0].uid]


def test_under_score_fusion_a_neighbour_goes_no_higher_than_its_decayed_score(
        engine: MemoryEngine) -> None:
    a = [r.uid for r in engine.ingest([NewMemory(f"alpha turn {i}") for i in range(3)])]
    b = [r.uid for r in engine.ingest([NewMemory(f"beta turn {i}") for i in range(3)])]
    x, y = (engine.store_one(NewMemory(t)).uid for t in ("gamma alone", "delta alone"))

    def order(scores: dict[str, float], decay: float | None) -> list[str]:
        hits = [RecallHit(engine.get(u), s, {}, {}) for u, s in scores.items()]
        with engine.store.snapshot() as conn:
            placed = neighbours.expand(engine.store, conn, hits, 8, 1, 1.0, RecallFilters(),
                                       decay=decay)
        return [h.memory.uid for h in placed]

    # By rank (gap 1), a neighbour d steps from the hit at rank r goes behind rank r + d.
    # A clear winner (1.0 against 0.5 and 0.45) keeps that: its neighbours' decayed 0.75 is
    # still above the runners-up behind rank 1.
    clear = {a[1]: 1.0, b[1]: 0.5, x: 0.45, y: 0.1}
    assert order(clear, 0.75) == order(clear, None) == [a[1], b[1], a[0], a[2], x, b[0], b[2], y]
    # In a near tie (1.0, 0.9, 0.85) they wait behind gamma, which outscores their 0.75.
    tie = {a[1]: 1.0, b[1]: 0.9, x: 0.85, y: 0.1}
    assert order(tie, None) == [a[1], b[1], a[0], a[2], x, b[0], b[2], y]
    assert order(tie, 0.75) == [a[1], b[1], x, a[0], a[2], b[0], b[2], y]
    assert order(tie, 1.0) == order(tie, None)


@pytest.mark.sqlite_only  # the porter channel's option
def test_query_feedback_searches_again_with_the_first_hits_words(settings) -> None:
    texts = ["kubernetes upgrade broke the helm chart", "helm chart pinned to 3.12",
             "helm rollback plan", "pizza on fridays"]
    found = {}
    for feedback in (False, True):
        eng = MemoryEngine(replace(settings, db_path=f"{settings.db_path}.{feedback}",
                                   query_feedback=feedback, neighbours=0))
        uids = [eng.store_one(NewMemory(t)).uid for t in texts]
        found[feedback] = [h.memory.content for h in eng.recall("kubernetes", 4)]
        if feedback:  # what is forgotten stays out of the second search too
            eng.forget(uids[1])
            assert texts[1] not in [h.memory.content for h in eng.recall("kubernetes", 4)]
        eng.close()
    assert found[False] == texts[:1]
    # "helm" and "chart" are the hit's words other memories hold ("upgrade", "broke" are not):
    # searched again, they bring what shares them, behind the hit itself.
    assert found[True][0] == texts[0] and set(found[True][1:]) == {texts[1], texts[2]}


def test_score_fusion_arithmetic_and_shares() -> None:
    fused = score_fusion({"porter": [(1, -2.0), (2, -4.0), (3, -6.0)],
                          "vector": [(3, 0.9), (4, 0.5)], "empty": []},
                         {"porter": 0.25, "vector": 0.75})
    scores = {f.id: round(f.score, 6) for f in fused}
    # porter min-max: 1 -> 1, 2 -> 0.5, 3 -> 0; vector: 3 -> 1, 4 -> 0; weights sum to 1.
    assert scores == {3: 0.75, 1: 0.25, 2: 0.125, 4: 0.0}
    assert [f.id for f in fused] == [3, 1, 2, 4] and fused[0].ranks == {"porter": 3, "vector": 1}
    shared = with_share({"porter": 1.0, "trigram": 0.15, "vector": 0.3}, ["vector"], 0.4)
    assert round(shared["vector"], 6) == 0.4
    assert round(shared["porter"] + shared["trigram"], 6) == 0.6
    assert round(shared["porter"] / shared["trigram"], 6) == round(1 / 0.15, 6)


def test_score_fusion_lets_a_clear_leader_speak_louder() -> None:
    # porter's top is flat (10, 9.9, 9.8: lead 0.01); the vector channel's first hit leads
    # its second by most of its range ((0.9 - 0.3) / (0.9 - 0.29): lead 0.98).
    results = {"porter": [(1, 10.0), (2, 9.9), (3, 9.8), (4, 0.0)],
               "vector": [(5, 0.9), (1, 0.3), (6, 0.29)]}
    weights = {"porter": 0.6, "vector": 0.4}
    plain = score_fusion(results, weights)
    assert [f.id for f in plain][:4] == [1, 2, 3, 5]  # porter's share outvotes the clear winner
    led = score_fusion(results, weights, lead=1.0)
    assert [f.id for f in led][:4] == [5, 1, 2, 3]
    scores = {f.id: round(f.score, 4) for f in led}
    vector = 0.4 * (1 + 0.6 / 0.61)  # the channel's weight, raised by its lead
    assert scores[5] == round(vector, 4)
    assert scores[1] == round(0.6 * 1.01 + vector * 0.01 / 0.61, 4)
    # lead 0 is plain min-max; one hit or a flat list has no lead to give
    assert score_fusion(results, weights, lead=0.0) == plain
    one = {"porter": [(7, 3.0)], "vector": [(8, 0.5), (9, 0.5)]}
    assert {f.id: f.score for f in score_fusion(one, weights, lead=1.0)} == {
        7: 0.6, 8: 0.4, 9: 0.4}


def test_fusion_settings_are_checked(tmp_path) -> None:
    for bad in ({"MEMORY_FUSION": "max"}, {"MEMORY_FUSION_VECTOR_SHARE": "1.5"},
                {"MEMORY_FUSION_LEAD": "-0.5"}, {"MEMORY_FUSION_LEAD": "11"},
                {"MEMORY_NEIGHBOURS": "-1"}, {"MEMORY_NEIGHBOUR_GAP": "0"},
                {"MEMORY_NEIGHBOUR_DECAY": "0"}, {"MEMORY_NEIGHBOUR_DECAY": "1.5"},
                {"MEMORY_NEIGHBOUR_DECAY": "nan"}, {"MEMORY_QUERY_FEEDBACK": "maybe"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            Settings.from_env(bad)
    assert Settings.from_env({"MEMORY_FUSION_VECTOR_SHARE": "-1"}).fusion_vector_share == -1
