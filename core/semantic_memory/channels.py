"""The contract a retrieval channel implements, plus helpers for FTS5-based channels."""

from __future__ import annotations

import math
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


def fts_terms(terms: list[str], prefix_min: int = 0) -> list[str]:
    """Each term as a quoted FTS5 phrase (at most MAX_QUERY_TERMS).

    With `prefix_min` > 0, a term of at least that many characters (not a number) also matches
    as a prefix (`"term"*`; FTS5 stems the prefix too, so "health"* finds "healthy").
    """
    def one(term: str) -> str:
        star = prefix_min > 0 and len(term) >= prefix_min and not term.isdigit()
        return fts_phrase(term) + ("*" if star else "")

    return [one(t) for t in terms[:MAX_QUERY_TERMS]]


def or_query(terms: list[str], prefix_min: int = 0) -> str:
    """An FTS5 MATCH expression: any of the terms. Empty string when there are none."""
    return " OR ".join(fts_terms(terms, prefix_min))


#: Work bound of an OR query, in matching rows. BM25 scores every memory that contains any
#: query term, so on a big store one common term ("project", a speaker's name) costs more than
#: all the others together. When the terms' document frequencies add up to more than this,
#: terms are kept rarest first while they fit (always at least the rarest one) and the commoner
#: rest, whose IDF is lowest, is left out (the "common terms" cut of Lucene). A query is exact
#: whenever its terms match at most this many memories, so on every store up to that size.
MATCH_BUDGET = 2_000
#: A cut query that leaves fewer than k hits (a narrow filter) is run again with the budget
#: that the share of its matches passing the filter asks for, up to this multiple of it.
MATCH_BUDGET_MAX_FACTOR = 16


def _doc_count(conn: sqlite3.Connection, table: str, phrase: str, cap: int) -> int:
    """Memories matching `phrase`, counted up to `cap` (so the cost is bounded)."""
    return conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)",
        (phrase, cap),
    ).fetchone()[0]


def bounded_search(
    conn: sqlite3.Connection,
    table: str,
    phrases: list[str],
    k: int,
    filters: RecallFilters,
    budget: int | None = None,
) -> list[ChannelHit]:
    """`fts_search` for the OR of `phrases` (FTS5 phrase strings), within a work budget.

    Each phrase's document count is taken with a LIMIT just above the budget, so sizing a
    query costs at most that many row visits per phrase however common the phrase is.
    """
    budget = MATCH_BUDGET if budget is None else budget
    if len(phrases) <= 1 or budget <= 0:
        return fts_search(conn, table, " OR ".join(phrases), k, filters)
    limit = budget * MATCH_BUDGET_MAX_FACTOR
    counts: dict[int, int] = {}  # phrase index -> count (exact when below the cap used)
    cap = 0
    while True:
        for i, phrase in enumerate(phrases):
            if i not in counts or counts[i] >= cap:
                counts[i] = _doc_count(conn, table, phrase, budget + 1)
        cap = budget + 1
        keep: list[int] = []
        total = 0
        for i in sorted(counts, key=counts.__getitem__):
            if keep and total + counts[i] > budget:
                break
            keep.append(i)
            total += counts[i]
        hits = fts_search(conn, table, " OR ".join(phrases[i] for i in sorted(keep)), k, filters)
        if len(keep) == len(phrases) or len(hits) >= k or budget >= limit:
            return hits
        # `total` matches gave len(hits) that pass the filters: scale up to k of them (x2).
        budget = min(limit, max(budget * 2, 2 * k * total // max(len(hits), 1)))


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


def idf_coverage(conn: sqlite3.Connection, table: str, terms: list[str], doc_id: int) -> float:
    """How much of the query one document contains, IDF-weighted (0..1): the sum of the BM25
    IDFs of the terms it matches over the sum for all terms. A rare query term the document
    lacks (or that no memory contains) pulls it down; stopword-like terms barely count.
    Channels use it for `confidence` (the keyword fast path)."""
    terms = terms[:MAX_QUERY_TERMS]
    if not terms:
        return 0.0
    n = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] or 1
    total = got = 0.0
    for term in terms:
        phrase = fts_phrase(term)
        df = conn.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                          (phrase,)).fetchone()[0]
        idf = math.log((n - df + 0.5) / (df + 0.5) + 1.0)
        total += idf
        if df and conn.execute(f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid = ?",
                               (phrase, doc_id)).fetchone():
            got += idf
    return got / total if total > 0 else 0.0


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
