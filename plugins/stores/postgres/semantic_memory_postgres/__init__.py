"""semantic-memory-postgres: the PostgreSQL store and its channels (full text, pg_trgm,
pgvector), chosen with MEMORY_DB_URL=postgresql://…

Registered on every start but imported only when used: a SQLite service never loads psycopg.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from semantic_memory.hookspecs import hookimpl

if TYPE_CHECKING:
    from semantic_memory.config import Settings

    from .store import PostgresStore


class PostgresKind:
    """The store kind `register_stores` takes: opens a PostgresStore for postgresql:// URLs."""

    name = "postgresql"
    schemes = ("postgresql",)

    @staticmethod
    def open(url: str, settings: Settings) -> PostgresStore:
        from .store import PostgresStore

        return PostgresStore.open(url, settings)


@hookimpl
def register_stores(register: Callable[[Any], None]) -> None:
    register(PostgresKind)


@hookimpl
def register_channels(register: Callable[[Any], None], settings: Settings) -> None:
    from .channels import register_pg_channels

    register_pg_channels(register, settings)
