"""Stores: where memories, injections and telemetry live. A store is a plugin like a channel.

The SQLite store (`stores/sqlite.py`, one file) is the default; installed plugins add others
through the `register_stores` hook (the PostgreSQL store shares one database among a team's
services). `MEMORY_DB_URL` picks one by its scheme (`sqlite:///path`, `postgresql://…`); without
it, `MEMORY_DB_PATH` names a SQLite file. What the engine asks of a store is `MemoryStore`; what
a channel gets from it is a DB-API connection of the store's engine (`write()`, `snapshot()`),
so a channel declares the stores it speaks (`Channel.stores`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import unquote

from ..lite import url_password_span
from ..models import PLUGIN_NAME
from .base import Retention, StoreError

if TYPE_CHECKING:
    from ..config import Settings
    from ..models import Holdings, Memory, RecallFilters

__all__ = ["MemoryStore", "Retention", "StoreError", "StoreKind", "check_store_kind",
           "open_store", "redact_url", "scheme_of", "scrub_secrets", "store_url"]


class MemoryStore(Protocol):
    """The store interface. Methods taking `conn` run inside the caller's transaction (one
    from `write()` or `snapshot()`); the others open their own."""

    #: Engine name channels declare support for ("sqlite", "postgresql").
    name: str
    #: Where the data is, safe to show and log (a path, or a URL without its password).
    location: str
    #: The driver's parameter mark in SQL ("?" for sqlite3, "%s" for psycopg).
    placeholder: str
    # connections: a DB-API connection of the store's engine
    def write(self) -> AbstractContextManager[Any]: ...
    def long_write(self) -> AbstractContextManager[Any]: ...
    def read(self) -> Any: ...
    def snapshot(self) -> AbstractContextManager[Any]: ...
    # another snapshot for a channel searching beside the caller's; None: none free at once
    def spare_snapshot(self) -> AbstractContextManager[Any | None]: ...
    def savepoint(self, conn: Any, name: str) -> AbstractContextManager[None]: ...
    def close(self) -> None: ...
    # what to do, in one line, when `exc` is the store's own state (damaged, unavailable,
    # refused) rather than a bug; None otherwise
    def damage(self, exc: BaseException) -> str | None: ...

    @property
    def schema_version(self) -> int: ...
    def size_bytes(self) -> int: ...

    # ingest, inside one write transaction
    def known_uids(self, conn: Any, uids: list[str]) -> set[str]: ...
    def live_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                     ) -> dict[tuple[str | None, str], tuple[int, str]]: ...
    def forgotten_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                          ) -> dict[tuple[str | None, str], tuple[int, str]]: ...
    # the (project, hash) of those keys a purge removed a memory of (tombstones, no text)
    def purged_by_hash(self, conn: Any, keys: list[tuple[str | None, str]]
                       ) -> set[tuple[str | None, str]]: ...
    def last_seq(self, conn: Any, session: str) -> int | None: ...
    def insert(self, conn: Any, rows: list[Memory]) -> list[tuple[Memory, bool]]: ...
    def touch(self, conn: Any, ids: list[int], ts: float) -> None: ...
    def merge_duplicate(self, conn: Any, memory_id: int, into_id: int, ts: float) -> None: ...
    def load(self, conn: Any, ids: list[int]) -> dict[int, Memory]: ...

    # memories
    def get(self, uid: str) -> Memory | None: ...
    def list(self, filters: RecallFilters, limit: int, offset: int) -> list[Memory]: ...
    def count(self, filters: RecallFilters, at_most: int | None = None) -> int: ...
    def any_live(self, conn: Any, filters: RecallFilters) -> bool: ...
    def totals(self, conn: Any) -> tuple[int, int]: ...
    def value_counts(self, conn: Any, columns: tuple[str, ...] = ...
                     ) -> dict[str, dict[str | None, int]]: ...
    def last_updated(self, conn: Any) -> float | None: ...
    def values(self, column: str, prefix: str) -> list[tuple[str, int]]: ...
    def export(self, include_deleted: bool) -> Iterator[Memory]: ...
    def export_current(self, filters: RecallFilters) -> Iterator[Memory]: ...
    def adjacent(self, conn: Any, memories: list[Memory], window: int, filters: RecallFilters
                 ) -> dict[int, list[tuple[int, Memory]]]: ...
    def live_by_uid(self, conn: Any, uid: str) -> Memory | None: ...
    def replace(self, conn: Any, old: Memory, new: Memory, ts: float) -> None: ...
    def revisions(self, uid: str) -> list[dict[str, Any]]: ...
    def export_revisions(self) -> Iterator[dict[str, Any]]: ...
    def restore_revisions(self, rows: list[dict[str, Any]]) -> int: ...
    def forget(self, uid: str, ts: float) -> list[str] | None: ...
    def forgotten(self, limit: int, project: str | None = None, global_only: bool = False
                  ) -> list[Memory]: ...
    def unforget(self, uid: str, ts: float) -> tuple[Memory | None, str | None]: ...
    def restore_forgotten(self, conn: Any, uid: str, ts: float
                          ) -> tuple[Memory | None, str | None]: ...
    def supersede(self, conn: Any, ids: list[int], uid: str) -> None: ...
    def make_current(self, conn: Any, ids: list[int]) -> None: ...
    def containing(self, conn: Any, memory: Memory, words: Sequence[str], limit: int,
                   source: str | None = None) -> list[Memory]: ...
    def unsupersede(self, uid: str) -> str | None: ...
    def supersedes(self, uid: str, conn: Any = None) -> list[str]: ...
    def clear_dangling_supersessions(self, conn: Any) -> int: ...

    # injection telemetry
    def record_injection(self, row: dict[str, Any], uids: list[str]) -> int: ...
    def injected_in_session(self, session: str) -> set[str]: ...
    def injections(self, harness: str | None, project: str | None, limit: int, offset: int,
                   global_only: bool = False) -> list[dict[str, Any]]: ...
    def memory_injections(self, uid: str, limit: int, offset: int
                          ) -> tuple[list[dict[str, Any]], int]: ...
    def injection_count(self, conn: Any) -> int: ...
    def injection_totals(self, conn: Any, since: float) -> dict[str, int]: ...
    def injection_groups(self, conn: Any, column: str) -> dict[str, int]: ...
    def top_injected(self, conn: Any, top: int) -> list[tuple[str, int, str | None]]: ...
    def injections_per_day(self, conn: Any, start: float) -> dict[str, tuple[int, int]]: ...
    def injection_counts(self, conn: Any, uids: list[str]) -> dict[str, int]: ...
    def export_injections(self) -> Iterator[dict[str, Any]]: ...
    def restore_injections(self, rows: list[dict[str, Any]]) -> int: ...

    # maintenance
    def purge(self, artifact_cutoff: float | None, injection_cutoff: float | None,
              on_delete: Callable[[Any, list[int]], None] | None = None,
              forgotten_cutoff: float | None = None) -> tuple[int, int, int, int]: ...
    # where a text is kept, and its hard deletion (`memory-mcp purge --matching`)
    def holding(self, text: str, project: str | None = None, global_only: bool = False
                ) -> Holdings: ...
    def purge_holdings(self, found: Holdings, text: str,
                       on_delete: Callable[[Any, list[int]], None] | None = None
                       ) -> tuple[int, int, int, int]: ...
    # the tombstones purges leave, for a migration
    def export_purged(self) -> Iterator[dict[str, Any]]: ...
    def restore_purged(self, rows: list[dict[str, Any]]) -> int: ...
    def optimize(self, vacuum: bool = False) -> list[str]: ...
    def scrub_indexes(self) -> list[str]: ...
    def bound_index_levels(self) -> list[str]: ...
    def flush_journal(self) -> str | None: ...
    # names an older release's process wrote since `since`, as ingest writes them now
    def normalize_names(self, since: float) -> bool: ...
    # the periods maintenance keeps things for, given (and announcing) a service's own
    def retention(self, own: Retention) -> Retention: ...


def store_url(settings: Settings) -> str:
    """The store the settings name: MEMORY_DB_URL, else the SQLite file MEMORY_DB_PATH."""
    return settings.db_url or str(settings.resolved_db_path)


def scheme_of(url: str) -> str:
    """`postgresql` of `postgresql+psycopg://…` (and `postgres://`); `sqlite` of a bare path.
    Read by position, so a malformed host or port is the store's to report, not a traceback."""
    scheme = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    if scheme in ("", "file", "sqlite"):
        return "sqlite"
    return "postgresql" if scheme == "postgres" else scheme


#: A URL query parameter (libpq takes any connection parameter there).
_QUERY_PARAM = re.compile(r"(?<=[?&])([^=&]*)=([^&]*)")
#: A parameter whose name holds "password" (`password`, `sslpassword`: a client key's
#: passphrase) with its value, as a driver's message may quote it: in a URL's query string or
#: libpq's `key=value` form, quoted or not.
_SECRET_SETTING = re.compile(r"""(\w*password\w*\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'"]+)""",
                             re.IGNORECASE)
#: What splits a password that was not percent-encoded into pieces a driver may quote alone
#: (`Pa@Yss9`: libpq reports the host `Yss9@127.0.0.1`).
_URL_DELIMITERS = re.compile(r"[@/?#:\s]+")
#: What a driver puts right around a value it quotes: quotes, URL and `key=value` punctuation.
#: A secret is masked only between two of these (or the text's ends): next to a space, or
#: inside a word, it is ordinary text, and masking it there would show what the password is.
_QUOTING = "\"'`@/?#:&=,;()\\[\\]<>"
#: A value a driver quotes whole (libpq: `unexpected spaces found in "…"`, the host
#: `"…"` it could not resolve): a password that was not percent-encoded arrives there with
#: whatever stood beside it in the URL, spaces included.
_QUOTED_VALUE = re.compile(r""""[^"]*"|'[^']*'""")
#: Shortest secret, or piece of one, whose presence masks a whole quoted value: shorter ones
#: (`on`) are in too many words to tell anything.
_PIECE_MIN = 3


def _is_secret(name: str) -> bool:
    return "password" in unquote(name).lower()


def redact_url(url: str) -> str:
    """The URL without its password, for logs and stats (never print a connection secret):
    `postgresql://user:***@host/db`, and `***` for the value of every query parameter whose
    name holds "password" (`password=`, `sslpassword=`). Never raises, whatever the URL holds."""
    if "://" not in url:
        return url
    span = url_password_span(url)
    if span is not None:
        url = f"{url[:span[0]]}***{url[span[1]:]}"
    return _QUERY_PARAM.sub(lambda m: f"{m[1]}=***" if _is_secret(m[1]) else m[0], url)


def _secrets(url: str) -> set[str]:
    """The passwords `url` holds (the userinfo's, and the query's `*password*` values) as
    written and percent-decoded, with their pieces of 3 or more characters between URL
    delimiters."""
    if "://" not in url:
        return set()
    span = url_password_span(url)
    found = [url[span[0]:span[1]]] if span is not None else []
    found += [m[2] for m in _QUERY_PARAM.finditer(url) if _is_secret(m[1])]
    secrets: set[str] = set()
    for secret in found:
        for form in (secret, unquote(secret)):
            secrets.add(form)
            secrets.update(p for p in _URL_DELIMITERS.split(form) if len(p) >= 3)
    return {s for s in secrets if s.strip()}


def scrub_secrets(text: str, url: str) -> str:
    """`text` (a driver's error message) with no password of `url` in it. libpq quotes the URL
    (its scheme maybe rewritten), a malformed password (`invalid percent-encoded token:
    "Pa%Zss9"`) or a piece of one (the host `'Yss9@…'`): the URL is masked as `redact_url`
    does, any `*password*=value` setting too, and each password, and each piece of it, where it
    stands as a quoted value (see `_QUOTING`); then a quoted value still holding a piece of
    _PIECE_MIN+ characters is masked whole (`_masked_value`: pieces between spaces). Never
    inside a word or next to a space in the message's own text: a short password such as `on`
    would otherwise turn `connection` into `c***necti***`, giving it away."""
    _, sep, tail = url.partition("://")
    if sep and tail:
        text = text.replace(tail, redact_url(url).partition("://")[2])
    text = _SECRET_SETTING.sub(r"\1***", text)
    secrets = _secrets(url)
    for secret in sorted(secrets, key=len, reverse=True):
        quoted = re.compile(rf"(?:^|(?<=[{_QUOTING}])){re.escape(secret)}(?=[{_QUOTING}]|$)")
        text = quoted.sub("***", text)
    return _QUOTED_VALUE.sub(lambda m: _masked_value(m[0], secrets), text)


def _masked_value(quoted: str, secrets: set[str]) -> str:
    """A quoted value (its quotes included) masked whole when it holds a secret or a piece of
    one, or is itself a piece of one, of _PIECE_MIN+ characters: `"corp horse battery@host"`
    of the password `hunter2@corp horse battery` becomes `"***"`. Masking only the pieces
    found between quoting characters left `horse` and `battery`, between spaces, in it."""
    value = quoted[1:-1]
    if any(len(s) >= _PIECE_MIN and s in value for s in secrets) or (
            len(value.strip()) >= _PIECE_MIN and any(value in s for s in secrets)):
        return f"{quoted[0]}***{quoted[-1]}"
    return quoted


@runtime_checkable
class StoreKind(Protocol):
    """What `register_stores` registers: a class (or any object) opening one engine's stores.
    `SQLiteStore` is one; `semantic-memory-postgres`'s `PostgresKind` another. Runtime
    checkable: `check_store_kind` refuses what does not have these members."""

    #: The engine's name, unique among store kinds ("sqlite", "postgresql").
    name: str
    #: The URL schemes it opens ("postgresql"): MEMORY_DB_URL's picks the kind.
    schemes: tuple[str, ...]

    def open(self, url: str, settings: Settings) -> MemoryStore: ...


def check_store_kind(obj: object) -> str | None:
    """Why `obj` cannot be registered as a store kind (None when it can): it must be a
    `StoreKind` (checked against the protocol, not probed), with a valid name, a callable
    `open` and at least one URL scheme."""
    label = obj.__name__ if isinstance(obj, type) else type(obj).__name__
    if not isinstance(obj, StoreKind):
        return (f"{label} is not a store kind (a class with name, schemes and "
                "open(url, settings))")
    name, schemes = obj.name, obj.schemes
    if not isinstance(name, str) or not PLUGIN_NAME.match(name):
        return f"{label} has no valid name (got {name!r})"
    if not callable(obj.open):
        return f"store kind {name!r}: open is not callable"
    if not isinstance(schemes, (tuple, list)) or not schemes \
            or not all(isinstance(s, str) and s for s in schemes):
        return f"store kind {name!r}: schemes must name URL schemes, not {schemes!r}"
    return None


def open_store(settings: Settings, kinds: dict[str, StoreKind]) -> MemoryStore:
    """Open the store MEMORY_DB_URL (or MEMORY_DB_PATH) names with the kind registered for
    its scheme (`kinds`: scheme -> kind, `plugins.store_kinds`)."""
    url = store_url(settings)
    scheme = scheme_of(url)
    if scheme in kinds:
        return kinds[scheme].open(url, settings)
    known = ", ".join(sorted(kinds))
    hint = " (install semantic-memory-postgres)" if scheme == "postgresql" else ""
    raise StoreError(f"no store plugin for {scheme}:// URLs{hint}; installed: {known}")
