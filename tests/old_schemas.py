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
    if settings.db_url:
        import psycopg

        with psycopg.connect(settings.db_url, autocommit=True) as conn:
            for sql, params in statements:
                conn.execute(sql.replace("?", "%s"), params)
            conn.execute("UPDATE store_meta SET value = '5' WHERE key = 'schema_version'")
    else:
        conn = sqlite3.connect(settings.db_path)
        for sql, params in statements:
            conn.execute(sql, params)
        conn.execute("PRAGMA user_version = 8")
        conn.commit()
        conn.close()
