"""The PostgreSQL store's own settings section (docs/postgres.md). The URL itself is the
core's (`MEMORY_DB_URL`, `MEMORY_DB_URL_FILE`): it chooses the store."""

from __future__ import annotations

from dataclasses import dataclass

from semantic_memory.config import ConfigError, SettingsSection


@dataclass(frozen=True)
class PostgresSettings(SettingsSection):
    # Connections one service's pool holds open at most (psycopg 3's pool).
    db_pool_size: int = 8
    # Seconds each round trip to the server may take before the connection is abandoned and
    # the request answered "unavailable" (503), and each connection attempt may wait (whole
    # seconds, at least libpq's 2: `store.connect_seconds`); 0: no deadline (connecting: 15 s).
    db_timeout: float = 5.0
    # The keyword mirror's folder (empty: `pg-mirror` beside MEMORY_DB_PATH), or "off".
    pg_mirror: str = ""
    # Live memories from which a keyword mirror is built (below it PostgreSQL's own full-text
    # and trigram searches take a few milliseconds).
    pg_mirror_min: int = 20_000
    # On opening the store, record this service's MEMORY_FORGET_GRACE_DAYS and TTLs as the
    # team's, in place of the longest any service announced: how a team lowers them (set it
    # for one command, after every service's own settings were lowered; docs/postgres.md).
    pg_retention_reset: bool = False

    def validate(self) -> None:
        if not 1 <= self.db_pool_size <= 1000:
            raise ConfigError(f"MEMORY_DB_POOL_SIZE must be 1..1000, not {self.db_pool_size}")
        if not 0 <= self.db_timeout <= 86_400:
            raise ConfigError(f"MEMORY_DB_TIMEOUT must be 0..86400 seconds, not {self.db_timeout}")
        if self.pg_mirror_min < 0:
            raise ConfigError(f"MEMORY_PG_MIRROR_MIN must be >= 0, not {self.pg_mirror_min}")
