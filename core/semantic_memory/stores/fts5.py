"""The FTS5 search engine the SQLite store's keyword channels share: quoting, bounded OR
queries on big stores, BM25 ranking (bm25() or binary term frequency), IDF coverage, query
feedback and the external-content table kept in step by triggers."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping

from .. import keywords
from ..keywords import MAX_QUERY_TERMS, STOPWORDS, bm25_idf, coverages, words
from ..models import ChannelHit, RecallFilters
from .sqlite import run_script

def fts_phrase(term: str) -> str:
    """Quote a term as an FTS5 string: no query syntax in user text survives quoting."""
    return '"' + term.replace('"', '""') + '"'


def fts_terms(terms: list[str], prefix_min: int = 0,
              spelled: Mapping[str, str] | None = None) -> list[str]:
    """Each term as a quoted FTS5 phrase (at most MAX_QUERY_TERMS).

    With `prefix_min` > 0, a term of at least that many characters (not a number) also matches
    as a prefix (`"term"*`; FTS5 stems the prefix too, so "health"* finds "healthy").
    A term `spelled` maps to another spelling matches either (`("maxbodybytes"* OR "max body
    bytes"*)`): one phrase to count, weigh and match, so a memory holding both forms counts
    the term once toward the relevance bar.
    """
    def either(term: str) -> str:
        one = search_phrase(term, prefix_min)
        other = spelled.get(term) if spelled else None
        return one if other is None else f"({one} OR {search_phrase(other, prefix_min)})"

    return [either(t) for t in terms[:MAX_QUERY_TERMS]]


def search_phrase(term: str, prefix_min: int = 0) -> str:
    """`term` as a quoted FTS5 phrase, also matching as a prefix when `prefix_min` > 0 and it
    has that many characters or more (not a number)."""
    star = prefix_min > 0 and len(term) >= prefix_min and not term.isdigit()
    return fts_phrase(term) + ("*" if star else "")


def unknown_word_spellings(
    conn: sqlite3.Connection, table: str, terms: list[str], query: str, counts: MatchCounts,
    prefix_min: int = 0, compounds: bool = True,
) -> dict[str, str]:
    """Another spelling (`fts_terms`' `spelled`) of each of `terms` (words of `query`) that
    the index holds nowhere: a hash typed in full its short form (`keywords.short_hash`), and
    with `compounds` a word its first reading as a compound typed otherwise that the index
    holds (`keywords.compound_readings`: "healthcheck" -> the phrase "health check", which
    also matches `health-check`; "scaler" in "auto scaler" -> "autoscaler").

    Whether a term is held is the search's own phrase for it (`prefix_min`) counted up to 1
    over the whole index, so a query whose words some memory holds is searched as before. A
    term of neither shape costs nothing, one of them a bounded count (remembered in
    `counts`), and an unknown one a count per reading, up to the first held."""
    found: dict[str, str] = {}
    in_order: list[str] = []
    span: tuple[int, int] | None = None
    for term in terms[:MAX_QUERY_TERMS]:
        short = keywords.short_hash(term)
        if short is None and not (compounds and keywords.compound_part(term)):
            continue
        span = span or whole_span(conn)
        if counts.count(conn, table, search_phrase(term, prefix_min), 1, span):
            continue
        if short is not None:
            found[term] = short
            continue
        in_order = in_order or keywords.words(query)
        held = next((r for r in keywords.compound_readings(term, in_order)
                     if counts.count(conn, table, fts_phrase(r), 1, span)), None)
        if held is not None:
            found[term] = held
    return found


def or_query(terms: list[str], prefix_min: int = 0) -> str:
    """An FTS5 MATCH expression: any of the terms. Empty string when there are none."""
    return " OR ".join(fts_terms(terms, prefix_min))


#: Left-out terms still score the memories the cut query matches (Lucene's common terms:
#: "only used for scoring") when they match at most this multiple of the budget: FTS5 reads
#: each phrase's whole doclist once per query for its IDF. Channels opt in (`rescore=True`).
RESCORE_FACTOR = 8
#: Pairs of left-out common phrases tried as `(a AND b)` selections, rarest pairs first: each
#: costs a count over both phrases' matches.
MAX_COMMON_PAIRS = 3


def whole_span(conn: sqlite3.Connection) -> tuple[int, int]:
    """The id range (1, highest id) every memory lies in: a search or count over all of them."""
    return 1, conn.execute("SELECT coalesce(max(id), 0) FROM memories").fetchone()[0]


def _doc_count(
    conn: sqlite3.Connection, table: str, phrase: str, cap: int, ids: tuple[int, int]
) -> int:
    """Memories with an id in `ids` (lo, hi) matching `phrase`, counted up to `cap`.

    FTS5 merges the whole doclist of every term a prefix phrase (`"term"*`) covers before the
    first row, whatever the LIMIT, so a prefix phrase is counted only when the plain term is
    not common already (the prefix matches at least as many memories).
    """
    sql = (f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? "
           "AND rowid BETWEEN ? AND ? LIMIT ?)")
    if phrase.endswith("*"):
        plain = conn.execute(sql, (phrase[:-1], *ids, cap)).fetchone()[0]
        if plain >= cap:
            return plain
    return conn.execute(sql, (phrase, *ids, cap)).fetchone()[0]


class MatchCounts:
    """Phrase match counts remembered across queries: counting a common phrase is the dear
    part of a bounded search (up to `cap` row visits per phrase, every query).

    Ids only grow, so a count taken over (lo, hi) still bounds the count over (lo, hi') for
    hi' >= hi: at least the old count, and, when it was exact, at most the old count plus
    hi' - hi. A remembered count is reused while those bounds answer the question (common
    phrases: for good; exact ones: until the store has grown by an eighth of the count). Only a
    purge's hard deletes can make a bound stale, and a count only steers which terms a search
    leaves out, never which hits the kept terms return. One per channel instance.
    """

    #: Remembered phrases; the memo starts afresh when full.
    SIZE = 4096

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, int], tuple[int, int, bool]] = {}

    def count(
        self, conn: sqlite3.Connection, table: str, phrase: str, cap: int, ids: tuple[int, int]
    ) -> int:
        """`_doc_count`, from memory where the remembered bounds settle it."""
        key = (table, phrase, ids[0])
        seen = self._seen.get(key)
        if seen is not None and seen[0] <= ids[1]:
            hi, n, exact = seen
            if n >= cap:
                return cap
            grown = ids[1] - hi
            if exact and n + grown < cap and grown <= n // 8 + 8:
                return n + grown  # an upper bound: conservative for every caller
        n = _doc_count(conn, table, phrase, cap, ids)
        if len(self._seen) >= self.SIZE:
            self._seen.clear()
        self._seen[key] = (ids[1], n, n < cap)
        return n


def _cut(counts: list[int], lengths: list[int], budget: int) -> tuple[list[int], int]:
    """Indexes of the rarest phrases whose counts fit the budget (at least one, in query
    order) and their total count. Among equal (capped) counts the longer phrase goes first."""
    keep: list[int] = []
    total = 0
    for i in sorted(range(len(counts)), key=lambda i: (counts[i], -lengths[i])):
        if keep and total + counts[i] > budget:
            break
        keep.append(i)
        total += counts[i]
    return sorted(keep), total


def bounded_search(
    conn: sqlite3.Connection,
    table: str,
    phrases: list[str],
    k: int,
    filters: RecallFilters,
    budget: int | None = None,
    rescore: bool = False,
    counts: MatchCounts | None = None,
    binary_tf: bool = False,
) -> list[ChannelHit]:
    """`fts_search` for the OR of `phrases` (FTS5 phrase strings) within MATCH_BUDGET
    (`binary_tf_search` with `binary_tf`).

    Sizing a query costs at most budget + 1 row visits per phrase (counts with a LIMIT), and
    nothing when the memories in reach number no more than the budget. When even the rarest
    phrase matches more memories than the budget, its newest `budget` matches are ranked. A
    project filter also bounds the search to the project's id range (memories of one project
    are mostly stored together), so counts and cuts are about that range.
    """
    budget = keywords.MATCH_BUDGET if budget is None else budget
    counts = counts or MatchCounts()
    if not phrases:
        return []
    if filters.project is not None or filters.global_only:
        lo, hi = conn.execute(  # one index seek each (memories_project is (project, id))
            "SELECT (SELECT min(id) FROM memories WHERE project IS ?1), "
            "(SELECT max(id) FROM memories WHERE project IS ?1)",
            (filters.project,),
        ).fetchone()
        if lo is None:
            return []
    else:
        lo, hi = whole_span(conn)
    ids = (lo, hi)
    rank = _Ranking(rescore, binary_tf, counts)
    if budget <= 0 or hi - lo + 1 <= budget:
        return rank(conn, table, phrases, k, filters, ids)
    sizes = [counts.count(conn, table, p, budget + 1, ids) for p in phrases]
    hits, total, narrowed = _bounded_pass(
        conn, table, phrases, sizes, budget, k, filters, ids, rank)
    if not narrowed or 4 * len(hits) >= min(k, total):
        return hits  # exact, or enough hits (a quarter of k), or the filter dropped little
    wide = min(budget * keywords.MATCH_BUDGET_MAX_FACTOR, k * total // max(len(hits), 1))
    if wide <= budget:
        return hits
    sizes = [c if c <= budget else counts.count(conn, table, p, wide + 1, ids)
             for p, c in zip(phrases, sizes)]
    return _bounded_pass(conn, table, phrases, sizes, wide, k, filters, ids, rank)[0]


class _Ranking:
    """How a bounded search ranks what it kept: bm25() (`fts_search`, optionally rescoring the
    left-out common terms) or BM25 with binary term frequency (`binary_tf_search`)."""

    def __init__(self, rescore: bool, binary_tf: bool, counts: MatchCounts) -> None:
        # Rescoring is a bm25() expression: it has no meaning for the binary ranking.
        self.rescore, self.binary_tf, self.counts = rescore and not binary_tf, binary_tf, counts

    def __call__(
        self, conn: sqlite3.Connection, table: str, phrases: list[str], k: int,
        filters: RecallFilters, ids: tuple[int, int],
    ) -> list[ChannelHit]:
        if self.binary_tf:
            return binary_tf_search(conn, table, phrases, k, filters, ids, self.counts)
        return fts_search(conn, table, " OR ".join(phrases), k, filters, ids)


def _bounded_pass(
    conn: sqlite3.Connection, table: str, phrases: list[str], sizes: list[int], budget: int,
    k: int, filters: RecallFilters, ids: tuple[int, int], rank: _Ranking,
) -> tuple[list[ChannelHit], int, bool]:
    """One search within `budget`: hits, the matches considered, whether it was narrowed."""
    keep, total = _cut(sizes, [len(p) for p in phrases], budget)
    kept = [phrases[i] for i in keep]
    if total > budget:  # one phrase, commoner than the budget: only its newest matches
        phrase = kept[0].removesuffix("*")  # a prefix phrase would merge all its doclists first
        row = conn.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid BETWEEN ? AND ? "
            "ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (phrase, *ids, budget - 1),
        ).fetchone()
        if row:
            ids = (row[0], ids[1])
        return rank(conn, table, [phrase], k, filters, ids), budget, row is not None
    cut = len(keep) < len(phrases)
    counts = rank.counts
    if cut and rank.rescore:
        kept = kept + _common_pairs(conn, table, phrases, sizes, keep, budget - total, ids,
                                    counts)
    match = " OR ".join(kept)
    if cut and rank.rescore:
        # `(kept) AND (left-out OR kept)` matches what `kept` matches and scores the left-out
        # terms too; bm25() sums over the expression's phrases, so the kept ones count twice:
        # the common terms weigh half, between leaving them out and the exact query.
        limit = budget * RESCORE_FACTOR
        rest = [plain for i in range(len(phrases)) if i not in keep
                and counts.count(conn, table, plain := phrases[i].removesuffix("*"), limit + 1,
                                 ids) <= limit]
        if rest:
            match = f"({match}) AND ({' OR '.join(rest)} OR {match})"
            return fts_search(conn, table, match, k, filters, ids), total, cut
    return rank(conn, table, kept, k, filters, ids), total, cut


def _common_pairs(conn: sqlite3.Connection, table: str, phrases: list[str], sizes: list[int],
                  keep: list[int], room: int, ids: tuple[int, int], counts: MatchCounts
                  ) -> list[str]:
    """`(a AND b)` selections for pairs of left-out (common) phrases whose co-occurrences fit
    the budget left: a memory with two of the query's common words (a speaker's name and a
    verb) is found, as the exact query would, without scanning either word's matches."""
    left_out = sorted((i for i in range(len(phrases)) if i not in keep), key=lambda i: sizes[i])
    candidates = sorted(((i, j) for x, i in enumerate(left_out) for j in left_out[x + 1:]),
                        key=lambda pair: sizes[pair[0]] + sizes[pair[1]])[:MAX_COMMON_PAIRS]
    pairs = []
    for i, j in candidates:
        if room <= 0:
            break
        a, b = phrases[i].removesuffix("*"), phrases[j].removesuffix("*")
        n = counts.count(conn, table, f"{a} AND {b}", room + 1, ids)
        if n <= room:
            pairs.append(f"({a} AND {b})")
            room -= n
    return pairs


def fts_search(
    conn: sqlite3.Connection,
    table: str,
    match: str,
    k: int,
    filters: RecallFilters,
    ids: tuple[int, int] | None = None,
) -> list[ChannelHit]:
    """BM25 search of an external-content FTS5 table over `memories`, filters applied
    (`ids`: only memories whose id lies in that (lo, hi) range).

    FTS5's bm25() is lower-is-better; the hit score is its negation (higher is better).
    Without filters the FTS table is ranked alone and only its top k (plus slack) are checked
    against the index of forgotten memories: no row lookup for every match. (A memory that is
    gone altogether has left the index through the delete trigger.)
    """
    if not match:
        return []
    where, params = filters.sql("m")
    window, window_params = ("", []) if ids is None else (" AND rowid BETWEEN ? AND ?", list(ids))
    if not filters.narrows:  # no filter but "live"
        rows = conn.execute(
            f"SELECT rowid, bm25({table}) AS s FROM {table} WHERE {table} MATCH ?{window} "
            "ORDER BY s LIMIT ?",
            [match, *window_params, k + 16],
        ).fetchall()
        found = [r[0] for r in rows]
        forgotten = {r[0] for r in conn.execute(  # probes of the small partial index only
            "SELECT id FROM memories INDEXED BY memories_forgotten WHERE deleted = 1 "
            f"AND id IN ({','.join('?' * len(found))})", found,
        )} if found else set()
        live = set(found) - forgotten
        if len(live) >= min(k, len(rows)) or len(rows) < k + 16:
            return [ChannelHit(id=r[0], score=-r[1]) for r in rows if r[0] in live][:k]
    rows = conn.execute(
        f"SELECT f.rowid, bm25({table}) AS s FROM {table} f JOIN memories m ON m.id = f.rowid "
        f"WHERE {table} MATCH ?{window.replace('rowid', 'f.rowid')} AND {where} "
        "ORDER BY s LIMIT ?",
        [match, *window_params, *params, k],
    ).fetchall()
    return [ChannelHit(id=r[0], score=-r[1]) for r in rows]


def binary_tf_search(
    conn: sqlite3.Connection,
    table: str,
    phrases: list[str],
    k: int,
    filters: RecallFilters,
    ids: tuple[int, int],
    counts: MatchCounts | None = None,
) -> list[ChannelHit]:
    """Memories with an id in `ids` matching any of `phrases`, ranked by BM25 with k1 = 0: the
    summed IDF of the phrases each one contains (a phrase counts once, whatever its frequency
    and the memory's length), newer first among equals; filters applied.

    For phrases that are dear to match (a word is a phrase of many trigrams): bm25() reads
    every phrase's whole doclist for its IDF and then matches it again, where this matches each
    phrase once and takes document counts from `counts`, which a bounded search has already
    filled for the phrases it kept (half the work at 1M memories).
    """
    phrases = phrases[:MAX_QUERY_TERMS]
    counts = counts or MatchCounts()
    docs = max(ids[1] - ids[0] + 1, 1)
    union: list[str] = []
    params: list[object] = []
    for phrase in phrases:
        # One phrase ranks by recency alone: no need to count it.
        df = min(docs, counts.count(conn, table, phrase, docs + 1, ids)) if len(phrases) > 1 else 1
        if df:
            union.append(f"SELECT rowid AS id, ? AS w FROM {table} WHERE {table} MATCH ? "
                         "AND rowid BETWEEN ? AND ?")
            params += [bm25_idf(docs, df), phrase, *ids]
    if not union:
        return []
    where, filter_params = filters.sql("m")
    rows = conn.execute(
        f"WITH hits(id, w) AS ({' UNION ALL '.join(union)}) "
        f"SELECT h.id, sum(h.w) AS s FROM hits h JOIN memories m ON m.id = h.id WHERE {where} "
        "GROUP BY h.id ORDER BY round(s, 9) DESC, h.id DESC LIMIT ?",  # float sums: ties tie
        [*params, *filter_params, k],
    ).fetchall()
    return [ChannelHit(id=r[0], score=r[1]) for r in rows]


def idf_coverage(
    conn: sqlite3.Connection, table: str, terms: list[str], doc_id: int,
    counts: MatchCounts | None = None,
) -> float:
    """How much of the query one document contains, IDF-weighted (0..1): the sum of the BM25
    IDFs of the terms it matches over the sum for all terms. A rare query term the document
    lacks (or that no memory contains) pulls it down; stopword-like terms barely count.
    Channels use it for `confidence` (the keyword fast path); `counts` (the channel's own)
    remembers document frequencies across queries."""
    phrases = fts_terms(terms)
    weights = idf_weights(conn, table, phrases, counts)
    sql = f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid = ?"  # one seek per term
    matched = [{doc_id} if conn.execute(sql, (p, doc_id)).fetchone() else set()
               for p in phrases[:MAX_QUERY_TERMS]]
    return coverages(weights, matched, [doc_id])[doc_id]


def idf_weights(
    conn: sqlite3.Connection, table: str, phrases: list[str], counts: MatchCounts | None = None,
    min_df: int = 0,
) -> list[float]:
    """BM25's IDF of each FTS5 phrase over the whole index (a phrase no memory matches weighs
    the most). With `min_df` 1, a term no memory contains weighs like one that a single memory
    contains, instead of dwarfing the rest on a small store (on 5 memories an absent word
    weighs 3.5x one that two memories share)."""
    n = indexed_documents(conn, table) or 1
    counts = counts or MatchCounts()
    ids = whole_span(conn)
    weights = []
    for phrase in phrases[:MAX_QUERY_TERMS]:
        df = min(n, counts.count(conn, table, phrase, n + 1, ids))
        weights.append(bm25_idf(n, max(df, min_df)))
    return weights


def feedback_words(
    conn: sqlite3.Connection, table: str, query: str, ids: list[int], n: int,
    counts: MatchCounts | None = None,
) -> list[str]:
    """Query feedback: the `n` words of the memories `ids` (a first search's best) that say
    most about them beyond the query, ranked by BM25 IDF times how many of them hold the word.
    Left out: the query's words, stopwords, numbers, words under 3 characters, and words no
    other memory holds (they find nothing new). Document counts are capped at MATCH_BUDGET: a
    commoner word weighs next to nothing anyway."""
    if not ids:
        return []
    asked = set(words(query))
    held: dict[str, int] = {}
    for (text,) in conn.execute(
            f"SELECT content FROM memories WHERE id IN ({','.join('?' * len(ids))})", ids):
        for word in words(text):
            if len(word) >= 3 and not word.isdigit() and word not in STOPWORDS | asked:
                held[word] = held.get(word, 0) + 1
    counts = counts or MatchCounts()
    docs = indexed_documents(conn, table) or 1
    span = whole_span(conn)
    weighed = []
    for word, holders in held.items():
        df = counts.count(conn, table, fts_phrase(word), keywords.MATCH_BUDGET + 1, span)
        if df >= 2:
            weighed.append((-holders * bm25_idf(docs, df), word))
    return [word for _, word in sorted(weighed)[:n]]


class TextMatcher:
    """Which of a few texts match FTS5 phrases under a tokenizer, through a small in-memory
    FTS5 table per thread, refilled per call. Judging the handful of memories a recall returns
    this way costs microseconds; probing the store's index per phrase and memory would merge a
    prefix phrase's doclists every time (~8 ms a recall at 100k memories)."""

    def __init__(self, tokenize: str) -> None:
        self.tokenize = tokenize
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            conn.execute(f"CREATE VIRTUAL TABLE texts USING fts5(body, tokenize='{self.tokenize}')")
            self._local.conn = conn
        return conn

    def matching(self, phrases: list[str], texts: dict[int, str]) -> list[set[int]]:
        """For each phrase, the ids of the texts it matches."""
        conn = self._conn()
        with conn:
            conn.execute("DELETE FROM texts")
            conn.executemany("INSERT INTO texts(rowid, body) VALUES (?, ?)", texts.items())
            return [{r[0] for r in conn.execute("SELECT rowid FROM texts WHERE texts MATCH ?",
                                                (phrase,))} for phrase in phrases]


def indexed_documents(conn: sqlite3.Connection, table: str) -> int:
    """Documents in an FTS5 index. Counted on its `_docsize` table (a b-tree of small rows):
    `count(*)` on an external-content FTS5 table reads every row of the content table
    (~25 ms at 100k memories)."""
    try:
        return conn.execute(f"SELECT count(*) FROM {table}_docsize").fetchone()[0]
    except sqlite3.OperationalError:  # created with columnsize=0: no docsize table
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


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
