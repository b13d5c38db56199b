"""Whole questions in Chinese, Korean and Japanese clear the bigram channel's relevance bar
(plugins/retrievers/bigram, `bar.py`), and questions nothing in the store answers still do not.

A question's bigrams across word boundaries (率要 of 覆盖率要求) and its question words (多少,
무슨, 하나요) are in no memory, so they weighed the most, and the memory that answers it, ranked
first, was not injected (a QA pass: 2 of 12 Chinese and 7 of 12 Korean questions injected)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

MEMORIES = {
    "pool": "数据库连接池的最大连接数设置为五十。",
    "deps": "前端项目统一使用 pnpm 管理依赖。",
    "tz": "接口返回的时间统一使用 UTC 时区。",
    "logs": "日志保留三十天，过期后自动删除。",
    "prefix": "缓存键统一加上项目前缀，避免不同项目冲突。",
    "push": "消息推送使用极光推送服务。",
    "backup": "定时任务在每天凌晨两点执行数据备份。",
    "staging": "스테이징 서버는 매일 밤 열한 시에 초기화된다.",
    "review": "코드 리뷰는 최소 두 명의 승인이 필요하다.",
    "webp": "이미지는 웹피 형식으로 변환해서 저장한다.",
    "wiki": "사내 위키에 장애 보고서를 남겨야 한다.",
    "migrate": "데이터 마이그레이션은 주말 새벽에 실행한다.",
    "reset": "ステージング環境は毎週月曜日にリセットされる。",
    "batch": "夜間バッチは午前三時に実行される。",
    "mail": "通知メールの送信にはキューを使う。",
    "en": "Use pnpm, not npm, in the web repository.",
}

#: (question, the memory that answers it). Before the bar weighed characters, 6 of these 14
#: injected nothing: 日志会保留多久, 缓存键为什么要加前缀, 消息推送用的是哪家服务,
#: 코드 리뷰 승인은 몇 명이 필요한가요, 장애 보고서는 어디에 남겨요, 通知メールはどうやって送信する.
QUESTIONS = [
    ("前端项目用什么管理依赖？", "deps"),
    ("接口返回的时间是哪个时区？", "tz"),
    ("日志会保留多久？", "logs"),
    ("缓存键为什么要加前缀？", "prefix"),
    ("消息推送用的是哪家服务？", "push"),
    ("数据备份是几点执行的？", "backup"),
    ("코드 리뷰 승인은 몇 명이 필요한가요?", "review"),
    ("장애 보고서는 어디에 남겨요?", "wiki"),
    ("스테이징 서버는 언제 초기화돼?", "staging"),
    ("이미지는 무슨 형식으로 저장하나요?", "webp"),
    ("데이터 마이그레이션은 언제 실행하나요?", "migrate"),
    ("通知メールはどうやって送信する？", "mail"),
    ("ステージング環境はいつリセットされるの？", "reset"),
    ("夜間バッチは何時に実行されますか？", "batch"),
]

#: Questions that share a word or a character with a memory and that none answers.
UNRELATED = [
    "单元测试怎么写？", "怎么配置反向代理？", "服务器的内存为什么一直上涨？",
    "代码评审需要几个人同意？", "测试环境的账号密码是多少？", "数据库索引怎么优化？",
    "服务之间用什么协议通信？", "日志级别怎么调整？", "坐标轴的刻度怎么设置？",
    "로그 레벨은 어떻게 바꿔요?", "서버 메모리가 왜 계속 늘어나요?", "테스트 코드는 어디에 둬요?",
    "데이터베이스 인덱스는 어떻게 최적화해?", "배포 스크립트는 누가 관리해?",
    "ログのレベルはどう変える？", "決済が失敗したらどうなる？", "テストコードはどこに置く？",
    "デプロイのスクリプトは誰が管理している？", "什么？", "어떻게?",
]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryEngine, dict]]:
    db: Path = tmp_path_factory.mktemp("questions") / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu",
                                   plugins="bm25_porter,bm25_trigram,bigram"))
    uids = {key: engine.store_one(NewMemory(text, project="p")).uid
            for key, text in MEMORIES.items()}
    yield engine, uids
    engine.close()


def injected(engine: MemoryEngine, query: str) -> list[str]:
    """What a hook injects: the top 5 that a channel vouches for."""
    return [h.memory.uid for h in engine.recall(query, 5, RecallFilters(project="p"),
                                                relevant_only=True)]


@pytest.mark.parametrize(("question", "key"), QUESTIONS, ids=[q for q, _ in QUESTIONS])
def test_a_whole_question_injects_the_memory_that_answers_it(
        engine: tuple[MemoryEngine, dict], question: str, key: str) -> None:
    store, uids = engine
    assert injected(store, question) == [uids[key]]


@pytest.mark.parametrize("question", UNRELATED)
def test_a_question_no_memory_answers_injects_nothing(
        engine: tuple[MemoryEngine, dict], question: str) -> None:
    store, _ = engine
    assert injected(store, question) == []


def content(query: str) -> str:
    from semantic_memory_bigram import cjk_runs
    from semantic_memory_bigram.bar import units

    return "".join(unit.char for unit in units(cjk_runs(query)))


def test_function_words_are_set_aside() -> None:
    """Question words, particles and endings are set aside, content characters kept."""
    assert content("测试覆盖率要求是多少？") == "测试覆盖率要求"
    assert content("密码怎么存储？") == "密码存储"
    assert content("故障复盘的截止时间是什么时候？") == "故障复盘截止时间"
    assert content("배포는 무슨 요일에 하나요?") == "배포요일"
    assert content("캐시 만료 시간이 어떻게 돼?") == "캐시만료시간"
    assert content("キャッシュの有効期限はどのくらい？") == "キャッシュ有効期限"
    assert content("필요") == "필요"  # a 1-syllable stem keeps its last syllable
    assert content("ひらがなだけ") == "ひらがなだけ"  # hiragana is content where it is all
    assert content("什么？") == ""


def test_a_character_keeps_the_bigram_it_shares_with_a_function_word() -> None:
    """目 of 目的 (的 set aside) is still found through 目的, not left without a bigram."""
    from semantic_memory_bigram import cjk_runs
    from semantic_memory_bigram.bar import units

    assert [u.grams for u in units(cjk_runs("目的"))] == [("目的",)]
    assert [u.grams for u in units(cjk_runs("覆盖率是"))] == [
        ("覆盖",), ("覆盖", "盖率"), ("盖率",)]


# --- full-width Latin letters and digits ---------------------------------------------------------

#: What a Chinese or Japanese input method types (full width), and the memory it asks about.
FULL_WIDTH = [
    ("Ｅ０５０２", "Rust error E0502: cannot borrow the map as mutable twice."),
    ("ｐａｒｓｅ＿ｃｏｎｆｉｇ＿ｆｉｌｅ", "parse_config_file() in loader.py raises KeyError."),
    ("ＴＳ２３４５ 错误", "TS2345 means an argument type does not match the parameter."),
]
#: A memory written in full width: a full-width query still finds it (the index holds it as
#: written, and the query also searches the word as typed).
WRITTEN_FULL_WIDTH = "ビルド設定：ＵＳＥ＿ＣＡＣＨＥ＝ｔｒｕｅ を ｂｕｉｌｄ．ｔｏｍｌ に書く。"


def store_width_corpus(engine: MemoryEngine) -> dict[str, str]:
    """The full-width cases' memories (and one unrelated), stored in project `p`: uid by text."""
    texts = [memory for _, memory in FULL_WIDTH] + [WRITTEN_FULL_WIDTH,
                                                    "The web repo uses pnpm workspaces."]
    return {text: engine.store_one(NewMemory(text, project="p")).uid for text in texts}


@pytest.fixture(scope="module")
def core_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryEngine, dict]]:
    """The keyword channels that ship with core: porter and trigram, no bigram channel."""
    db: Path = tmp_path_factory.mktemp("width") / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu",
                                   plugins="bm25_porter,bm25_trigram"))
    uids = store_width_corpus(engine)
    yield engine, uids
    engine.close()


@pytest.mark.parametrize(("query", "memory"), FULL_WIDTH, ids=[q for q, _ in FULL_WIDTH])
def test_a_full_width_query_finds_and_injects_the_ascii_memory(
        core_engine: tuple[MemoryEngine, dict], query: str, memory: str) -> None:
    store, uids = core_engine
    assert injected(store, query) == [uids[memory]]


@pytest.mark.parametrize("query", ["ＵＳＥ＿ＣＡＣＨＥ", "ｂｕｉｌｄ．ｔｏｍｌ"])
def test_a_full_width_query_still_finds_a_full_width_memory(
        core_engine: tuple[MemoryEngine, dict], query: str) -> None:
    store, uids = core_engine
    assert injected(store, query) == [uids[WRITTEN_FULL_WIDTH]]


def test_words_fold_full_width_and_keep_the_typed_form() -> None:
    from semantic_memory.keywords import typed_forms, words

    assert words("ｐａｒｓｅ＿ｃｏｎｆｉｇ Ｅ１０２４") == ["parse_config", "e1024"]
    assert words("ﾃﾞｰﾀ") == ["データ"]  # halfwidth katakana
    assert words("การทำงาน") == ["การทำงาน"]  # no NFKC of the rest: SARA AM stays whole
    assert typed_forms("ＵＳＥ＿ＣＡＣＨＥ plain") == {
        "use_cache": "ｕｓｅ＿ｃａｃｈｅ", "use": "ｕｓｅ", "cache": "ｃａｃｈｅ"}
