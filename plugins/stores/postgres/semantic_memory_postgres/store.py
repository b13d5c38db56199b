"""The PostgreSQL store: one database shared by every service of a team.

psycopg 3 with a connection pool. Every write transaction first takes one advisory lock, so
writes from all services are serialised as they are on one SQLite file (the duplicate check,
the session order and the channels' indexing never race), while reads run beside them on their
own snapshots. The unique index on live content hashes backs that up: an INSERT that would
duplicate a live memory refreshes it instead (`insert`). A killed service's transaction rolls
back and its lock goes with its connection.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.string import StrDumperUnknown
from psycopg_pool import ConnectionPool, PoolTimeout
from semantic_memory.models import Memory, RecallFilters
from semantic_memory.retrieval import current_window
from semantic_memory.stores import StoreError, redact_url, scrub_secrets
from semantic_memory.stores.names import normalize_stored_names, stale_names
from semantic_memory.stores.base import (
    MEMORY_COLUMNS_OF_M,
    Retention,
    SQLMemoryStore,
    memory_row,
    row_to_memory,
)

from .schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION, WRITE_LOCK, stored_version

if TYPE_CHECKING:
    from semantic_memory.config import Settings

log = logging.getLogger("semantic_memory.postgres")

#: Seconds a connection attempt waits when MEMORY_DB_TIMEOUT is 0 (no round-trip deadline):
#: connecting is never left without a limit (a hung server kept `serve` waiting for ever).
CONNECT_TIMEOUT_S = 15
#: libpq's floor for `connect_timeout`, in whole seconds (it reads 1 as 2).
LIBPQ_MIN_CONNECT_S = 2
#: Seconds a request waits for a pooled connection (the server down: the pool reconnecting)
#: before it is answered "unavailable" (503) rather than left hanging.
POOL_WAIT_S = 5.0
#: Seconds the pool goes on trying to replace a lost connection in the background before it
#: gives up; the next request that finds no connection then starts a new try at once.
#: psycopg's default, 5 minutes of exponential backoff (1, 2, 4 ... 128 s between tries), left
#: a server that was back waiting up to the next try: after a 10 s outage 13 s more of 503s, after
#: 2.7 minutes 95 s.
RECONNECT_S = 2.0
#: Seconds each round trip to the server may take by default (MEMORY_DB_TIMEOUT).
DEFAULT_TIMEOUT_S = 5.0
#: The least a round trip of a service's recall is given once the recall's own deadline has
#: passed (`BoundedConnection._limit`): a server that answers at once still finishes it (on a
#: loaded machine thread hops and a pool refilling after an outage spent a 1 s deadline before
#: the first statement), one that waits on a lock holds it no longer than this past it.
MIN_ROUND_TRIP_S = 0.1
#: Seconds a recall waits for a second connection to search a channel beside its own: next to
#: nothing, as the channel then searches on the recall's own connection. Waiting for one (16
#: clients' recalls each holding a connection) emptied the pool of 8: 503s after POOL_WAIT_S
#: (bench/loop_load.py).
SPARE_WAIT_S = 0.001
#: The `store_meta` key of each maintenance period (`Retention`) recorded as the team's.
RETENTION_KEY = "retention.{}"

_INSERT = """
INSERT INTO memories (uid, content, content_hash, kind, source, project, tags, created_at,
                      updated_at, deleted, session, seq)
SELECT r.uid, r.content, r.content_hash, r.kind, r.source, r.project, r.tags, r.created_at,
       r.updated_at, r.deleted, r.session, r.seq
FROM jsonb_to_recordset(%s::jsonb) AS r(ord int, uid text, content text, content_hash text,
     kind text, source text, project text, tags text, created_at float8, updated_at float8,
     deleted int2, session text, seq int)
ORDER BY r.ord
ON CONFLICT (content_hash, (coalesce(project, ''))) WHERE deleted = 0
DO UPDATE SET updated_at = memories.updated_at
RETURNING id, uid, project, content_hash, (xmax = 0) AS inserted
"""
_ROW_KEYS = ("uid", "content", "content_hash", "kind", "source", "project", "tags",
             "created_at", "updated_at", "deleted", "session", "seq")


def conninfo(url: str) -> str:
    """What libpq accepts: `postgresql+psycopg://` and `postgres://` become `postgresql://`."""
    scheme, sep, rest = url.partition("://")
    return f"postgresql://{rest}" if sep and scheme.split("+")[0] in ("postgres", "postgresql") \
        else url


def connect_seconds(timeout: float) -> int:
    """libpq's `connect_timeout` for a store whose round trips may take `timeout` seconds
    (MEMORY_DB_TIMEOUT): the same, in whole seconds and at least libpq's floor; CONNECT_TIMEOUT_S
    when there is no round-trip deadline (0). A fixed 15 s made every command and `serve`
    wait 15 s on a hung server whatever MEMORY_DB_TIMEOUT said."""
    if timeout <= 0:
        return CONNECT_TIMEOUT_S
    return max(LIBPQ_MIN_CONNECT_S, math.ceil(timeout))


#: The pool's warnings that a store's own outage line (`_PoolOutage`) or the store's
#: errors say already: a connection the store closed itself (`_checkout` closes one that
#: failed its check) or found broken after a restart. Each printed a connection's repr, under
#: a CLI command's one-line error or as a multi-line box in the service's log.
_POOL_NOISE = ("discarding closed connection", "discarding broken connection")
#: Each pool's name is its own, so that its outage warnings reach its own store's filter.
_POOL_NUMBERS = itertools.count(1)


def _not_pool_noise(record: logging.LogRecord) -> bool:
    return not (isinstance(record.msg, str) and record.msg.startswith(_POOL_NOISE))


logging.getLogger("psycopg.pool").addFilter(_not_pool_noise)


class _PoolOutage(logging.Filter):
    """One store's pool failing to connect, said in at most one line per outage. psycopg's
    pool logs a warning for every failed attempt, with libpq's message over several lines:
    3 lines under a CLI command's one `Error:` line, and 95 boxes of 6 lines in a service's
    log over 8 short outages. Here they go: in a service the first of an outage becomes one
    line on the store's logger (the requests meanwhile are 503s, each its own line), in a
    one-off command none (its `Error:` line says it). An outage ends when the pool makes a
    connection again (`PostgresStore._configure`)."""

    def __init__(self, pool_name: str, location: str, url: str, serving: bool) -> None:
        super().__init__()
        self._pool_name, self._location, self._url = pool_name, location, url
        self._serving = serving
        self._said = False  # this outage's line is out

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if not (args and args[0] == self._pool_name and record.levelno >= logging.WARNING):
            return True
        if not self._said and len(args) > 1 and isinstance(args[1], BaseException):
            self._said = True
            if self._serving:
                log.warning("postgres: the connection pool cannot reach %s: %s; it tries "
                            "again as requests come, which are answered 503 meanwhile",
                            self._location, _one_line(args[1], self._url))
        return False

    def reached(self) -> None:
        """The pool connected: the next failure is a new outage's."""
        self._said = False


class NoAnswer(psycopg.OperationalError):
    """The server did not answer a round trip within the store's deadline (MEMORY_DB_TIMEOUT)."""


class BoundedConnection(psycopg.Connection):
    """A pooled connection whose every round trip has a client-side deadline. A server that
    stops answering without closing the socket (a network partition, a stopped host) leaves
    a blocked read waiting forever, and the server-side `statement_timeout` cannot help: so
    every wait on the socket (a statement, a fetch, a commit, the pool's check) is given
    `deadline_s` through psycopg's own wait timeout, or less in a service's recall
    (`_limit`), and when it passes the connection is closed (its statement's outcome
    unknown: the pool replaces it) and `NoAnswer` raised."""

    #: Seconds one round trip may take; None: no limit (migrations, VACUUM).
    deadline_s: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit, said = self._limit()
        if limit is None or (timeout is not None and timeout < limit):
            return super().wait(gen, interval, timeout)
        started = time.monotonic()
        try:
            result = super().wait(gen, interval, limit)
        except psycopg.OperationalError:
            if time.monotonic() - started < limit:
                raise
            self.pgconn.finish()  # abandoned: the pool replaces it, the server rolls it back
            raise NoAnswer(f"no answer from the server within {said}") from None
        return result

    def _limit(self) -> tuple[float | None, str]:
        """This round trip's deadline in seconds (None: none) and how `NoAnswer` words it.
        In a service's recall (`retrieval.current_window`), what is left of the recall's own
        deadline: `deadline_s` from its start, or its caller's wait (X-Memory-Wait-Ms) where
        that ends first. Per round trip alone, a statement after the channel searches (the
        memories, the global ones) waited the whole 5 s behind a table lock once the searches
        had taken 2 s: the answer came at 7 s, 6.3 s to a hook that waits 1.5 s."""
        limit = self.deadline_s
        if limit is None:
            return None, ""
        window = current_window()
        if window is None:
            return limit, f"{limit:g} s"
        due, said = window.started + limit, f"{limit:g} s"
        if window.answer_by is not None and window.answer_by < due:
            due = window.answer_by
            said = (f"{round(window.answer_by - window.started, 2):g} s, what the recall's "
                    "caller could wait (X-Memory-Wait-Ms)")
        return min(limit, max(due - time.monotonic(), MIN_ROUND_TRIP_S)), said


class NulFreeText(StrDumperUnknown):
    """Text parameters without NUL, which PostgreSQL text cannot hold (psycopg refuses to send
    one: `GET /api/memories?project=p%00q` was a 500). A NUL becomes U+FFFD, so a filter or a
    lookup holding one matches nothing (no stored value holds a NUL: core refuses them, and
    SQLite finds nothing for such a filter either); a query's words are cut at a NUL before
    they get here (`keywords.words`), as a space would cut them, on both stores."""

    def dump(self, obj: str) -> Any:
        return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)


class _Rows:
    """A fetched result that outlives its pooled connection (what `read()` queries return)."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


#: What a privilege refusal names (English server messages; another `lc_messages` gets the
#: general advice) and, per kind, the privileges the store uses on such an object.
_REFUSED = re.compile(r"permission denied for (table|sequence|schema) (\S+)")
_USED = {"table": ("SELECT", "INSERT", "UPDATE", "DELETE"),
         "sequence": ("USAGE", "SELECT", "UPDATE"),
         "schema": ("USAGE", "CREATE")}
#: Per kind: the object's quoted name, the role's, and which of the privileges (%s, a text
#: array) the role lacks on the object named %s.
_LACKING = {
    kind: f"""SELECT format('%%I.%%I', n.nspname, c.relname), format('%%I', current_user),
                     array(SELECT p FROM unnest(%s::text[]) p
                           WHERE NOT has_{kind}_privilege(c.oid, p))
              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.oid = to_regclass(quote_ident(%s))""" for kind in ("table", "sequence")}
_LACKING["schema"] = """SELECT format('%%I', nspname), format('%%I', current_user),
                               array(SELECT p FROM unnest(%s::text[]) p
                                     WHERE NOT has_schema_privilege(oid, p))
                        FROM pg_namespace WHERE nspname = %s"""
#: The server ended the session at a timeout an admin set (SQLSTATE class 25, not psycopg's
#: OperationalError): the store's state, as a dropped connection is.
_SESSION_ENDED = (psycopg.errors.IdleInTransactionSessionTimeout,
                  psycopg.errors.TransactionTimeout)
#: A refusal whose object or privileges could not be told.
_GRANT_AS_DOCUMENTED = ("ask the admin to give the role back what docs/postgres.md's setup "
                        "gives it (its own schema, owning the store's tables)")


class _LockOnChange:
    """The connection of a channel's setup (`long_write`), as the SQLite store's: statements
    that only read take no lock, so a store already set up opens while another service writes
    (or another session holds a lock on a table). Each statement that may change something
    first takes the write lock, waiting as long as it takes (another service may be building
    the same index), and then waits at most `lock_timeout` for its table locks: a long
    transaction of another session blocks a CREATE INDEX without end. Both are taken again
    for each such statement: a savepoint rolled back releases them."""

    def __init__(self, conn: BoundedConnection, lock_timeout: str) -> None:
        self._conn = conn
        self._lock_timeout = lock_timeout

    def execute(self, sql: Any, params: Any = None) -> psycopg.Cursor[Any]:
        if not (isinstance(sql, str) and sql.lstrip()[:6].upper() == "SELECT"):
            self._conn.execute("SELECT pg_advisory_xact_lock(%s), set_config('lock_timeout', "
                               "%s, true)", (WRITE_LOCK, self._lock_timeout))
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _PooledReads:
    """`read()`: each statement borrows a pooled connection for as long as it runs."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        with self._store.store_errors(), self._store._connection() as conn:
            cursor = conn.execute(sql, params)
            rows = cursor.fetchall() if cursor.description is not None else []
            return _Rows(rows, cursor.rowcount)


class PostgresStore(SQLMemoryStore):
    """Memories, injections and telemetry in one PostgreSQL database."""

    name = "postgresql"
    schemes = ("postgresql",)
    placeholder = "%s"
    #: Case-insensitive LIKE, answered by the pg_trgm GIN index (supersession candidates).
    like_operator = "ILIKE"

    @classmethod
    def open(cls, url: str, settings: Settings) -> PostgresStore:
        from .settings import PostgresSettings

        section = settings.section(PostgresSettings)
        store = cls(url, pool_size=section.db_pool_size, timeout=section.db_timeout,
                    settings=settings, serving=settings.serving)
        if section.pg_retention_reset:
            try:
                store.reset_retention(Retention.of(settings))
            except BaseException:
                store.close()
                raise
        return store

    def __init__(self, url: str, pool_size: int = 8, timeout: float = DEFAULT_TIMEOUT_S,
                 settings: Settings | None = None, serving: bool = False) -> None:
        """`settings`: those the store is opened with, to find a running service of an older
        release on this machine before upgrading the schema (`_migrate`); None looks for none.
        `serving`: the store lives in a service, whose log says each outage of the pool in
        one line (`_PoolOutage`); a one-off command's `Error:` line says it instead."""
        self.location = redact_url(url)
        self._url = url  # never shown: errors print `location` and scrub the password out
        self._timeout = timeout or None  # 0: no deadline
        #: How long set-up and migrations wait for a table lock (`lock_timeout`; "0": always).
        self._lock_timeout = f"{round(timeout * 1000)}ms" if timeout else "0"
        self._local = threading.local()  # this thread's open transaction, for nested use
        self._outage: str | None = None  # why the server is out of reach, while it is known
        self._asking = threading.Lock()  # held by the one request asking it again (`_ask`)
        # One plain connection first: a server that cannot be reached is one line at once,
        # where the pool would retry (and log each try) until its timeout. Each attempt waits
        # MEMORY_DB_TIMEOUT (`connect_seconds`), unless the URL says its own connect_timeout.
        connect_s = connect_seconds(timeout)
        connect = {} if "connect_timeout" in url else {"connect_timeout": connect_s}
        self._ask_kwargs = {"connect_timeout": min(connect_s, round(POOL_WAIT_S))
                            } if connect else {}
        try:
            psycopg.connect(conninfo(url), **connect).close()
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {self.location}: {_one_line(exc, url)}"
                             ) from None
        name = f"semantic-memory-{next(_POOL_NUMBERS)}"
        self._pool_log = _PoolOutage(name, self.location, url, serving)
        logging.getLogger("psycopg.pool").addFilter(self._pool_log)
        self._pool = ConnectionPool(
            conninfo(url), min_size=1, max_size=max(2, pool_size), open=False, timeout=POOL_WAIT_S,
            reconnect_timeout=RECONNECT_S, kwargs={"autocommit": True, **connect},
            connection_class=BoundedConnection, configure=self._configure,
            name=name)  # checked here: `_checkout`
        try:
            self._pool.open(wait=True, timeout=connect_s)
            with self._unbounded():  # a migration may rewrite a big table
                self._migrate(settings)
        except (psycopg.Error, PoolTimeout) as exc:
            why = _one_line(exc, url)
            if isinstance(exc, psycopg.errors.InsufficientPrivilege):
                why += f": {self._grant_advice(exc)}"
            self.close()
            raise StoreError(f"cannot set up {self.location}: {why}") from None
        except StoreError:
            self.close()
            raise
        self._reads = _PooledReads(self)

    def _configure(self, conn: BoundedConnection) -> None:
        conn.deadline_s = self._timeout
        _configure(conn)
        self._outage = None  # the pool reached the server
        self._pool_log.reached()

    @contextmanager
    def store_errors(self, read_only_ours: bool = False) -> Iterator[None]:
        """Within: what the database's state refuses (`as_store_error`) is one StoreError
        naming the store, which the CLI prints as its `Error:` line and the service answers
        with 503; an error of the statement itself (a bug) goes on as it is. `read_only_ours`:
        the transaction is the store's own read-only snapshot, so a refused write there is a
        bug, not a standby."""
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            if (error := self.as_store_error(exc, read_only_ours)) is None:
                raise
            raise error from None

    def as_store_error(self, exc: BaseException, read_only_ours: bool = False
                       ) -> StoreError | None:
        """The store's one line for `exc` when it is the database's state, not a bug: a server
        down, unreachable, restarting or past the deadline, or a pool with no connection to
        spare ("is unavailable"); a privilege the role lacks (what to ask the admin to grant);
        a server that takes no writes (a standby, a database set read-only); damaged data.
        None otherwise, and for an aborted transaction, which only follows an earlier error
        on the same connection (that one is the cause)."""
        if isinstance(exc, (psycopg.OperationalError, PoolTimeout, *_SESSION_ENDED)):
            return StoreError(f"{self.location} is unavailable: {_one_line(exc, self._url)}")
        said = _primary(exc, self._url)
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return StoreError(f"{self.location}: {said}: {self._grant_advice(exc)}")
        if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction) and not read_only_ours:
            return StoreError(f"{self.location}: the server takes no writes ({said}): a "
                              "standby, or a database or role set read-only; ask the admin "
                              "for the primary's address or a writable database")
        if isinstance(exc, (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted)):
            return StoreError(f"{self.location}: the server reports damaged data ({said}): "
                              "ask the admin to repair it (REINDEX for an index, else a "
                              "restore)")
        return None

    def damage(self, exc: BaseException) -> str | None:
        """For a recall whose channels failed: the store's own line when `exc` is the
        database's state (`as_store_error`), so that the recall ends with it rather than with
        each channel's error; None for a channel's own error."""
        error = self.as_store_error(exc)
        return None if error is None else str(error)

    def _grant_advice(self, exc: psycopg.Error) -> str:
        """What to ask the admin for after a privilege refusal: the GRANT of what the role
        lacks on the object the server named, looked up on a pooled connection; the general
        advice when the object cannot be told or the look-up fails."""
        found = _REFUSED.search(str(exc))
        if found is None:
            return _GRANT_AS_DOCUMENTED
        kind, name = found.groups()
        try:
            with self._connection() as conn:
                row = conn.execute(_LACKING[kind], (list(_USED[kind]), name)).fetchone()
        except (psycopg.Error, PoolTimeout, StoreError):
            return _GRANT_AS_DOCUMENTED
        if row is None or not row[2]:
            return _GRANT_AS_DOCUMENTED
        target, role, lacking = row
        privileges = ", ".join(lacking)
        return (f"the role {role} lacks {privileges} on {target}; ask the admin to run "
                f"GRANT {privileges} ON {kind.upper()} {target} TO {role}")

    def _ask(self) -> None:
        """Ask the server for a connection of the store's own, outside the pool: a refused one
        fails at once, where a request waiting on the pool learns nothing until its wait runs
        out. One request asks at a time; the others meanwhile take the last answer. Raises the
        store's unavailable error while the server is out of reach."""
        if self._asking.acquire(blocking=False):
            try:
                psycopg.connect(conninfo(self._url), **self._ask_kwargs).close()
                self._outage = None
            except psycopg.Error as exc:
                self._outage = _one_line(exc, self._url)
            finally:
                self._asking.release()
        if (outage := self._outage) is not None:
            raise StoreError(f"{self.location} is unavailable: {outage}")

    def _checkout(self, wait: float = POOL_WAIT_S, ask: bool = True) -> BoundedConnection:
        """A pooled connection that has just answered a round trip (its check, under the
        deadline), within `wait` seconds. One that fails its check is closed, so the pool
        replaces it, and the next is tried at once: the pool's own check loop put a failed
        connection back idle and slept between tries (a connection abandoned at a deadline
        then failed every checkout: 503s while the server was fine). The idle ones go with
        it (`drain`: replaced by new ones at once), as a restart ends them all: checking each
        in turn took the request's whole wait. One the server did not answer in time fails
        the request: trying each idle connection would wait out the deadline once per
        connection.

        While the server is known to be out of reach and no connection is idle, a request
        does not wait on the pool: one asks the server again (`_ask`) and the others are
        answered at once, as is every request once a dropped connection or an empty pool
        shows it gone. Waiting 5 s each, requests queued behind the service's few threads
        answered in waves, 20 s and more. `ask=False` (a spare connection): none of it."""
        give_up = time.monotonic() + wait
        while True:
            if ask and self._outage is not None and not self._pool.get_stats()["pool_available"]:
                self._ask()
            try:
                conn = self._pool.getconn(max(give_up - time.monotonic(), 0.001))
            except PoolTimeout:
                if ask:  # the pool may be retrying a server that went away: is it there?
                    self._ask()
                raise
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.OperationalError as exc:
                conn.close()
                self._pool.putconn(conn)
                self._pool.drain()
                if isinstance(exc, NoAnswer):
                    self._outage = str(exc)  # not even an empty statement was answered
                    raise
                if ask:
                    self._ask()
                continue
            self._outage = None
            return conn

    @contextmanager
    def _unbounded(self) -> Iterator[None]:
        """This thread's write transactions and pooled statements without a deadline, for
        work that may legitimately run long (a migration, VACUUM)."""
        self._local.unbounded = True
        try:
            yield
        finally:
            self._local.unbounded = False

    @contextmanager
    def _connection(self) -> Iterator[BoundedConnection]:
        """A pooled connection (`_checkout`), its deadline lifted inside `_unbounded`."""
        conn = self._checkout()
        unbounded = getattr(self._local, "unbounded", False)
        if unbounded:
            conn.deadline_s = None
        try:
            yield conn
        finally:
            if unbounded:
                conn.deadline_s = self._timeout
            self._pool.putconn(conn)

    def _migrate(self, settings: Settings | None) -> None:
        """Bring the schema to SCHEMA_VERSION. A current one is only read, so opening a store
        waits for no other service's write; a migration waits for the write lock (another
        service may be migrating) and then at most MEMORY_DB_TIMEOUT for its table locks.

        Refused (StoreError, nothing changed) while the local discovery file names a running
        service of an older release on this database (`discovery.upgrade_refusal`): it would
        go on writing what only its own schema allows. Services on other machines cannot be
        seen: stop them first (docs/postgres.md)."""
        with self._connection() as conn:
            version = stored_version(conn)
        if version == SCHEMA_VERSION:
            return
        if settings is not None and 0 < version < SCHEMA_VERSION:
            from semantic_memory.service.discovery import upgrade_refusal

            if (refusal := upgrade_refusal(settings, self.location)) is not None:
                raise StoreError(refusal)
        with self.write() as conn, self._waiting_for_locks(
                f"the upgrade to schema v{SCHEMA_VERSION}", "nothing changed: start again "
                "once it ends"):
            conn.execute("SELECT set_config('lock_timeout', %s, true)", (self._lock_timeout,))
            version = stored_version(conn)
            if version > SCHEMA_VERSION:
                raise StoreError(f"schema version {version} is newer than this release "
                                 f"understands ({SCHEMA_VERSION}); upgrade "
                                 "semantic-memory-postgres")
            if version == SCHEMA_VERSION:
                return
            if version == 0:
                conn.execute(SCHEMA)
            else:
                for step in range(version, SCHEMA_VERSION):
                    MIGRATIONS[step](conn)
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('schema_version', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                         (str(SCHEMA_VERSION),))

    # --- connections ------------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[psycopg.Connection]:
        """One write transaction holding the store-wide write lock; nested use joins it."""
        current = getattr(self._local, "write", None)
        if current is not None:
            yield current
            return
        with self.store_errors(), self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            self._local.write = conn
            try:
                yield conn
            finally:
                self._local.write = None

    @contextmanager
    def long_write(self) -> Iterator[Any]:
        """A channel's setup: a transaction without the round-trip deadline (its DDL may build
        an index over a big table) that takes the write lock only for statements that may
        change something (`_LockOnChange`). A table lock not granted within MEMORY_DB_TIMEOUT
        fails it with one line."""
        current = getattr(self._local, "write", None)
        if current is not None:
            yield current
            return
        with self._unbounded(), self.store_errors(), self._connection() as conn, \
                conn.transaction():
            self._local.write = _LockOnChange(conn, self._lock_timeout)
            try:
                with self._waiting_for_locks("set-up", "it runs again at the next start"):
                    yield self._local.write
            finally:
                self._local.write = None

    @contextmanager
    def _waiting_for_locks(self, what: str, then: str) -> Iterator[None]:
        """A table lock not granted within `lock_timeout` as one line saying so."""
        try:
            yield
        except psycopg.errors.LockNotAvailable:
            raise StoreError(
                f"{self.location}: {what} waited {self._timeout:g} s for a lock on a table "
                f"that another session holds (a long transaction, VACUUM, LOCK TABLE); {then}"
            ) from None

    @property
    def writing(self) -> bool:
        """Whether this thread is inside a write transaction (`write`)."""
        return getattr(self._local, "write", None) is not None

    def read(self) -> _PooledReads | psycopg.Connection:
        """Inside this thread's `snapshot()`, its transaction: every statement sees that one
        state, as SQLite's reader does (a `migrate` counts and copies one state while the
        service writes). Else single statements, each on a pooled connection (autocommit)."""
        current = getattr(self._local, "snapshot", None)
        return current if current is not None else self._reads

    @contextmanager
    def snapshot(self) -> Iterator[psycopg.Connection]:
        """A read-only repeatable-read transaction: several queries see one state. Inside a
        write transaction it is that transaction (which sees its own writes)."""
        current = getattr(self._local, "write", None) or getattr(self._local, "snapshot", None)
        if current is not None:
            yield current
            return
        with self.store_errors(read_only_ours=True), self._connection() as conn:
            yield from self._read_only(conn)

    @contextmanager
    def spare_snapshot(self) -> Iterator[psycopg.Connection | None]:
        """A snapshot on a pooled connection free at once, else None: not waited for (the
        pool grows in the background, up to its size, for the recalls after this one). A
        server gone away is a StoreError here too, as in `snapshot`."""
        with self.store_errors(read_only_ours=True):
            try:
                conn = self._checkout(SPARE_WAIT_S, ask=False)
            except PoolTimeout:
                conn = None
            if conn is None:
                yield None
                return
            try:
                yield from self._read_only(conn)
            finally:
                self._pool.putconn(conn)

    def _read_only(self, conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
        """`conn` in a read-only repeatable-read transaction, this thread's snapshot. The
        mode goes into the BEGIN itself (psycopg writes the connection's settings there): a
        round trip less than a SET TRANSACTION after it, on every recall."""
        conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
        try:
            with conn.transaction():
                self._local.snapshot = conn
                try:
                    yield conn
                finally:
                    self._local.snapshot = None
        finally:  # the pooled connection's next user begins its own kind of transaction
            if not conn.closed:  # one closed past its deadline is not reused
                conn.isolation_level, conn.read_only = None, None

    def close(self) -> None:
        self._pool.close()
        logging.getLogger("psycopg.pool").removeFilter(self._pool_log)

    @property
    def schema_version(self) -> int:
        row = self._reads.execute("SELECT value FROM store_meta WHERE key = 'schema_version'"
                                  ).fetchone()
        return int(row[0]) if row else 0

    def size_bytes(self) -> int:
        return int(self._reads.execute("SELECT pg_database_size(current_database())"
                                       ).fetchone()[0])

    # --- what PostgreSQL says differently -----------------------------------------------------

    def insert(self, conn: psycopg.Connection, rows: list[Memory]) -> list[tuple[Memory, bool]]:
        """One INSERT per 500 rows; a live duplicate (unique per project and hash) comes back
        as that memory."""
        out: list[tuple[Memory, bool]] = []
        for start in range(0, len(rows), 500):
            chunk = rows[start : start + 500]
            values = [dict(zip(_ROW_KEYS, memory_row(m), strict=True), ord=n)
                      for n, m in enumerate(chunk)]
            returned = conn.execute(_INSERT, (json.dumps(values, ensure_ascii=False),)).fetchall()
            new = {uid: id_ for id_, uid, _, _, inserted in returned if inserted}
            existing = {(project, digest): (id_, uid)
                        for id_, uid, project, digest, inserted in returned if not inserted}
            for memory, value in zip(chunk, values, strict=True):
                if memory.uid in new:
                    memory.id = new[memory.uid]
                    out.append((memory, True))
                else:
                    id_, uid = existing[(memory.project, value["content_hash"])]
                    out.append((Memory(id_, uid, memory.content, memory.kind, memory.source,
                                       memory.project, memory.tags, memory.created_at,
                                       memory.updated_at), False))
        return out

    def adjacent(self, conn: psycopg.Connection, memories: list[Memory], window: int,
                 filters: RecallFilters) -> dict[int, list[tuple[int, Memory]]]:
        """As the shared `adjacent`, in one statement: each memory's two nearest-first index
        scans run as a LATERAL subquery, where two statements per recalled memory had cost
        20 round trips a recall (about half of a filtered recall on a store with sessions).
        """
        found: dict[int, list[tuple[int, Memory]]] = {m.id: [] for m in memories}
        placed = [m for m in memories if m.session is not None and m.seq is not None]
        if not placed:
            return found
        where, params = filters.sql("m", "%s")
        side = (f"SELECT {{side}} AS side, {MEMORY_COLUMNS_OF_M} FROM memories m "
                f"WHERE m.session = h.session AND m.seq {{op}} h.seq AND {where} "
                f"ORDER BY m.seq {{order}} LIMIT %s")
        rows = conn.execute(
            "SELECT h.id, s.* FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) "
            "AS h(id, session, seq) CROSS JOIN LATERAL (("
            + side.format(side=-1, op="<", order="DESC") + ") UNION ALL ("
            + side.format(side=1, op=">", order="ASC") + ")) s",
            [[m.id for m in placed], [m.session for m in placed], [m.seq for m in placed],
             *params, window, *params, window]).fetchall()
        sides: dict[tuple[int, int], list[Memory]] = {}
        for hit_id, direction, *row in rows:
            sides.setdefault((hit_id, direction), []).append(row_to_memory(tuple(row)))
        for memory in placed:  # nearest first, the earlier side before the later
            for direction in (-1, 1):
                near = sorted(sides.get((memory.id, direction), []),
                              key=lambda m, d=direction: (m.seq or 0) * d)
                found[memory.id] += list(enumerate(near, start=1))
        return found

    def injections_per_day(self, conn: Any, start: float) -> dict[str, tuple[int, int]]:
        return {day: (int(count), int(chars)) for day, count, chars in conn.execute(
            "SELECT to_char(to_timestamp(ts) AT TIME ZONE 'UTC', 'YYYY-MM-DD'), count(*), "
            "coalesce(sum(chars), 0) FROM injections WHERE ts >= %s GROUP BY 1", (start,))}

    def normalize_names(self, since: float) -> bool:
        """As SQLiteStore.normalize_names: the names of the rows written since `since`."""
        with self.snapshot() as conn:  # most runs find none: no write lock for them
            if not stale_names(lambda sql, params: self._run(conn, sql, params), since):
                return False
        with self.write() as conn:
            return normalize_stored_names(lambda sql, params: self._run(conn, sql, params),
                                          since)

    def retention(self, own: Retention) -> Retention:
        """The longest grace and TTLs any service of this store announced, `own` included:
        each period is recorded in `store_meta` as the longest seen (read and raised in one
        write transaction), so a teammate's shorter MEMORY_FORGET_GRACE_DAYS or TTL never
        purges what another's service still keeps. Lowered only on purpose
        (`reset_retention`)."""
        with self.write() as conn:
            periods = own.items()
            recorded = {name: int(value) for key, value in conn.execute(
                "SELECT key, value FROM store_meta WHERE key LIKE %s",
                (RETENTION_KEY.format("%"),)) if (name := key.split(".", 1)[1]) in periods}
            team = own.longest(Retention(**{**periods, **recorded}))
            if team.items() != recorded:
                self._record_retention(conn, team)
        return team

    def reset_retention(self, own: Retention) -> None:
        """Record `own` as the team's periods, whatever was recorded (MEMORY_PG_RETENTION_RESET):
        each service raises them again to its own at its next maintenance run."""
        with self.write() as conn:
            self._record_retention(conn, own)
        log.warning("postgres: the store's maintenance periods are reset to this "
                    "environment's (MEMORY_PG_RETENTION_RESET): %s", own.items())

    @staticmethod
    def _record_retention(conn: psycopg.Connection, periods: Retention) -> None:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO store_meta (key, value) VALUES (%s, %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                            [(RETENTION_KEY.format(name), str(days))
                             for name, days in periods.items().items()])

    def optimize(self, vacuum: bool = False) -> list[str]:
        """VACUUM (ANALYZE) the store's tables, after a bulk load or a purge: fresh planner
        statistics, and the pages' visibility set once, so that the first searches do not
        pay for it (measured at 100k freshly loaded memories: trigram counts several times
        slower before it). Autovacuum does the rest."""
        with self._unbounded(), self.store_errors(), self._connection() as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND (tablename LIKE 'memories%%' OR tablename LIKE 'injection%%')")]
            for table in tables:
                conn.execute(f"VACUUM (ANALYZE) {table}")
        return tables


def _configure(conn: psycopg.Connection) -> None:
    """Session settings of every pooled connection. Custom plans always: psycopg prepares a
    statement run 5 times, and PostgreSQL then switches to a generic plan, which cannot see
    that `tsv @@ $1` or `content ILIKE $1` matches 300 rows rather than 30,000 and so walks
    the primary key backwards for `ORDER BY id DESC LIMIT` (recall p95 at 100k: 344 ms
    generic, 140 ms custom; docs/postgres.md). No JIT: compiling costs more than these short
    queries run. Sequential scans start at the table's first page, not where another scan of
    it left off: the keyword channels estimate a common term's matches from how far into the
    table its capped count read (`_IdfChannel._counts`). Text parameters never carry a NUL
    (`NulFreeText`)."""
    conn.adapters.register_dumper(str, NulFreeText)
    conn.execute("SET plan_cache_mode = force_custom_plan")
    conn.execute("SET jit = off")
    conn.execute("SET synchronize_seqscans = off")


def _primary(exc: BaseException, url: str) -> str:
    """The server's own message without its CONTEXT (the trigger or function it ran in) or
    DETAIL lines, as `_one_line` puts it; the driver's whole message where it has none."""
    diag = exc.diag if isinstance(exc, psycopg.Error) else None
    if diag is None or not diag.message_primary:
        return _one_line(exc, url)
    return scrub_secrets(" ".join(diag.message_primary.split()), url)


def _one_line(exc: BaseException, url: str) -> str:
    """The driver's message on one line, with no piece of the URL's password in it."""
    return scrub_secrets(" ".join(str(exc).split()), url) or type(exc).__name__
