"""Stores as older releases left them, made with SQL from a current one: no older release
has to run (nor its commit be in the checkout's history).

(No tests here: helpers for the migration tests.)
"""

from __future__ import annotations

import sqlite3

from semantic_memory.config import Settings


def as_written_before_v9(settings: Settings, statements: list[tuple[str, tuple]]) -> None:
    """Run raw `statements` (with `?`) on the store and mark it as a release before names
    were normalized left it (SQLite schema 8, PostgreSQL 5)."""
    as_written_at(settings, statements, sqlite_version=8, pg_version=5)


def as_written_before_v11(settings: Settings, statements: list[tuple[str, tuple]]) -> None:
    """Run raw `statements` on the store and mark it as a release before names were composed
    (NFC) left it (schema 10, both stores)."""
    as_written_at(settings, statements, sqlite_version=10, pg_version=10)


def as_written_at(settings: Settings, statements: list[tuple[str, tuple]], *,
                  sqlite_version: int, pg_version: int) -> None:
    """Run raw `statements` (with `?`) on the store and mark it at the given schema version."""
    if settings.db_url:
        import psycopg

        with psycopg.connect(settings.db_url, autocommit=True) as conn:
            for sql, params in statements:
                conn.execute(sql.replace("?", "%s"), params)
            conn.execute("UPDATE store_meta SET value = %s WHERE key = 'schema_version'",
                         (str(pg_version),))
    else:
        conn = sqlite3.connect(settings.db_path)
        for sql, params in statements:
            conn.execute(sql, params)
        conn.execute(f"PRAGMA user_version = {sqlite_version}")
        conn.commit()
        conn.close()
