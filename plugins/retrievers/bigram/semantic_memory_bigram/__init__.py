"""BM25 over CJK character bigrams: the channel for 2-character Chinese, Japanese, Korean words.

The trigram channel needs 3 characters, and the porter channel sees a CJK run as one long token,
so a 2-character word such as 坐标 (coordinates), 投影 (projection) or 좌표 is found by neither.
This channel cuts every run of Han / kana / hangul characters into its overlapping bigrams
(a lone character stays a unigram, as in Lucene's CJKBigramFilter), both in memories and in
queries, and ranks with FTS5's bm25(). Text around the runs (Latin identifiers, code, emoji)
is ignored, so `坐标transform` and `使用json解析` index 坐标 / 使用, 解析.

Storage, all in the one db file:

- `memories_fts_bigram(tokens)`: a regular FTS5 table, rowid = memories.id, whose text is the
  space-separated bigrams (tokenizer `ascii`: every non-ASCII character is a token character,
  so each bigram is exactly one token). Memories without CJK text have no row: they cost nothing.
- `memories_fts_bigram_queue(id)`: ids still to look at. SQL triggers on `memories` fill it on
  insert or content update, but only for text with a non-ASCII character (one length
  comparison in C: plain-ASCII text, most of what coding agents store, never enters it), and
  clean up on delete (the memory's bigram row and queue entry go in the same statement).
  `index` drains it inside the writer's transaction; `setup` drains it at start-up, which is
  the catch-up for memories stored while the plugin was not installed or not allowed by
  MEMORY_PLUGINS. A table created on an existing db queues every non-ASCII memory once.
  Draining decides in Python whether there is CJK text at all; a memory without any gets no row.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from typing import Any

from semantic_memory.keywords import MAX_QUERY_TERMS, bm25_idf, coverages
from semantic_memory.stores.fts5 import (
    MatchCounts,
    fts_phrase,
    fts_search,
    idf_coverage,
    indexed_documents,
    or_query,
    whole_span,
)
from semantic_memory.channels import Channel, Confident
from semantic_memory.config import Settings
from semantic_memory.models import ChannelHit, Memory, RecallFilters
from semantic_memory.hookspecs import hookimpl
from semantic_memory.stores.sqlite import run_script

from .bar import units

TABLE = "memories_fts_bigram"
QUEUE = "memories_fts_bigram_queue"

#: Characters that form bigrams: Hangul jamo, CJK iteration/closing marks and ideographic zero,
#: hiragana, katakana (not the ・ middle dot), Hangul compatibility jamo, katakana extensions,
#: CJK ideographs (Ext. A, URO, compatibility, Ext. B+ in planes 2-3), Hangul syllables and
#: jamo extensions, halfwidth katakana and hangul.
CJK_RANGES = (
    ("\u1100", "\u11ff"),
    ("\u3005", "\u3007"),
    ("\u3041", "\u309f"),
    ("\u30a1", "\u30fa"),
    ("\u30fc", "\u30ff"),
    ("\u3131", "\u318e"),
    ("\u31f0", "\u31ff"),
    ("\u3400", "\u4dbf"),
    ("\u4e00", "\u9fff"),
    ("\ua960", "\ua97f"),
    ("\uac00", "\ud7af"),
    ("\ud7b0", "\ud7ff"),
    ("\uf900", "\ufaff"),
    ("\uff66", "\uff9f"),
    ("\uffa1", "\uffdc"),
    ("\U00020000", "\U0003ffff"),
)
_CLASS = "".join(f"{lo}-{hi}" for lo, hi in CJK_RANGES)
_RUN = re.compile(f"[{_CLASS}]+")
#: A word character outside the CJK ranges (Latin, digits, Thai, …): text this channel ignores.
_OTHER_WORD = re.compile(rf"[^\W{_CLASS}]")
#: SQL condition on a `memories` row `{row}`: its text has a non-ASCII character (UTF-8 bytes
#: outnumber characters): a superset of "has CJK text" at ~2 ns a character, where a GLOB
#: over the ranges above takes ~300 ns a character (as long as porter + trigram indexing).
_NON_ASCII = "length(CAST({row}.content AS BLOB)) > length({row}.content)"

#: Bounds one query's work, like MAX_QUERY_TERMS in core (or_query applies that cap too).
_MAX_QUERY_CHARS = 2_000
#: Memories indexed per batch when draining the queue (bounds memory use on a big catch-up).
_BATCH = 500


def cjk_runs(text: str) -> list[str]:
    """The runs of CJK characters in `text`, NFKC-normalised first, so halfwidth katakana,
    compatibility ideographs and decomposed hangul match their usual forms."""
    return _RUN.findall(unicodedata.normalize("NFKC", text))


def cjk_bigrams(text: str) -> list[str]:
    """The overlapping bigrams of every CJK run in `text` (`cjk_runs`), in order, duplicates
    kept. A run of one character yields that character."""
    out: list[str] = []
    for run in cjk_runs(text):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def query_terms(query: str) -> list[str]:
    """The query's bigrams without duplicates, in order of appearance."""
    return list(dict.fromkeys(cjk_bigrams(query[:_MAX_QUERY_CHARS])))


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    return bool(
        conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    )


def create_tables(conn: sqlite3.Connection) -> None:
    """Create the bigram table, its queue and the triggers on `memories` (idempotent).

    When the table is new (first start, or first start with this plugin on an existing db),
    every memory with non-ASCII text is queued for `drain`.
    """
    created = not _exists(conn, TABLE)
    run_script(
        conn,
        f"""
        CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING fts5(tokens, tokenize='ascii');
        CREATE TABLE IF NOT EXISTS {QUEUE} (id INTEGER PRIMARY KEY);
        CREATE TRIGGER IF NOT EXISTS {TABLE}_ai AFTER INSERT ON memories
        WHEN {_NON_ASCII.format(row="new")} BEGIN
            INSERT OR IGNORE INTO {QUEUE}(id) VALUES (new.id);
        END;
        CREATE TRIGGER IF NOT EXISTS {TABLE}_au AFTER UPDATE OF content ON memories BEGIN
            DELETE FROM {TABLE} WHERE rowid = old.id;
            INSERT OR IGNORE INTO {QUEUE}(id) SELECT new.id WHERE {_NON_ASCII.format(row="new")};
        END;
        CREATE TRIGGER IF NOT EXISTS {TABLE}_ad AFTER DELETE ON memories BEGIN
            DELETE FROM {TABLE} WHERE rowid = old.id;
            DELETE FROM {QUEUE} WHERE id = old.id;
        END;
        """,
    )
    if created:
        conn.execute(
            f"INSERT OR IGNORE INTO {QUEUE}(id) "
            f"SELECT id FROM memories m WHERE {_NON_ASCII.format(row='m')}"
        )


def drop_tables(conn: sqlite3.Connection) -> None:
    """Remove everything this plugin added to the db (triggers first: a trigger whose table is
    gone would make every insert into `memories` fail). For a permanent uninstall; installing
    again rebuilds the table from `memories`."""
    for suffix in ("ai", "au", "ad"):
        conn.execute(f"DROP TRIGGER IF EXISTS {TABLE}_{suffix}")
    conn.execute(f"DROP TABLE IF EXISTS {QUEUE}")
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def drain(conn: sqlite3.Connection) -> int:
    """Index every queued memory (replacing any older row); returns how many were processed."""
    done = 0
    while True:
        rows = conn.execute(
            f"SELECT q.id, m.content FROM {QUEUE} q LEFT JOIN memories m ON m.id = q.id "
            f"ORDER BY q.id LIMIT {_BATCH}"
        ).fetchall()
        if not rows:
            return done
        ids = [(r[0],) for r in rows]
        conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", ids)
        conn.executemany(
            f"INSERT INTO {TABLE}(rowid, tokens) VALUES (?, ?)",
            [
                (id_, " ".join(tokens))
                for id_, content in rows
                if content is not None and (tokens := cjk_bigrams(content))
            ],
        )
        conn.executemany(f"DELETE FROM {QUEUE} WHERE id = ?", ids)
        done += len(rows)


class BigramChannel(Channel, Confident):
    name = "bigram"
    stores = ("sqlite",)  # an FTS5 index in the db file
    search_on_caller_thread = True  # an FTS5 query over its own index: bounded, no hang
    #: Porter's weight. It answers only queries with CJK text, so no weight can move an
    #: English, German or Thai result. On CJK queries it is the precise channel (recall@5 96.9
    #: alone vs porter 24.0, trigram 50.0 on bench/multilingual.py), so it should count as much
    #: as porter where both answer and more than trigram (0.15): below trigram's weight
    #: trigram's order wins where they disagree and MRR@10 drops; from 0.15 to 3 the set
    #: scores the same (recall@5 is flat from 0.05). See docs/multilingual.md.
    weight = 1.0

    def __init__(self, min_coverage: float = Settings.inject_min_coverage) -> None:
        self.min_coverage = min_coverage

    def setup(self, conn: sqlite3.Connection) -> None:
        create_tables(conn)
        drain(conn)  # catch-up: memories stored while this plugin was not loaded

    def index(self, conn: sqlite3.Connection, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """The insert trigger queued the new memories with non-ASCII text: index those with
        CJK text now, in the writer's transaction."""
        drain(conn)

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]:
        return fts_search(conn, TABLE, or_query(query_terms(query)), k, filters)

    def confidence(self, conn: sqlite3.Connection, query: str, ids: list[int]) -> float | None:
        """IDF coverage of the query's bigrams by the best hit (the engine's keyword fast path,
        as porter does for words). No verdict for a query with any non-CJK word in it (a Latin
        identifier, a number): this channel cannot tell whether that part is covered."""
        terms = query_terms(query)
        text = unicodedata.normalize("NFKC", query[:_MAX_QUERY_CHARS])
        if not terms or _OTHER_WORD.search(text):
            return None
        if not ids:
            return 0.0
        return idf_coverage(conn, TABLE, terms, ids[0])

    def relevant(self, conn: sqlite3.Connection, query: str, hits: list[Any]) -> set[int]:
        """Hits holding at least MEMORY_INJECT_MIN_COVERAGE of the query's CJK text, IDF-weighted
        (the injection bar for CJK text; other words are the other channels'). What is weighed
        (`bar.py`): the query's bigrams that some memory holds, and each content character that
        stands in none of them (a word no memory holds), as much as a bigram of one memory;
        function words and the bigrams touching them are set aside. A bigram no memory holds
        is mostly one across a word boundary (率要 of 覆盖率要求) or a question word (多少,
        무슨): weighed, they had the most weight of all, and whole questions missed the bar."""
        found = units(cjk_runs(query[:_MAX_QUERY_CHARS]))
        grams = list(dict.fromkeys(g for unit in found for g in unit.grams))[:MAX_QUERY_TERMS]
        if not found:
            return set()
        docs = indexed_documents(conn, TABLE) or 1
        span, counts = whole_span(conn), MatchCounts()  # exact: a remembered 0 may grow
        held_by = {g: counts.count(conn, TABLE, fts_phrase(g), docs + 1, span) for g in grams}
        seen = [g for g in grams if held_by[g]]
        orphans = sum(1 for unit in found if all(held_by.get(g) == 0 for g in unit.grams))
        weights = [bm25_idf(docs, min(held_by[g], docs)) for g in seen]
        weights += [bm25_idf(docs, 1)] * orphans
        held = {h.memory.id: set(cjk_bigrams(h.memory.content)) for h in hits}
        matched = [{i for i, g in held.items() if gram in g} for gram in seen]
        coverage = coverages(weights, matched + [set()] * orphans, list(held))
        return {i for i, c in coverage.items() if c >= self.min_coverage}


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(BigramChannel(settings.inject_min_coverage))
