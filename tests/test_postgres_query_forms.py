"""PostgreSQL's own keyword channels (`pg_fulltext`, `pg_trigram`: the keyword mirror off, as on a
store under MEMORY_PG_MIRROR_MIN) read a query as the SQLite channels do: a multi-word flag
(`--no-verify`) is searched and judged whole, and full-width Latin letters and digits are folded
to ASCII and still searched as typed. The same cases as tests/test_flag_queries.py and the
full-width ones of tests/test_multilingual_questions.py, on a real embedded PostgreSQL
(tests/pg.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pg
import psycopg
import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_postgres.channels import PgFullTextChannel, PgTrigramChannel
from test_flag_queries import MEMORIES as FLAG_MEMORIES
from test_multilingual_questions import FULL_WIDTH, WRITTEN_FULL_WIDTH, store_width_corpus
from test_postgres_channels import (  # noqa: F401 (conn: a fixture)
    add,
    conn,
    recall_hit,
    search,
    setup,
)

FLAG_QUERIES = [
    ("--no-verify", "flag"),
    ("why does --no-verify skip hooks?", "flag"),
    ("--no-audit", "cache_flag"),
    ("--dry-run-plan", "long"),
]


def postgres_engine(folder: Path) -> MemoryEngine:
    """An engine on a fresh PostgreSQL database whose keyword channels answer themselves."""
    engine = MemoryEngine(Settings.from_env(
        {"MEMORY_PG_MIRROR": "off"}, db_path=str(folder / "memory.db"),
        db_url=pg.new_database(), device="cpu", plugins="postgres"))
    channels = {c.name: c for c in engine.channels}
    assert {"pg_fulltext", "pg_trigram"} <= set(channels)
    assert all(c.mirror is None for c in channels.values()
               if isinstance(c, PgFullTextChannel | PgTrigramChannel))
    return engine


def ranked(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query, 5, RecallFilters(project="p"))]


def injected(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query, 5, RecallFilters(project="p"),
                                                relevant_only=True)]


# --- multi-word flags -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flag_engine(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[MemoryEngine, dict[str, str]]]:
    engine = postgres_engine(tmp_path_factory.mktemp("pgflags"))
    uids = {key: engine.store_one(NewMemory(text, project="p")).uid
            for key, text in FLAG_MEMORIES.items()}
    yield engine, uids
    engine.close()


@pytest.mark.parametrize(("query", "key"), FLAG_QUERIES)
def test_the_memory_holding_the_flag_ranks_first_and_alone_is_injected(
        flag_engine: tuple[MemoryEngine, dict[str, str]], query: str, key: str) -> None:
    engine, uids = flag_engine
    assert ranked(engine, query)[0] == uids[key]
    assert injected(engine, query) == [uids[key]]


def test_the_bare_word_still_finds_both(
        flag_engine: tuple[MemoryEngine, dict[str, str]]) -> None:
    """Only a flag is kept whole: "verify" alone finds the flag's memory too."""
    engine, uids = flag_engine
    assert {uids["flag"], uids["bare"]} <= set(ranked(engine, "verify"))


def test_the_full_text_channel_finds_the_flag_not_the_bare_word(
        conn: psycopg.Connection) -> None:  # noqa: F811 (a fixture)
    """The channel alone: `--no-verify` is the phrase 'no' <-> 'verify', which the memory
    about verifying does not hold."""
    fulltext = PgFullTextChannel()
    setup(conn, fulltext)
    flag = add(conn, FLAG_MEMORIES["flag"]).id
    add(conn, FLAG_MEMORIES["bare"])
    assert search(conn, fulltext, "--no-verify") == [flag]
    assert search(conn, fulltext, "git --no-verify") == [flag]


def test_the_full_text_bar_judges_the_flag_whole(
        conn: psycopg.Connection) -> None:  # noqa: F811 (a fixture)
    """The relevance bar weighs what the search matched: the flag, not "verify"."""
    fulltext = PgFullTextChannel()
    setup(conn, fulltext)
    flag, bare = add(conn, FLAG_MEMORIES["flag"]), add(conn, FLAG_MEMORIES["bare"])
    for text in ("Deploys go out on Tuesdays.", "The cache is warmed at start-up."):
        add(conn, text)
    hits = [recall_hit(flag), recall_hit(bare)]
    with conn.transaction():
        assert fulltext.relevant(conn, "--no-verify", hits) == {flag.id}
    assert hits[0].signals["coverage"] == 1.0 and hits[1].signals["coverage"] == 0.0


# --- full-width Latin letters and digits ----------------------------------------------------------

@pytest.fixture(scope="module")
def width_engine(tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[MemoryEngine, dict[str, str]]]:
    engine = postgres_engine(tmp_path_factory.mktemp("pgwidth"))
    uids = store_width_corpus(engine)
    yield engine, uids
    engine.close()


@pytest.mark.parametrize(("query", "memory"), FULL_WIDTH, ids=[q for q, _ in FULL_WIDTH])
def test_a_full_width_query_finds_and_injects_the_ascii_memory(
        width_engine: tuple[MemoryEngine, dict[str, str]], query: str, memory: str) -> None:
    engine, uids = width_engine
    assert injected(engine, query) == [uids[memory]]


@pytest.mark.parametrize("query", ["ＵＳＥ＿ＣＡＣＨＥ", "ｂｕｉｌｄ．ｔｏｍｌ"])
def test_a_full_width_query_still_finds_a_full_width_memory(
        width_engine: tuple[MemoryEngine, dict[str, str]], query: str) -> None:
    engine, uids = width_engine
    assert injected(engine, query) == [uids[WRITTEN_FULL_WIDTH]]


@pytest.mark.parametrize("query", ["ＵＳＥ＿ＣＡＣＨＥ", "ｂｕｉｌｄ．ｔｏｍｌ"])
def test_each_channel_finds_a_full_width_memory_as_typed(
        conn: psycopg.Connection, query: str) -> None:  # noqa: F811 (a fixture)
    """Each channel alone: the memory written in full width holds the query as typed, so it
    ranks above the one holding its words in ASCII."""
    fulltext, trigram = PgFullTextChannel(), PgTrigramChannel()
    setup(conn, fulltext, trigram)
    written = add(conn, WRITTEN_FULL_WIDTH).id
    add(conn, "The build step reads its settings from one file.")
    assert search(conn, trigram, query)[:1] == [written]
    assert search(conn, fulltext, query)[:1] == [written]
