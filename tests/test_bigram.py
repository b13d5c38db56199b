"""The CJK bigram channel plugin (plugins/retrievers/bigram): 2-character words, mixed text,
its table's life cycle (index, delete, purge, catch-up) and query-syntax safety."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.plugins import build_plugin_manager
from semantic_memory_bigram import (
    QUEUE,
    TABLE,
    BigramChannel,
    cjk_bigrams,
    drop_tables,
    query_terms,
)

WITH = "bm25_porter,bm25_trigram,bigram"
WITHOUT = "bm25_porter,bm25_trigram"


def open_engine(db: Path, plugins: str) -> MemoryEngine:
    # An explicit allowlist keeps other installed channels (vector) out of these tests.
    return MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=plugins))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def bigram_engine(db: Path) -> Iterator[MemoryEngine]:
    engine = open_engine(db, WITH)
    yield engine
    engine.close()


def channel(engine: MemoryEngine, name: str):
    return next(c for c in engine.channels if c.name == name)


def search_uids(engine: MemoryEngine, name: str, query: str, **filters: str) -> list[str]:
    with engine.store.snapshot() as conn:
        hits = channel(engine, name).search(conn, query, 10, RecallFilters(**filters))
        memories = engine.store.load(conn, [h.id for h in hits])
    return [memories[h.id].uid for h in hits]


def recall_uids(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query)]


def rows(engine: MemoryEngine, table: str) -> int:
    return engine.store.read().execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# --- tokenising ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("坐标", ["坐标"]),
        ("坐标系统", ["坐标", "标系", "系统"]),
        ("水", ["水"]),  # a lone character stays a unigram
        ("坐标transform", ["坐标"]),
        ("使用json解析", ["使用", "解析"]),
        ("좌표를 변환", ["좌표", "표를", "변환"]),
        ("データ", ["デー", "ータ"]),
        ("ﾃﾞｰﾀ", ["デー", "ータ"]),  # halfwidth katakana, NFKC
        ("コード・レビュー", ["コー", "ード", "レビ", "ビュ", "ュー"]),  # ・ separates
        ("人々", ["人々"]),
        ("\U00020bb7野家", ["\U00020bb7野", "野家"]),  # CJK Ext. B
        ("hello world, Grüße 😀 ฐานข้อมูล", []),  # nothing outside CJK
        ("", []),
    ],
)
def test_cjk_bigrams(text: str, expected: list[str]) -> None:
    assert cjk_bigrams(text) == expected


def test_query_terms_are_deduplicated() -> None:
    assert query_terms("坐标 坐标 坐标系") == ["坐标", "标系"]


# --- the gap it closes ----------------------------------------------------------------------------


TWO_CHAR = [
    ("zh", "地图模块统一使用WGS84坐标，存库之前不要转换。", "坐标"),
    ("zh", "前端渲染时用墨卡托投影。", "投影"),
    ("ja", "地図の座標は常にWGS84で保存する。", "座標"),
    ("ja", "画面の文字列はすべて翻訳ファイルにまとめる。", "翻訳"),
    ("ko", "지도 좌표는 항상 WGS84로 저장한다.", "좌표"),
    ("ko", "배포는 금요일 오후에 하지 않는다.", "배포"),
]


@pytest.mark.parametrize(("lang", "content", "query"), TWO_CHAR)
def test_two_character_word_found_only_with_bigram(
    db: Path, lang: str, content: str, query: str
) -> None:
    noise = ["Unrelated English note about coffee", "数据库连接池上限设为二十", "テストは並列で実行する"]
    with_bigram = open_engine(db, WITH)
    try:
        uid = with_bigram.store_one(NewMemory(content)).uid
        for text in noise:
            with_bigram.store_one(NewMemory(text))
        assert recall_uids(with_bigram, query)[:1] == [uid]
        hit = with_bigram.recall(query)[0]
        assert hit.ranks == {"bigram": 1}
        # The gap is real: the BM25 channels that ship with core find nothing.
        assert search_uids(with_bigram, "porter", query) == []
        assert search_uids(with_bigram, "trigram", query) == []
    finally:
        with_bigram.close()
    without = open_engine(db, WITHOUT)  # same db, plugin excluded by the allowlist
    try:
        assert [c.name for c in without.channels] == ["porter", "trigram"]
        assert uid not in recall_uids(without, query)
    finally:
        without.close()


def test_more_matching_bigrams_rank_higher(bigram_engine: MemoryEngine) -> None:
    one = bigram_engine.store_one(NewMemory("坐标轴的刻度由图表库计算")).uid
    both = bigram_engine.store_one(NewMemory("坐标在存库之前不要转换")).uid
    assert recall_uids(bigram_engine, "坐标转换")[:2] == [both, one]


def test_filters_apply(bigram_engine: MemoryEngine) -> None:
    a = bigram_engine.store_one(NewMemory("坐标用WGS84", project="a")).uid
    bigram_engine.store_one(NewMemory("坐标用GCJ-02", project="b"))
    assert search_uids(bigram_engine, "bigram", "坐标", project="a") == [a]


def test_confidence_for_the_keyword_fast_path(bigram_engine: MemoryEngine) -> None:
    bigram_engine.store_one(NewMemory("坐标用WGS84，存库之前不要转换"))
    bigram_engine.store_one(NewMemory("投影用墨卡托"))
    bigram = channel(bigram_engine, "bigram")

    def judge(query: str) -> float | None:
        with bigram_engine.store.snapshot() as conn:
            ids = [h.id for h in bigram.search(conn, query, 10, RecallFilters())]
            return bigram.confidence(conn, query, ids)

    assert judge("坐标") == pytest.approx(1.0)
    assert 0 < judge("坐标 缓存") < 1  # 缓存 is in no memory
    assert judge("缓存") == 0.0
    assert judge("cache ttl") is None  # not CJK: porter's call
    assert judge("坐标transform") is None  # a Latin part the bigrams cannot judge


# --- mixed text -----------------------------------------------------------------------------------


def test_mixed_cjk_and_latin(bigram_engine: MemoryEngine) -> None:
    geo = bigram_engine.store_one(
        NewMemory("坐标transform 函数在 geo/utils.py 里，负责经纬度换算。")
    ).uid
    js = bigram_engine.store_one(NewMemory("使用json解析接口返回的数据时要先检查status字段")).uid
    en = bigram_engine.store_one(NewMemory("Parse the JSON config before the transform step")).uid
    assert recall_uids(bigram_engine, "坐标")[:1] == [geo]
    assert search_uids(bigram_engine, "bigram", "解析") == [js]
    assert recall_uids(bigram_engine, "使用json解析")[0] == js
    assert recall_uids(bigram_engine, "坐标transform")[0] == geo
    # Latin words are left to porter and trigram; the bigram channel does not answer them.
    assert search_uids(bigram_engine, "bigram", "transform json") == []
    assert en in recall_uids(bigram_engine, "transform")
    assert recall_uids(bigram_engine, "config")[:1] == [en]


# --- storage --------------------------------------------------------------------------------------


def test_non_cjk_content_costs_nothing(bigram_engine: MemoryEngine) -> None:
    bigram_engine.ingest(
        [
            NewMemory("English: use WAL mode for the store"),
            NewMemory("Deutsch: Die Datenbankverbindung läuft über einen Pool"),
            NewMemory("ไทย: ระบบใช้ฐานข้อมูล PostgreSQL"),
            NewMemory("Русский: база данных; emoji 😀🎉; symbols ・「」。"),
        ]
    )
    assert rows(bigram_engine, TABLE) == 0
    assert rows(bigram_engine, QUEUE) == 0
    bigram_engine.store_one(NewMemory("坐标 and English"))
    assert rows(bigram_engine, TABLE) == 1
    assert rows(bigram_engine, QUEUE) == 0  # indexed in the ingest transaction


def test_indexed_text_is_the_bigrams(bigram_engine: MemoryEngine) -> None:
    bigram_engine.store_one(NewMemory("用json解析坐标系"))
    tokens = bigram_engine.store.read().execute(f"SELECT tokens FROM {TABLE}").fetchone()[0]
    assert tokens == "用 解析 析坐 坐标 标系"


def test_forget_and_purge_remove_rows(bigram_engine: MemoryEngine) -> None:
    keep = bigram_engine.store_one(NewMemory("坐标用WGS84")).uid
    gone = bigram_engine.store_one(NewMemory("坐标用GCJ-02")).uid
    assert rows(bigram_engine, TABLE) == 2
    assert bigram_engine.forget(gone)
    assert recall_uids(bigram_engine, "坐标") == [keep]  # soft-deleted: filtered out
    report = bigram_engine.purge()
    assert report.soft_deleted == 1
    assert rows(bigram_engine, TABLE) == 1
    assert recall_uids(bigram_engine, "坐标") == [keep]
    with bigram_engine.store.write() as conn:  # any hard delete, not only purge
        conn.execute("DELETE FROM memories")
    assert rows(bigram_engine, TABLE) == 0
    assert recall_uids(bigram_engine, "坐标") == []


def test_content_update_is_reindexed(bigram_engine: MemoryEngine) -> None:
    uid = bigram_engine.store_one(NewMemory("坐标用WGS84")).uid
    with bigram_engine.store.write() as conn:
        conn.execute("UPDATE memories SET content = '投影用墨卡托' WHERE uid = ?", (uid,))
    assert recall_uids(bigram_engine, "坐标") == []  # old bigrams left with the old text
    bigram_engine.store_one(NewMemory("another note"))  # the next write drains the queue
    assert recall_uids(bigram_engine, "投影") == [uid]
    with bigram_engine.store.write() as conn:
        conn.execute("UPDATE memories SET content = 'now English only' WHERE uid = ?", (uid,))
    assert rows(bigram_engine, TABLE) == 0
    assert rows(bigram_engine, QUEUE) == 0


def test_write_rolls_back_with_the_transaction(bigram_engine: MemoryEngine) -> None:
    with pytest.raises(RuntimeError), bigram_engine.store.write() as conn:
        conn.execute(
            "INSERT INTO memories (uid, content, content_hash, created_at, updated_at) "
            "VALUES ('x', '坐标', 'h', 0, 0)"
        )
        BigramChannel().index(conn, [])
        raise RuntimeError("abort")
    assert rows(bigram_engine, TABLE) == 0
    assert rows(bigram_engine, QUEUE) == 0


# --- plugin allowlist and catch-up ----------------------------------------------------------------


def test_plugin_is_an_installed_entry_point() -> None:
    pm = build_plugin_manager(Settings(plugins=WITH))
    info = {p.name: p for p in pm.describe()}
    assert info["bigram"].distribution == "semantic-memory-bigram"
    assert "register_channels" in info["bigram"].hooks


def test_excluded_by_allowlist_and_recall_still_works(db: Path) -> None:
    engine = open_engine(db, WITHOUT)
    try:
        assert [c.name for c in engine.channels] == ["porter", "trigram"]
        en = engine.store_one(NewMemory("The cache TTL defaults to 300 seconds")).uid
        zh = engine.store_one(NewMemory("坐标系转换必须使用投影算法")).uid
        assert recall_uids(engine, "cache ttl")[:1] == [en]
        assert recall_uids(engine, "坐标系转换")[:1] == [zh]  # 3+ characters: trigram
        assert not engine.store.read().execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)
        ).fetchone()
    finally:
        engine.close()


def test_catch_up_when_enabled_on_an_existing_db(db: Path) -> None:
    engine = open_engine(db, WITHOUT)
    before = [engine.store_one(NewMemory(text)).uid for text in ("坐标用WGS84", "投影用墨卡托")]
    engine.store_one(NewMemory("English only"))
    engine.close()

    engine = open_engine(db, WITH)  # first start with the plugin: builds the table
    try:
        assert rows(engine, TABLE) == 2
        assert rows(engine, QUEUE) == 0
        assert recall_uids(engine, "坐标") == [before[0]]
        assert recall_uids(engine, "投影") == [before[1]]
    finally:
        engine.close()

    engine = open_engine(db, WITHOUT)  # plugin excluded again; its triggers keep a queue
    later = engine.store_one(NewMemory("좌표는 항상 WGS84로 저장한다")).uid
    engine.forget(before[0])
    engine.purge()
    engine.close()

    engine = open_engine(db, WITH)  # back: the queue is drained at start-up
    try:
        assert rows(engine, QUEUE) == 0
        assert recall_uids(engine, "좌표") == [later]
        assert recall_uids(engine, "坐标") == []
        assert rows(engine, TABLE) == 2
    finally:
        engine.close()


def test_setup_is_idempotent_across_restarts(db: Path) -> None:
    for _ in range(3):
        engine = open_engine(db, WITH)
        engine.store_one(NewMemory("坐标用WGS84"))
        engine.close()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0] == 1
        triggers = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE ?",
            (f"{TABLE}_%",),
        ).fetchone()[0]
        assert triggers == 3
    finally:
        conn.close()


def test_drop_tables_leaves_a_working_db(db: Path) -> None:
    engine = open_engine(db, WITH)
    uid = engine.store_one(NewMemory("坐标用WGS84")).uid
    with engine.store.write() as conn:
        drop_tables(conn)
    engine.close()
    engine = open_engine(db, WITHOUT)
    try:
        engine.store_one(NewMemory("投影用墨卡托"))  # inserts still work: no dangling trigger
        names = {r[0] for r in engine.store.read().execute("SELECT name FROM sqlite_master")}
        assert not {n for n in names if n.startswith(TABLE)}
    finally:
        engine.close()
    engine = open_engine(db, WITH)  # installing again rebuilds from memories
    try:
        assert recall_uids(engine, "坐标") == [uid]
        assert len(recall_uids(engine, "投影")) == 1
    finally:
        engine.close()


# --- query-syntax safety --------------------------------------------------------------------------

NASTY = [
    "",
    "   ",
    '"',
    '""',
    '坐"标',
    "'",
    "*",
    "坐标*",
    "^坐标",
    "坐标:投影",
    "NEAR(坐标 投影)",
    "坐标 NEAR 投影",
    "坐标 AND",
    "OR 坐标 NOT",
    "(((坐标",
    "tokens:坐标",
    "坐标'; DROP TABLE memories; --",
    "😀",
    "😀坐标😀",
    "\u200b坐\u200b标",
    "坐" * 10_000,
    "坐标 " * 5_000,
    "\x00坐标\x00",
]


@pytest.mark.parametrize("query", NASTY)
def test_query_syntax_never_raises(bigram_engine: MemoryEngine, query: str) -> None:
    uid = bigram_engine.store_one(NewMemory("坐标和投影的说明")).uid
    with bigram_engine.store.snapshot() as conn:  # the channel itself, not recall's safety net
        hits = channel(bigram_engine, "bigram").search(conn, query, 10, RecallFilters())
    assert all(h.id for h in hits)
    results = recall_uids(bigram_engine, query)
    if "坐标" in query:
        assert results[:1] == [uid]


@hsettings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60)
    | st.text(alphabet='坐标投影좌표データ"*^:()-+ NEARORAND😀\'', max_size=30)
)
def test_any_query_is_safe(bigram_engine: MemoryEngine, query: str) -> None:
    bigram_engine.store_one(NewMemory("坐标和投影 좌표 データ"))  # once; then a duplicate
    with bigram_engine.store.snapshot() as conn:
        bigram = channel(bigram_engine, "bigram")
        ids = [h.id for h in bigram.search(conn, query, 10, RecallFilters())]
        bigram.confidence(conn, query, ids)
