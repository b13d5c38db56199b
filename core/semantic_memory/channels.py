"""The contract a retrieval channel implements, plus helpers for FTS5-based channels."""

from __future__ import annotations

import re
import sqlite3
from typing import Protocol, runtime_checkable

from .models import ChannelHit, Memory, RecallFilters
from .store import run_script


@runtime_checkable
class Channel(Protocol):
    """A retrieval channel. Registered through the `register_channels` hook.

    A channel owns its own tables inside the one db file. `setup` runs once per process with a
    write connection; `index` runs inside the same transaction as every insert (channels kept in
    step by SQL triggers may do nothing there); `search` returns the best `k` candidates.
    """

    name: str
    #: Default weight in fusion; MEMORY_CHANNEL_WEIGHTS overrides it.
    weight: float

    def setup(self, conn: sqlite3.Connection) -> None: ...

    def index(self, conn: sqlite3.Connection, memories: list[Memory]) -> None: ...

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]: ...


# --- query building shared by the FTS5 channels -------------------------------------------------

_WORD = re.compile(r"\w+", re.UNICODE)

#: Short English function words: matching them says nothing about relevance.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don ll re ve d m
    o y isn aren wasn weren hasn haven hadn doesn didn won wouldn shan shouldn mustn couldn""".split()
)

#: Bounds the work a pathological (10 kB, emoji-laden) query can cause.
MAX_QUERY_TERMS = 64


def words(text: str) -> list[str]:
    """Unicode word tokens, lowercased, in order of appearance, without duplicates."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.lower()):
        seen.setdefault(match.group(), None)
    return list(seen)


def fts_phrase(term: str) -> str:
    """Quote a term as an FTS5 string: no query syntax in user text survives quoting."""
    return '"' + term.replace('"', '""') + '"'


def or_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms. Empty string when there are none."""
    return " OR ".join(fts_phrase(t) for t in terms[:MAX_QUERY_TERMS])


def fts_search(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    k: int,
    filters: RecallFilters,
) -> list[ChannelHit]:
    """BM25 search of an external-content FTS5 table over `memories`, filters applied.

    FTS5's bm25() is lower-is-better; the hit score is its negation (higher is better).
    """
    if not match:
        return []
    where, params = filters.sql("m")
    rows = conn.execute(
        f"SELECT f.rowid, bm25({table}) AS s FROM {table} f JOIN memories m ON m.id = f.rowid "
        f"WHERE {table} MATCH ? AND {where} ORDER BY s LIMIT ?",
        [match, *params, k],
    ).fetchall()
    return [ChannelHit(id=r[0], score=-r[1]) for r in rows]


def create_fts_table(conn: sqlite3.Connection, table: str, tokenize: str) -> None:
    """Create an external-content FTS5 table over memories.content, kept in step by triggers.

    The triggers run in the writer's transaction, so a memory is searchable the moment its
    insert commits. A table created on an existing db is filled with 'rebuild'.
    """
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    if exists:
        return
    run_script(
        conn,
        f"""
        CREATE VIRTUAL TABLE {table} USING fts5(
            content, content='memories', content_rowid='id', tokenize='{tokenize}');
        CREATE TRIGGER {table}_ai AFTER INSERT ON memories BEGIN
            INSERT INTO {table}(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER {table}_ad AFTER DELETE ON memories BEGIN
            INSERT INTO {table}({table}, rowid, content) VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER {table}_au AFTER UPDATE OF content ON memories BEGIN
            INSERT INTO {table}({table}, rowid, content) VALUES ('delete', old.id, old.content);
            INSERT INTO {table}(rowid, content) VALUES (new.id, new.content);
        END;
        INSERT INTO {table}({table}) VALUES ('rebuild');
        """
    )
