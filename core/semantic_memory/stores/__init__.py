"""Stores: where memories, injections and telemetry live. A store is a plugin like a channel.

The SQLite store (`stores/sqlite.py`, one file) is the default; installed plugins add others
through the `register_stores` hook (the PostgreSQL store shares one database among a team's
services). `MEMORY_DB_URL` picks one by its scheme (`sqlite:///path`, `postgresql://…`); without
it, `MEMORY_DB_PATH` names a SQLite file. What the engine asks of a store is `MemoryStore`; what
a channel gets from it is a DB-API connection of the store's engine (`write()`, `snapshot()`),
so a channel declares the stores it speaks (`Channel.stores`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from .base import StoreError

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import Memory, RecallFilters

__all__ = ["MemoryStore", "StoreError", "open_store", "redact_url", "scheme_of", "store_url"]


class MemoryStore(Protocol):
    """The store interface. Methods taking `conn` run inside the caller's transaction (one
    from `write()` or `snapshot()`); the others open their own."""

    #: Engine name channels declare support for ("sqlite", "postgresql").
    name: str
    #: Where the data is, safe to show and log (a path, or a URL without its password).
    location: str
    #: The driver's parameter mark in SQL ("?" for sqlite3, "%s" for psycopg).
    placeholder: str
    #: Whether a recall may open more snapshots while it holds one (channels in parallel).
    parallel_snapshots: bool

    # connections: a DB-API connection of the store's engine
    def write(self) -> AbstractContextManager[Any]: ...
    def read(self) -> Any: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    def close(self) -> None: ...

    @property
    def schema_version(self) -> int: ...
    def size_bytes(self) -> int: ...

    # ingest, inside one write transaction
    def known_uids(self, conn: Any, uids: list[str]) -> set[str]: ...
    def live_by_hash(self, conn: Any, digests: list[str]) -> dict[str, tuple[int, str]]: ...
    def last_seq(self, conn: Any, session: str) -> int | None: ...
    def insert(self, conn: Any, rows: list[Memory]) -> list[tuple[Memory, bool]]: ...
    def touch(self, conn: Any, ids: list[int], ts: float) -> None: ...
    def load(self, conn: Any, ids: list[int]) -> dict[int, Memory]: ...

    # memories
    def get(self, uid: str) -> Memory | None: ...
    def list(self, filters: RecallFilters, limit: int, offset: int) -> list[Memory]: ...
    def count(self, filters: RecallFilters) -> int: ...
    def totals(self, conn: Any) -> tuple[int, int]: ...
    def grouped(self, conn: Any, column: str, *, named_only: bool = False,
                limit: int = 50) -> dict[str, int]: ...
    def unnamed(self, conn: Any, column: str) -> int: ...
    def values(self, column: str, prefix: str) -> list[tuple[str, int]]: ...
    def export(self, include_deleted: bool) -> Iterator[Memory]: ...
    def adjacent(self, conn: Any, memory: Memory, window: int, filters: RecallFilters
                 ) -> list[tuple[int, Memory]]: ...
    def live_by_uid(self, conn: Any, uid: str) -> Memory | None: ...
    def replace(self, conn: Any, old: Memory, new: Memory, ts: float) -> None: ...
    def revisions(self, uid: str) -> list[dict[str, Any]]: ...
    def forget(self, uid: str, ts: float) -> bool: ...

    # injection telemetry
    def record_injection(self, row: dict[str, Any], uids: list[str]) -> int: ...
    def injected_in_session(self, session: str) -> set[str]: ...
    def injections(self, harness: str | None, project: str | None, limit: int, offset: int
                   ) -> list[dict[str, Any]]: ...
    def memory_injections(self, uid: str, limit: int, offset: int
                          ) -> tuple[list[dict[str, Any]], int]: ...
    def injection_totals(self, conn: Any, since: float) -> dict[str, int]: ...
    def injection_groups(self, conn: Any, column: str) -> dict[str, int]: ...
    def top_injected(self, conn: Any, top: int) -> list[tuple[str, int, str | None]]: ...
    def injections_per_day(self, conn: Any, start: float) -> dict[str, tuple[int, int]]: ...
    def injection_counts(self, conn: Any, uids: list[str]) -> dict[str, int]: ...
    def export_injections(self) -> Iterator[dict[str, Any]]: ...
    def restore_injections(self, rows: list[dict[str, Any]]) -> int: ...

    # maintenance
    def purge(self, artifact_cutoff: float | None, injection_cutoff: float | None
              ) -> tuple[int, int, int]: ...
    def optimize(self, vacuum: bool = False) -> list[str]: ...


def store_url(settings: Settings) -> str:
    """The store the settings name: MEMORY_DB_URL, else the SQLite file MEMORY_DB_PATH."""
    return settings.db_url or str(settings.resolved_db_path)


def scheme_of(url: str) -> str:
    """`postgresql` of `postgresql+psycopg://…` (and `postgres://`); `sqlite` of a bare path."""
    scheme = urlsplit(url).scheme.split("+", 1)[0].lower() if "://" in url else ""
    if scheme in ("", "file", "sqlite"):
        return "sqlite"
    return "postgresql" if scheme == "postgres" else scheme


def redact_url(url: str) -> str:
    """The URL without its password, for logs and stats (never print a connection secret)."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_store(settings: Settings, pm: Any) -> MemoryStore:
    """Open the store MEMORY_DB_URL (or MEMORY_DB_PATH) names, through `register_stores`."""
    url = store_url(settings)
    scheme = scheme_of(url)
    kinds: list[Any] = []
    pm.hook.register_stores(register=kinds.append)
    for kind in kinds:
        if scheme in kind.schemes:
            return kind.open(url, settings)
    known = ", ".join(sorted({s for kind in kinds for s in kind.schemes}))
    hint = " (install semantic-memory-postgres)" if scheme == "postgresql" else ""
    raise StoreError(f"no store plugin for {scheme}:// URLs{hint}; installed: {known}")
