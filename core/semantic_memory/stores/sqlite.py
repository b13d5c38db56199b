"""The SQLite store, the default: one WAL file, a schema version with migrations, one writer at
a time.

Writers serialise on a process-wide lock and `BEGIN IMMEDIATE`, waiting for writers in other
processes up to BUSY_TIMEOUT_MS in all; a write still locked out then raises StoreError (a
service answers 503), never sqlite3's "database is locked". Readers use a connection per thread
and never block the writer, nor wait for it: a store already at the current schema opens with
reads only (unless a channel's setup has to write), so the CLI's reads work while another
process writes, and on a read-only file (on a read-only file system, read as immutable).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import one_line
from ..models import Memory, RecallFilters
from ..hookspecs import hookimpl
from .base import SQLMemoryStore, StoreError, content_hash, memory_row
from .names import normalize_stored_names, stale_names

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger("semantic_memory")

SCHEMA_VERSION = 13
#: The longest a write waits for the write lock, this process's writers and other processes'
#: together.
BUSY_TIMEOUT_MS = 60_000
#: One try for the write lock waits this long inside SQLite; between tries a writer checks its
#: deadline and whether the service is stopping (`SQLiteStore.stop_waiting`). SQLite's own busy
#: handler sleeps in steps of up to 100 ms too, so the lock is taken as soon as before.
LOCK_TRY_MS = 100
#: sqlite3 primary result codes (`sqlite_errorcode & 0xFF`).
SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_IOERR, SQLITE_FULL = 5, 6, 8, 10, 13
SQLITE_CANTOPEN = 14
#: The extended code of a file SQLite may not change because its folder is read-only.
SQLITE_READONLY_DIRECTORY = SQLITE_READONLY | 6 << 8
#: Free bytes below which a disk I/O error is taken for a full disk: SQLite reports ENOSPC on
#: the db or WAL as SQLITE_FULL, but on its shared-memory index (`-shm`) as a disk I/O error.
LOW_SPACE_BYTES = 1024 * 1024

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    uid TEXT NOT NULL UNIQUE,
    content TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'fact',
    source TEXT NOT NULL DEFAULT 'chat',
    project TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    session TEXT,
    seq INTEGER,
    superseded_by TEXT
);
CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash);
CREATE INDEX IF NOT EXISTS memories_superseded ON memories(superseded_by)
    WHERE superseded_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS memories_updated ON memories(updated_at);
CREATE INDEX IF NOT EXISTS memories_project ON memories(project, id);
CREATE INDEX IF NOT EXISTS memories_forgotten ON memories(id) WHERE deleted = 1;
CREATE INDEX IF NOT EXISTS memories_session ON memories(session, seq) WHERE session IS NOT NULL;
CREATE TABLE IF NOT EXISTS injections (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    harness TEXT,
    hook TEXT,
    project TEXT,
    query TEXT,
    uids TEXT NOT NULL DEFAULT '[]',
    chars INTEGER NOT NULL DEFAULT 0,
    session TEXT
);
CREATE INDEX IF NOT EXISTS injections_ts ON injections(ts);
CREATE INDEX IF NOT EXISTS injections_session ON injections(session) WHERE session IS NOT NULL;
CREATE TABLE IF NOT EXISTS injection_items (
    injection_id INTEGER NOT NULL REFERENCES injections(id) ON DELETE CASCADE,
    uid TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS injection_items_uid ON injection_items(uid);
CREATE INDEX IF NOT EXISTS injection_items_injection ON injection_items(injection_id);
"""

#: The earlier versions of edited memories (`memory-mcp update`, PATCH /api/memories/{uid}):
#: an edit keeps the version it replaces here, so nothing is silently lost. Purging a forgotten
#: memory removes its revisions too.
REVISIONS_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_revisions (
    id INTEGER PRIMARY KEY,
    memory_id INTEGER NOT NULL REFERENCES memories(id) ON DELETE CASCADE,
    content TEXT NOT NULL,
    kind TEXT NOT NULL,
    project TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL,
    replaced_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_revisions_memory ON memory_revisions(memory_id, id);
"""
SCHEMA += REVISIONS_SCHEMA

#: An index per filter of a list page, each in the page's order (newest-updated first): a
#: project's, kind's or source's page reads its first entries, and its count (`count`) and
#: the stats' groups (`value_counts`) count entries, not rows; the artifact TTL reads the
#: expired artifacts alone. Without them a big project's page sorted all its rows and a rare
#: kind's walked the whole store (schema v10; `docs/benchmarks.md` has the figures).
#: `memories_project` stays: by id, it gives a project's id range in two seeks (v4).
PAGE_INDEXES = """
CREATE INDEX IF NOT EXISTS memories_project_updated ON memories(project, updated_at);
CREATE INDEX IF NOT EXISTS memories_kind ON memories(kind, updated_at);
CREATE INDEX IF NOT EXISTS memories_source ON memories(source, updated_at);
"""

#: Each filter's index of PAGE_INDEXES, for `memories_passing`.
VALUE_INDEXES = {"project": "memories_project_updated", "kind": "memories_kind",
                 "source": "memories_source"}
#: Entries of a filter's index `memories_passing` counts at most (about a millisecond).
NARROW_PROBE = 10_000

SCHEMA += PAGE_INDEXES

#: A tombstone per text a purge removed from a project (schema v13; `SQLMemoryStore._bury`):
#: the hash of the whole text (`content_hash`), never the text, kept for good. Keyed by hash
#: first: ingest seeks the hashes of a batch (`purged_by_hash`); a global memory's project
#: is ''.
PURGED_SCHEMA = """
CREATE TABLE IF NOT EXISTS purged_texts (
    project TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL,
    purged_at REAL NOT NULL,
    PRIMARY KEY (content_hash, project)
) WITHOUT ROWID;
"""
SCHEMA += PURGED_SCHEMA


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run several statements inside the caller's transaction.

    (`executescript` would commit the open transaction first.)
    """
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            conn.execute(statement)
            statement = ""
    if statement.strip():
        conn.execute(statement)


def fts_tables(conn: sqlite3.Connection) -> list[str]:
    """Every FTS5 table in the db (each channel's)."""
    return [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall()]


def merge_fts_indexes(conn: sqlite3.Connection) -> list[str]:
    """Merge every FTS5 index in the db into one segment (FTS5 'optimize', in the caller's
    transaction; a rebuild for one with too many levels, `bound_fts_levels`); returns the
    FTS5 tables."""
    tables = fts_tables(conn)
    for table in tables:
        if not bound_fts_levels(conn, table):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
    return tables


#: FTS5 keeps an index's structure (its segments, and a merge under way) in this row of its
#: `_data` table (FTS5_STRUCTURE_ROWID): a merge step that changed nothing left it as it was.
_FTS_STRUCTURE_ROW = 10
#: What a structure record of a later FTS5 holds after its 4-byte cookie (FTS5_STRUCTURE_V2).
_FTS_STRUCTURE_V2 = b"\xff\x00\x00\x01"
#: FTS5 reads an index of more than FTS_MAX_LEVELS levels as corrupt. Each full
#: merge ('optimize', a scrub) that finds segments written since the last one moves them all
#: into a new level above the others and writes its output one level higher still: on SQLite
#: 3.40 (Debian 12's) two levels more every time, never removed (3.51 stops at 64). An index
#: at this many is rebuilt instead of merged (`bound_fts_levels`): ~500 merges apart.
FTS_LEVEL_BOUND = 1000
#: The most levels FTS5 opens an index with (FTS5_MAX_SEGMENT).
FTS_MAX_LEVELS = 2000


def fts_levels(conn: sqlite3.Connection, table: str) -> int:
    """How many levels FTS5 index `table` has: the varint after the cookie (and the marker
    of a later version's record) of its structure record, as FTS5 decodes it. Reading the
    row, not the index, also works on an index FTS5 refuses to read."""
    row = conn.execute(
        f"SELECT block FROM {table}_data WHERE id = {_FTS_STRUCTURE_ROW}").fetchone()
    block = bytes(row[0]) if row and row[0] else b""
    at = 8 if block[4:8] == _FTS_STRUCTURE_V2 else 4
    levels = 0
    for byte in block[at:at + 9]:
        levels = levels << 7 | byte & 0x7F
        if not byte & 0x80:
            break
    return levels


def bound_fts_levels(conn: sqlite3.Connection, table: str) -> bool:
    """Rebuild FTS5 index `table` from its content, in the caller's transaction, when it has
    FTS_LEVEL_BOUND levels or more; whether it did. The rebuilt index starts from one level
    and, written from what is stored, holds no word of what was deleted: what a full merge
    is for. Costs ~2.5x an 'optimize'."""
    levels = fts_levels(conn, table)
    if levels < FTS_LEVEL_BOUND:
        return False
    log.warning("the full-text index %s has %d levels (FTS5 refuses one past %d): "
                "rebuilding it", table, levels, FTS_MAX_LEVELS)
    if levels > FTS_MAX_LEVELS:  # FTS5 cannot open the table even to rebuild it
        conn.execute(f"UPDATE {table}_data SET block = ? WHERE id = {_FTS_STRUCTURE_ROW}",
                     (_empty_fts_structure(),))
    conn.execute(f"INSERT INTO {table}({table}) VALUES ('rebuild')")
    return True


@functools.cache
def _empty_fts_structure() -> bytes:
    """The structure record of an empty FTS5 index, as this SQLite's FTS5 writes it."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE empty USING fts5(content)")
        return bytes(conn.execute(
            f"SELECT block FROM empty_data WHERE id = {_FTS_STRUCTURE_ROW}").fetchone()[0])
    finally:
        conn.close()


def merge_fts_step(conn: sqlite3.Connection, table: str, pages: int, first: bool) -> bool:
    """One step of merging FTS5 index `table` into one segment, about `pages` pages written,
    in the caller's transaction. False once there was nothing left to merge. Step by step,
    the index ends as 'optimize' leaves it, without holding a transaction for the whole
    rewrite.

    Only the `first` step is `'merge', -pages` (every segment becomes an input of one merge);
    the later ones are `'merge', +pages`, which carries that merge on. A negative step finding
    segments written since the last one (other writers take the lock between steps) moves
    them all into a new level above the others: one level more a step, never removed before
    SQLite 3.42, and an index past 2000 levels reads as corrupt ("database disk image is
    malformed") to every process. A first step rebuilds an index of too many levels
    (`bound_fts_levels`) instead, and is the last."""
    if first and bound_fts_levels(conn, table):
        return False
    structure = f"SELECT block FROM {table}_data WHERE id = {_FTS_STRUCTURE_ROW}"
    before = conn.execute(structure).fetchone()
    conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)",
                 (-pages if first else pages,))
    return conn.execute(structure).fetchone() != before


def _migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """v1 had no content hash and kept injected uids only as JSON text."""
    conn.execute("ALTER TABLE memories ADD COLUMN content_hash TEXT NOT NULL DEFAULT ''")
    rows = conn.execute("SELECT id, content FROM memories").fetchall()
    conn.executemany(
        "UPDATE memories SET content_hash = ? WHERE id = ?",
        [(content_hash(content), id_) for id_, content in rows],
    )
    run_script(conn, """
        CREATE INDEX IF NOT EXISTS memories_hash ON memories(content_hash);
        CREATE INDEX IF NOT EXISTS memories_updated ON memories(updated_at);
        CREATE INDEX IF NOT EXISTS injections_ts ON injections(ts);
        CREATE TABLE IF NOT EXISTS injection_items (
            injection_id INTEGER NOT NULL REFERENCES injections(id) ON DELETE CASCADE,
            uid TEXT NOT NULL);
        CREATE INDEX IF NOT EXISTS injection_items_uid ON injection_items(uid);
        CREATE INDEX IF NOT EXISTS injection_items_injection ON injection_items(injection_id);
        """)
    for injection_id, uids in conn.execute("SELECT id, uids FROM injections").fetchall():
        try:
            items = [u for u in json.loads(uids) if isinstance(u, str)]
        except ValueError:
            items = []
        conn.executemany(
            "INSERT INTO injection_items (injection_id, uid) VALUES (?, ?)",
            [(injection_id, u) for u in items],
        )


def _migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """v3 indexes the forgotten memories: counting them, and telling a search's hits from
    forgotten ones, no longer reads every memory."""
    conn.execute("CREATE INDEX IF NOT EXISTS memories_forgotten ON memories(id) WHERE deleted = 1")


def _migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """v4 orders the project index by id, not updated_at: a project's id range, which bounds
    its searches, is then two index seeks instead of a walk over all its entries (~0.8 ms per
    channel and query for a project of 5,000 memories)."""
    conn.execute("DROP INDEX IF EXISTS memories_project")
    conn.execute("CREATE INDEX memories_project ON memories(project, id)")


def _migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """v5 records the agent session of each injection report, so a hook never injects a
    memory twice into one session."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(injections)")}
    if "session" not in columns:
        conn.execute("ALTER TABLE injections ADD COLUMN session TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS injections_session ON injections(session) "
                 "WHERE session IS NOT NULL")


def _migrate_5_to_6(conn: sqlite3.Connection) -> None:
    """v6 keeps each memory's place in its session (the agent session or ingest batch it came
    in, and its order there), so that recall can bring a hit's neighbours along."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    for column, kind in (("session", "TEXT"), ("seq", "INTEGER")):
        if column not in columns:
            conn.execute(f"ALTER TABLE memories ADD COLUMN {column} {kind}")
    conn.execute("CREATE INDEX IF NOT EXISTS memories_session ON memories(session, seq) "
                 "WHERE session IS NOT NULL")


def _migrate_6_to_7(conn: sqlite3.Connection) -> None:
    """v7 keeps the earlier versions of edited memories (`memory_revisions`)."""
    run_script(conn, REVISIONS_SCHEMA)


def _migrate_7_to_8(conn: sqlite3.Connection) -> None:
    """v8 records supersession: `superseded_by`, the uid of the newer memory replacing one."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(memories)")}
    if "superseded_by" not in columns:
        conn.execute("ALTER TABLE memories ADD COLUMN superseded_by TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS memories_superseded ON memories(superseded_by) "
                 "WHERE superseded_by IS NOT NULL")


def _migrate_8_to_9(conn: sqlite3.Connection) -> None:
    """v9 holds projects, kinds and sources as ingest now writes them (`stores.names`)."""
    normalize_stored_names(conn.execute)


def _migrate_9_to_10(conn: sqlite3.Connection) -> None:
    """v10 indexes each filter of a list page in the page's order (`PAGE_INDEXES`): built once,
    in 3-4 s per 1M memories (67 MB, 3.5% of such a file), in the write lock."""
    run_script(conn, PAGE_INDEXES)


def _migrate_10_to_11(conn: sqlite3.Connection) -> None:
    """v11 holds projects, kinds and sources composed (NFC), as ingest now writes them."""
    normalize_stored_names(conn.execute)


def _migrate_11_to_12(conn: sqlite3.Connection) -> None:
    """v12 holds projects as ingest now names them (`models.project_name`): a remote's address
    as its clones' name, a repository on a well-known host under an SSH alias as its HTTPS
    clone's, no trailing slash."""
    normalize_stored_names(conn.execute)


def _migrate_12_to_13(conn: sqlite3.Connection) -> None:
    """v13 records what a purge removed (`PURGED_SCHEMA`), so that a hook's flush of a resumed
    session does not store it again. Nothing purged before it is known: the table starts
    empty."""
    run_script(conn, PURGED_SCHEMA)


def sqlite_problem(exc: sqlite3.DatabaseError) -> str:
    """A SQLite error met mid-command or mid-request, in one line (the CLI's exit line, the
    service's 503): the integrity hint only for a damaged file, never for a full disk or a
    failing write, which it would send restoring a backup."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # an extended code's primary
    if code == sqlite3.SQLITE_FULL:
        return f"no space left on the store's disk ({exc}): free some, then run it again"
    if not damaged(exc):
        return f"the store failed ({exc})"
    return (f"the store cannot be read ({one_line(exc)}); check it with `sqlite3 FILE "
            "'PRAGMA integrity_check'`, or `memory-mcp restore BACKUP`")


def damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether the error says the file is damaged (or not a database), not that a statement
    or the disk failed."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _create_private(path: Path) -> None:
    """A new db file, for its owner only (0600): SQLite gives the -wal and -shm files the db
    file's mode, and under the usual umask 022 all three were 0644, every memory readable by
    every local user. An empty file is an empty database to SQLite."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:  # there already, or not creatable here: opening it says why
        pass


#: MIGRATIONS[n] upgrades a db at version n to n + 1, inside one transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4, 4: _migrate_4_to_5,
    5: _migrate_5_to_6, 6: _migrate_6_to_7, 7: _migrate_7_to_8, 8: _migrate_8_to_9,
    9: _migrate_9_to_10, 10: _migrate_10_to_11, 11: _migrate_11_to_12, 12: _migrate_12_to_13}


#: Bytes a WAL file is cut back to when it restarts.
WAL_SIZE_LIMIT = 16 * 1024 * 1024
#: How long `flush_journal` tries to cut the WAL while readers hold snapshots older than the
#: last write (a recall in flight, in this process or another): each holds it off for
#: milliseconds.
FLUSH_JOURNAL_WAIT_S = 5.0
#: Pages one step of `scrub_indexes` writes: ~0.2 s in the write lock (100k memories of
#: bench/scale.py); other writes take the lock between steps.
SCRUB_STEP_PAGES = 500


class _Reader:
    """A thread's read connection, held by that thread's local storage alone: when the thread
    ends (the service's worker threads end after 10 s idle, and new ones start under the next
    burst of requests) it is collected and its connection closed. A list of every reader,
    kept for `close`, held each one open for good: one more file (and its page cache) per
    worker thread started, until every read failed with "unable to open database file"."""

    __slots__ = ("conn", "owner", "__weakref__")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        #: The thread whose connection it is: only it, or `close` once it has ended, closes it.
        self.owner = threading.current_thread()

    def __del__(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


def _connect(target: Path | str) -> sqlite3.Connection:
    """A connection to the db file, or to the `file:` URI `target` names."""
    conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False, uri=isinstance(target, str))
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def _is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock ("database is locked")."""
    return _code(exc) in (SQLITE_BUSY, SQLITE_LOCKED)


def _low_on_space(folder: Path) -> bool:
    try:
        return shutil.disk_usage(folder).free < LOW_SPACE_BYTES
    except OSError:
        return False


def _folder_refused(exc: sqlite3.Error) -> bool:
    """SQLite could not create a file beside the db (a WAL store's `-shm`, even to read it;
    a rollback journal): on a read-only file system it says CANTOPEN, in a folder without
    write permission READONLY_DIRECTORY."""
    return (_code(exc) == SQLITE_CANTOPEN
            or getattr(exc, "sqlite_errorcode", None) == SQLITE_READONLY_DIRECTORY)


def _on_read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _pending(path: Path) -> Path | None:
    """The journal beside `path` that may hold writes not yet in it (a WAL with frames, a
    rollback journal left by a crash), if any; one that cannot be looked at counts."""
    for suffix in ("-wal", "-journal"):
        journal = Path(f"{path}{suffix}")
        try:
            if journal.stat().st_size > 0:
                return journal
        except FileNotFoundError:
            continue
        except OSError:
            return journal
    return None


class _LockOnWrite:
    """The writer connection inside a deferred transaction, for a channel's `setup` (the
    engine's `long_write`): statements that only read take no lock, so a store already set up
    opens while another process writes, and on a read-only file.

    The first statement that must write takes the lock. Inside a transaction that has read,
    SQLite will not wait for it (SQLITE_BUSY at once: what was read may be stale by then), so
    the transaction starts over with BEGIN IMMEDIATE, which waits, and the statement runs
    again. Nothing is lost: no statement before it wrote (it would hold the lock), and a
    channel's setup is idempotent (`Channel.setup`), so what it read before still holds."""

    def __init__(self, store: SQLiteStore, conn: sqlite3.Connection, deadline: float) -> None:
        self._store, self._conn, self._deadline = store, conn, deadline
        self._locked = False

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self._run(self._conn.execute, sql, params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self._run(self._conn.executemany, sql, list(rows))  # a list: it may run twice

    def _run(self, method: Callable[[str, Any], sqlite3.Cursor], sql: str,
             args: Any) -> sqlite3.Cursor:
        try:
            return method(sql, args)
        except sqlite3.OperationalError as exc:
            if self._locked or not _is_busy(exc):
                raise
        self._conn.execute("ROLLBACK")
        self._store._take_lock(self._conn, "BEGIN IMMEDIATE", self._deadline)
        self._locked = True
        return method(sql, args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


#: One statement inserting a JSON array of rows (RETURNING needs SQLite 3.35+; older ones insert
#: row by row), in `memory_row`'s column order.
_BATCH_INSERT = (
    "INSERT INTO memories (uid, content, content_hash, kind, source, project, tags, created_at, "
    "updated_at, deleted, session, seq) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(12))
    + " FROM json_each(?) ORDER BY key RETURNING id"
    if sqlite3.sqlite_version_info >= (3, 35) else None
)


def path_of(url: str) -> Path:
    """The file of `sqlite:///relative.db`, `sqlite:////absolute.db` or a bare path."""
    for prefix in ("sqlite:///", "sqlite://", "sqlite:", "file://"):
        if url.startswith(prefix):
            url = url[len(prefix):]
            break
    if not url:
        raise StoreError("MEMORY_DB_URL: a sqlite URL needs a file path (sqlite:///memory.db)")
    return Path(url).expanduser()


class SQLiteStore(SQLMemoryStore):
    """Connections to one db file. Use `write()` for changes and `read()` for queries."""

    name = "sqlite"
    schemes = ("sqlite",)

    @classmethod
    def open(cls, url: str, settings: Settings) -> SQLiteStore:
        return cls(path_of(url), settings)

    def __init__(self, path: str | Path, settings: Settings | None = None) -> None:
        """`settings`: those the store is opened with, to find a running service of an older
        release on the file before upgrading its schema (`_refuse_upgrade`); None looks for
        none (a new file `migrate --to` fills, a test's)."""
        self.path = Path(path).expanduser()
        self.location = str(self.path)
        # A symlink's target is the file SQLite opens (the "data on another disk" layout): its
        # folder is the one to make, the file the one to create private.
        target = Path(os.path.realpath(self.path))
        try:  # for its owner only, as `Settings.make_data_folder` makes it
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder {target.parent}: "
                             f"{exc.strerror or exc}") from None
        _create_private(target)
        self._write_lock = threading.RLock()
        self._stopping = threading.Event()
        self._local = threading.local()
        #: Every thread's open reader, to close them all at `close`; a thread's goes with it.
        self._readers: weakref.WeakSet[_Reader] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        #: What connections open: the file, or on a read-only file system a URI reading it
        #: as immutable (`_frozen`).
        self._target: Path | str = self.path
        try:
            try:
                self._writer = self._open_writer()
            except sqlite3.OperationalError as exc:
                if not _folder_refused(exc) or not self._frozen():
                    raise
                self._target = f"{self.path.absolute().as_uri()}?mode=ro&immutable=1"
                self._writer = self._open_writer()
            # Reads only when the schema is current: the write lock (held by another process
            # for as long as it writes) and a writable file are needed only to create or
            # upgrade it. `_migrate` reads the version again under the lock: another process
            # may have upgraded it meanwhile.
            #: The db file and its -wal as opened (`_replaced`).
            self._opened = {f: _identity(f) for f in self._files()}
            if self._version(self._writer) != SCHEMA_VERSION:
                if settings is not None:
                    self._refuse_upgrade(settings)
                with self.write() as conn:
                    self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(self._problem(exc, opening=True)
                             or f"cannot open {self.path}: {exc}") from None

    def _files(self) -> tuple[Path, ...]:
        """The files a write goes to (none to check on a read-only, immutable view)."""
        return (self.path, Path(f"{self.path}-wal")) if isinstance(self._target, Path) else ()

    def _replaced(self) -> str | None:
        """Why the files at the db's path are no longer those this store has open, or None.
        A backup restored over the db (`mv`), the db or its -wal deleted: the open handles
        still reach the old files, so a write would be acknowledged and then lost for good.
        A -wal that did not exist yet when the store opened is taken as it is now."""
        for path, opened in self._opened.items():
            now = _identity(path)
            if opened is None and path.name.endswith("-wal"):
                self._opened[path] = now
            elif now != opened:
                return (f"{path} was {'deleted' if now is None else 'replaced'} while this "
                        "process had it open: nothing was written (it would have been lost); "
                        "restart the service or the command to open the file at that path")
        return None

    def totals(self, conn: Any) -> tuple[int, int]:
        """As every store's, unless the files at the db's path are no longer those open here
        (`_replaced`): then the StoreError every write meets, so that `/health` and `doctor`
        say what keeps the service from writing, not that it is up with N memories."""
        if (replaced := self._replaced()) is not None:
            raise StoreError(replaced)
        return super().totals(conn)

    def _refuse_upgrade(self, settings: Settings) -> None:
        """StoreError, the file untouched, when a service of an older release serves it
        (`discovery.upgrade_refusal`): it would go on writing to the upgraded schema what only
        its own allows. A file without memories yet is created, not upgraded."""
        from ..service.discovery import upgrade_refusal  # only here: no other open reads it

        if not self._has_memories(self._writer):
            return
        if (refusal := upgrade_refusal(settings, str(self.path))) is not None:
            self._writer.close()
            raise StoreError(refusal)

    def _open_writer(self) -> sqlite3.Connection:
        """The writer connection, once it has read the file (where a folder refuses the
        `-shm`, that read fails)."""
        conn = _connect(self._target)
        try:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as exc:
                if _code(exc) != SQLITE_READONLY:
                    raise
                # A read-only file or folder with a db in another journal mode (a copy, a
                # backup): read it as it is; a write then fails with `write`'s one line.
            conn.execute("PRAGMA synchronous = NORMAL")
            # A deleted row's bytes (a purged memory's text, an FTS5 block a merge replaced)
            # are zeroed where they lay, freed pages too: without it they stayed in the file
            # until a VACUUM. Measured on 100k memories against OFF in one run: a 2,000-memory
            # import, a hook's write, 200 edits and a purge of 200 took the same within noise.
            conn.execute("PRAGMA secure_delete = ON")
            # A bulk import or an index merge grows the WAL to tens of MB; give that space
            # back when the WAL restarts after a checkpoint instead of keeping the high-water
            # mark.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
            conn.execute("PRAGMA user_version")
        except BaseException:
            conn.close()
            raise
        return conn

    def _frozen(self) -> bool:
        """Whether the file can be read as immutable, where SQLite cannot open it because its
        folder is not writable (reading a WAL store creates its `-shm`): only on a read-only
        file system, where no process can change it, and only if no journal beside it holds
        writes (reading as immutable would not see them). A folder merely without write
        permission is not enough: its owner may start writing while this reads."""
        return (_on_read_only_fs(self.path.parent) and self.path.is_file()
                and _pending(self.path) is None)

    def _folder_problem(self, opening: bool) -> str | None:
        """Why SQLite could not create a file beside the db, where its folder says why."""
        folder = self.path.parent
        read_only_fs = _on_read_only_fs(folder)
        if opening and read_only_fs and (journal := _pending(self.path)) is not None:
            return (f"cannot open {self.path}: {journal.name} may hold writes not yet in it, "
                    "and the file system is read-only; open it once where it is writable")
        why = ("a read-only file system" if read_only_fs
               else "permission denied" if not os.access(folder, os.W_OK) else None)
        if why is None:
            return None
        if not opening:
            return f"cannot write to {self.path}: the folder {folder} is not writable ({why})"
        return (f"cannot open {self.path}: the folder {folder} is not writable ({why}), and "
                f"reading the store creates {self.path.name}-shm there; make the folder "
                "writable, or copy the file to one that is")

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"schema version {version} is newer than this release understands "
                f"({SCHEMA_VERSION}); upgrade semantic-memory-core"
            )
        return version

    @staticmethod
    def _has_memories(conn: sqlite3.Connection) -> bool:
        """Whether the file holds the memories table (a new file does not yet)."""
        return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                            "AND name = 'memories'").fetchone() is not None

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        version = SQLiteStore._version(conn)
        if version == 0 and not SQLiteStore._has_memories(conn):
            run_script(conn, SCHEMA)
        else:
            for step in range(max(version, 1), SCHEMA_VERSION):
                MIGRATIONS[step](conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        return self.read().execute("PRAGMA user_version").fetchone()[0]

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; commits on success, rolls back on any exception. StoreError
        when the lock stays taken for BUSY_TIMEOUT_MS or the file is read-only."""
        with self._transaction(immediate=True) as (conn, _):
            yield conn

    @contextmanager
    def long_write(self) -> Iterator[Any]:
        """A channel's setup: a transaction that takes the write lock only if a statement has
        to write (`_LockOnWrite`)."""
        with self._transaction(immediate=False) as (conn, deadline):
            yield conn if deadline is None else _LockOnWrite(self, conn, deadline)

    @contextmanager
    def _transaction(self, immediate: bool
                     ) -> Iterator[tuple[sqlite3.Connection, float | None]]:
        """The writer connection in a transaction (BEGIN IMMEDIATE, or deferred), with the
        deadline for its lock; None for a nested use, which joins the outer transaction."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        if not self._write_lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            raise StoreError(self._locked_out())  # this process's writers held it all along
        try:
            conn = self._writer
            if conn.in_transaction:
                yield conn, None
                return
            if immediate:
                self._take_lock(conn, "BEGIN IMMEDIATE", deadline)
            else:
                conn.execute("BEGIN")  # deferred: takes no lock
            try:
                if (replaced := self._replaced()) is not None:
                    raise StoreError(replaced)
                yield conn, deadline
                conn.execute("COMMIT")  # a full disk may refuse it: the WAL is written here
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                # On a read-only file (in WAL mode) the lock is granted: the first change fails.
                problem = self._problem(exc)
                if problem is not None:
                    raise StoreError(problem) from None
                raise
        finally:
            self._write_lock.release()

    def _take_lock(self, conn: sqlite3.Connection, statement: str, deadline: float) -> None:
        """Run `statement`, which takes the write lock, waiting for other processes' writers
        until `deadline`, LOCK_TRY_MS at a time; StoreError (one line) when it cannot."""
        # Once stopping, one try that does not wait: writes queued behind this one give up
        # in turn without each waiting a try's length.
        conn.execute(f"PRAGMA busy_timeout = {0 if self._stopping.is_set() else LOCK_TRY_MS}")
        try:
            while True:
                try:
                    conn.execute(statement)
                    return
                except sqlite3.OperationalError as exc:
                    if (problem := self._problem(exc)) is not None:
                        raise StoreError(problem) from None
                    if not _is_busy(exc):
                        raise
                if self._stopping.is_set():
                    raise StoreError("not stored: shutting down while another process holds "
                                     f"the write lock of {self.path}")
                if time.monotonic() >= deadline:
                    raise StoreError(self._locked_out())
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def _problem(self, exc: BaseException, opening: bool = False) -> str | None:
        """The one line (a StoreError's: a service answers 503) for a SQLite error that the
        file, its folder or its disk causes, None for any other exception."""
        if not isinstance(exc, sqlite3.OperationalError):
            return None
        if _folder_refused(exc) and (problem := self._folder_problem(opening)) is not None:
            return problem
        code = _code(exc)
        if code == SQLITE_READONLY:
            return (f"cannot write to {self.path}: it is on a read-only file system"
                    if isinstance(self._target, str) else
                    f"cannot write to {self.path}: the file is read-only")
        if code == SQLITE_CANTOPEN and self.path.exists() and not os.access(self.path, os.R_OK):
            return f"cannot open {self.path}: the file is not readable (permission denied)"
        if code == SQLITE_FULL or code == SQLITE_IOERR and _low_on_space(self.path.parent):
            return f"no space left on the disk of {self.path}: free some, then try again"
        if code == SQLITE_IOERR:
            return f"{exc} on {self.path}"
        return None

    def _locked_out(self) -> str:
        return (f"{self.path} is locked: another writer held it for {BUSY_TIMEOUT_MS // 1000} s "
                "(a long import, purge or VACUUM?); try again later")

    def stop_waiting(self) -> None:
        """From now on a write that finds the lock taken by another process gives up at once
        (StoreError) rather than wait up to BUSY_TIMEOUT_MS: a stopping service calls it, so
        that a waiting write is refused, not stored after its client got no answer, and does
        not hold up the exit. A write that gets the lock goes on as usual."""
        self._stopping.set()

    def memories_passing(self, conn: sqlite3.Connection, filters: RecallFilters) -> str:
        """With two filters on values (a project and a kind), the index of the one fewer
        memories pass. SQLite keeps no statistics per value and may walk the other: every note
        of a 1M store for a project of two memories, 0.3 s a page. Each is counted in its own
        index up to NARROW_PROBE entries; past that in both, SQLite's choice stands."""
        given = [(column, value) for column, value in (
            ("project", filters.project), ("kind", filters.kind), ("source", filters.source))
            if value is not None]
        if len(given) < 2:
            return "memories m"
        sizes = {column: self._run(conn, f"SELECT count(*) FROM (SELECT 1 FROM memories m "
                                         f"WHERE m.{column} = ? LIMIT ?)",
                                   (value, NARROW_PROBE + 1)).fetchone()[0]
                 for column, value in given}
        narrowest = min(sizes, key=sizes.__getitem__)
        if sizes[narrowest] > NARROW_PROBE:
            return "memories m"
        return f"memories m INDEXED BY {VALUE_INDEXES[narrowest]}"

    def read(self) -> sqlite3.Connection:
        """This thread's read connection, closed when the thread ends (`_Reader`)."""
        reader = getattr(self._local, "reader", None)
        if reader is None:
            conn = _connect(self._target)
            conn.execute("PRAGMA query_only = ON")
            reader = self._local.reader = _Reader(conn)
            with self._readers_lock:
                self._readers.add(reader)
        return reader.conn

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several queries see one consistent state."""
        conn = self.read()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def insert(self, conn: sqlite3.Connection, rows: list[Memory]) -> list[tuple[Memory, bool]]:
        """Every row is new: the one writer checked for duplicates in this transaction. A few
        multi-row INSERTs: FTS5 flushes its pending index at every statement boundary, so the
        channels' insert triggers cost ~3x less per row in one big statement than in one per
        row."""
        values = [memory_row(m) for m in rows]
        ids: list[int] = []
        if _BATCH_INSERT is None:
            for row in values:
                ids.append(conn.execute(
                    "INSERT INTO memories (uid, content, content_hash, kind, source, project, "
                    "tags, created_at, updated_at, deleted, session, seq) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row).lastrowid)
        start = 0
        while _BATCH_INSERT is not None and start < len(values):  # <= 500 rows, ~8 MB of text
            end, size = start, 0
            while end < len(values) and end - start < 500 and size < 8_000_000:
                size += len(values[end][1])
                end += 1
            payload = json.dumps(values[start:end], ensure_ascii=False)
            ids += [r[0] for r in conn.execute(_BATCH_INSERT, (payload,))]
            start = end
        for memory, id_ in zip(rows, ids, strict=True):
            memory.id = id_
        return [(memory, True) for memory in rows]

    def injections_per_day(self, conn: sqlite3.Connection, start: float
                           ) -> dict[str, tuple[int, int]]:
        return {day: (count, chars) for day, count, chars in conn.execute(
            "SELECT date(ts, 'unixepoch'), count(*), coalesce(sum(chars), 0) FROM injections "
            "WHERE ts >= ? GROUP BY 1", (start,))}

    def optimize(self, vacuum: bool = False) -> list[str]:
        """Merge each FTS5 index (every channel's) into one segment, then VACUUM if asked;
        returns the FTS5 tables.

        Batched writes leave an index in many segments and every query reads them all: after a
        bulk import, one merge makes searches up to ~1.5x faster. Takes the write lock for
        about a second per 100k memories.

        With `vacuum` (a purge, while a service may write) the merge goes a step at a time
        (`scrub_indexes`), as the service's own purge does: in one transaction it held every
        other writer for its whole length (4-10 s at 1M memories of bench/scale.py, 31.7 s in
        an earlier measurement); the VACUUM (~4-8 s there) is now the longest wait
        (bench/purge_wait.py).
        """
        if not vacuum:
            with self.write() as conn:
                return merge_fts_indexes(conn)
        tables = self.scrub_indexes()
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        with self._write_lock:
            self._take_lock(self._writer, "VACUUM", deadline)
        return tables

    def normalize_names(self, since: float) -> bool:
        """The names the rows written since `since` hold, as ingest writes them
        (`names.normalize_stored_names`: what an older release's process left running across
        an upgrade writes); whether any was rewritten."""
        with self.snapshot() as conn:  # most runs find none: no write lock for them
            if not stale_names(conn.execute, since):
                return False
        with self.write() as conn:
            return normalize_stored_names(conn.execute, since)

    def scrub_indexes(self) -> list[str]:
        """After a purge (the service's maintenance; before a purge's VACUUM, `optimize`): merge
        each FTS5 index into one segment, a step of SCRUB_STEP_PAGES a transaction, so that the
        words of what went leave the file. FTS5 keeps a deleted memory's words in its
        segments, with the delete's own markers, until a merge rewrites all of them (SQLite
        3.40 has no FTS5 secure-delete); secure_delete zeroes the blocks the merge replaces.
        The whole rewrite costs what 'optimize' does (~0.05 s a MB of index: 100k memories'
        porter index 5 MB, trigram 27 MB), but no write waits more than a step. Returns the
        tables merged."""
        with self.write() as conn:
            tables = fts_tables(conn)
        for table in tables:
            first = True
            while True:
                with self.write() as conn:
                    if not merge_fts_step(conn, table, SCRUB_STEP_PAGES, first):
                        break
                first = False
        return tables

    def bound_index_levels(self) -> list[str]:
        """Rebuild each FTS5 index of FTS_LEVEL_BOUND levels or more (`bound_fts_levels`),
        such as the scrubs of earlier releases left (a level each step another process wrote
        between): the maintenance's first step, since an index past 2000 levels fails every
        search and every write. Takes the write lock only for an index that needs it; returns
        the tables rebuilt."""
        with self.snapshot() as conn:
            due = [t for t in fts_tables(conn) if fts_levels(conn, t) >= FTS_LEVEL_BOUND]
        rebuilt = []
        for table in due:
            with self.write() as conn:
                if bound_fts_levels(conn, table):
                    rebuilt.append(table)
        return rebuilt

    def flush_journal(self) -> str | None:
        """Copy the WAL into the db file and cut it to zero bytes (`wal_checkpoint(TRUNCATE)`),
        after a purge: a WAL restarts from its start and keeps its old frames up to
        WAL_SIZE_LIMIT, so the page images from before the purge, holding what it removed,
        stayed in `memory.db-wal` for as long as the service ran. A reader on an older
        snapshot blocks the cut: tried again, LOCK_TRY_MS apart, for FLUSH_JOURNAL_WAIT_S.
        Each try takes the write lock once and waits for no reader (a TRUNCATE checkpoint
        holds SQLite's writer lock while it waits): writes go on between tries, where a wait
        inside the lock stopped every writer for the whole FLUSH_JOURNAL_WAIT_S while an
        export or a migrate read its snapshot. Returns why it could not, else None."""
        if not isinstance(self._target, Path):  # an immutable view: no WAL of its own
            return None
        deadline = time.monotonic() + FLUSH_JOURNAL_WAIT_S
        while True:
            with self._write_lock:
                conn = self._writer
                conn.execute("PRAGMA busy_timeout = 0")
                try:
                    if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                        return None
                except sqlite3.OperationalError as exc:
                    if (problem := self._problem(exc)) is not None:
                        return problem
                    if not _is_busy(exc):
                        raise
                finally:
                    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if time.monotonic() >= deadline:
                return (f"{self.path}-wal was not cut: another connection kept reading "
                        f"an older state for {FLUSH_JOURNAL_WAIT_S:g} s; it may hold "
                        "purged text until the next purge that removes something, or "
                        "until the last process with the file open closes it")
            time.sleep(LOCK_TRY_MS / 1000)

    def size_bytes(self) -> int:
        return sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"))
            if p.exists()
        )

    def damage(self, exc: BaseException) -> str | None:
        if isinstance(exc, sqlite3.DatabaseError) and damaged(exc):
            return sqlite_problem(exc)
        return None

    def close(self) -> None:
        """Close the writer and the readers of this thread and of ended ones. Another live
        thread's reader closes with that thread: closed under a query it is still running
        (a channel's search that outlived its deadline, released at shutdown), the sqlite3
        module crashed the process."""
        with self._readers_lock:
            for reader in list(self._readers):
                if reader.owner is threading.current_thread() or not reader.owner.is_alive():
                    reader.conn.close()
            self._readers.clear()
        with self._write_lock:
            if isinstance(self._target, Path):
                self._cut_journal()
            self._writer.close()

    def _cut_journal(self) -> None:
        """At close, the WAL copied into the db file and cut to zero bytes, in one try of
        LOCK_TRY_MS: SQLite removes the WAL when the process's last connection closes, and
        another live thread's reader stays open to the process's end, so a stopped service
        left its last writes (after a purge, what the purge's cut had emptied) in
        `memory.db-wal`. A reader in the middle of a query leaves it as it is."""
        try:
            self._writer.execute(f"PRAGMA busy_timeout = {LOCK_TRY_MS}")
            self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:  # read-only, closed already, busy: the WAL stays as it is
            pass


@hookimpl
def register_stores(register: Callable[[type[SQLiteStore]], None]) -> None:
    register(SQLiteStore)
