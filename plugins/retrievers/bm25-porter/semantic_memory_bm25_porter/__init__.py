"""BM25 over English-stemmed words (FTS5 `porter unicode61`): the keyword channel.

Owns the external-content FTS5 table `memories_fts`, kept in step with `memories` by triggers in
the writer's transaction. Queries are the OR of the query's non-stopword terms.
"""

from __future__ import annotations

import sqlite3

from semantic_memory.channels import STOPWORDS, fts_search, create_fts_table, or_query, words
from semantic_memory.config import Settings
from semantic_memory.models import ChannelHit, Memory, RecallFilters
from semantic_memory.plugins import hookimpl

TABLE = "memories_fts"


class PorterChannel:
    name = "porter"
    weight = 1.0

    def setup(self, conn: sqlite3.Connection) -> None:
        create_fts_table(conn, TABLE, "porter unicode61 remove_diacritics 2")

    def index(self, conn: sqlite3.Connection, memories: list[Memory]) -> None:
        """Nothing to do: the table's triggers index each insert."""

    @staticmethod
    def match_expression(query: str) -> str:
        terms = words(query)
        content = [t for t in terms if t not in STOPWORDS]
        return or_query(content or terms)

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]:
        return fts_search(conn, TABLE, self.match_expression(query), k, filters)


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(PorterChannel())
