"""BM25 over English-stemmed words (FTS5 `porter unicode61`): the keyword channel.

Owns the external-content FTS5 table `memories_fts`, kept in step with `memories` by triggers in
the writer's transaction. Queries are the OR of the query's non-stopword terms; a term of
PREFIX_MIN+ letters also matches as a (stemmed) prefix, so "health" finds "healthy" and "paint"
finds "painting"/"painter", and identifiers' prefixes match ("user" -> "username"). On a big
store the commonest terms are left out of the OR (`channels.bounded_search`).
"""

from __future__ import annotations

import sqlite3

from semantic_memory.channels import (
    STOPWORDS,
    MatchCounts,
    bounded_search,
    create_fts_table,
    fts_terms,
    idf_coverage,
    words,
)
from semantic_memory.config import Settings
from semantic_memory.models import ChannelHit, Memory, RecallFilters
from semantic_memory.plugins import hookimpl

TABLE = "memories_fts"
#: Shortest query term that also matches as a prefix (LoCoMo dev R@10 +0.7, bench/README.md).
PREFIX_MIN = 4


class PorterChannel:
    name = "porter"
    weight = 1.0

    def __init__(self) -> None:
        self.counts = MatchCounts()

    def setup(self, conn: sqlite3.Connection) -> None:
        create_fts_table(conn, TABLE, "porter unicode61 remove_diacritics 2")

    def index(self, conn: sqlite3.Connection, memories: list[Memory]) -> None:
        """Nothing to do: the table's triggers index each insert."""

    @staticmethod
    def phrases(query: str) -> list[str]:
        """The query's non-stopword terms (all terms if that leaves none) as FTS5 phrases."""
        terms = words(query)
        content = [t for t in terms if t not in STOPWORDS]
        return fts_terms(content or terms, prefix_min=PREFIX_MIN)

    @classmethod
    def match_expression(cls, query: str) -> str:
        """The exact OR query (search() drops the commonest terms on a big store)."""
        return " OR ".join(cls.phrases(query))

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]:
        return bounded_search(conn, TABLE, self.phrases(query), k, filters, rescore=True,
                              counts=self.counts)

    def confidence(self, conn: sqlite3.Connection, query: str, ids: list[int]) -> float | None:
        """IDF coverage of the query by the best hit (the engine's keyword fast path)."""
        if not ids:
            return 0.0
        terms = words(query)
        return idf_coverage(conn, TABLE, [t for t in terms if t not in STOPWORDS] or terms, ids[0],
                            self.counts)


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(PorterChannel())
