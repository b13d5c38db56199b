"""The PostgreSQL store's own settings section (docs/postgres.md). The URL itself is the
core's (`MEMORY_DB_URL`, `MEMORY_DB_URL_FILE`): it chooses the store."""

from __future__ import annotations

from dataclasses import dataclass

from semantic_memory.config import ConfigError, SettingsSection


@dataclass(frozen=True)
class PostgresSettings(SettingsSection):
    # Connections one service's pool holds open at most (psycopg 3's pool).
    db_pool_size: int = 8

    def validate(self) -> None:
        if not 1 <= self.db_pool_size <= 1000:
            raise ConfigError(f"MEMORY_DB_POOL_SIZE must be 1..1000, not {self.db_pool_size}")
