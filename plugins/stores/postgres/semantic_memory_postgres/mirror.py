"""A local keyword mirror of a PostgreSQL store: the searchable columns of its memories in a
SQLite file beside the service, indexed by the SQLite store's own porter and trigram channels.

Why: PostgreSQL ranks keyword matches a round trip and a row read per candidate away, 3x a
SQLite store's whole-store recall at 100k memories, where FTS5 ranks inside the process over
compact doclists (docs/postgres.md). The mirror answers `pg_fulltext` and `pg_trigram` as the
SQLite channels would; the memories themselves are still loaded from PostgreSQL.

Never stale: the store numbers every change in commit order (`schema.CHANGE_LOG_SCHEMA`), and
each search first applies the changes its own snapshot sees after the mirror's last number (one
indexed statement, usually empty). Every service keeps its own mirror and follows the same
log, so another machine's write is searchable here at once. Never waited for: the mirror is
built (and a long backlog applied) in a background thread while PostgreSQL's own searches
answer; a mirror that cannot be read is dropped and built again the same way. Forgotten
memories are kept without their text, so a forgotten secret leaves the mirror's rows at the
next search; its words stay in the FTS5 indexes' segments (unsearchable) as the store keeps
the memory, until a purge: a sync that applies purges has the indexes merged in the
background, a step at a time (`_scrub`), and the file's bytes zeroed as they are freed
(secure_delete), so the purged words leave the file.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from semantic_memory.channels import Channel
from semantic_memory.filelock import exclusive
from semantic_memory.stores.sqlite import (SCRUB_STEP_PAGES, fts_tables, merge_fts_indexes,
                                           merge_fts_step, run_script)

if TYPE_CHECKING:
    import psycopg

    from .store import PostgresStore

log = logging.getLogger("semantic_memory.postgres")

#: Bumped when the mirror's tables change: a mirror of another format is built again.
FORMAT = "1"
#: Changes one search applies before it answers; a longer backlog (a service that was down
#: while others wrote) is applied in the background while PostgreSQL's searches answer.
SYNC_LIMIT = 2_000
#: Rows per batch while a mirror is built, and changes per batch of a background catch-up.
BUILD_BATCH = 5_000
CATCH_UP_BATCH = 500
#: Seconds a search waits for the mirror file another service is writing before PostgreSQL
#: answers it instead.
BUSY_TIMEOUT_S = 0.25
#: How long a scrub tries to cut the mirror's WAL while searches hold older snapshots.
CUT_WAL_S = 2.0

LOCAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS mirror_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    content TEXT NOT NULL,
    kind TEXT NOT NULL,
    source TEXT NOT NULL,
    project TEXT,
    updated_at REAL NOT NULL,
    deleted INTEGER NOT NULL,
    superseded_by TEXT
);
CREATE INDEX IF NOT EXISTS memories_project ON memories(project, id);
CREATE INDEX IF NOT EXISTS memories_forgotten ON memories(id) WHERE deleted = 1;
"""
#: What a search reads (`RecallFilters.sql` and the FTS5 channels), as the mirror stores it:
#: a forgotten memory without its text.
_COLUMNS = ("id, CASE WHEN deleted = 0 THEN content ELSE '' END, kind, source, project, "
            "updated_at, deleted, superseded_by")
_CHANGES = (f"SELECT change_seq, {_COLUMNS} FROM memories WHERE change_seq > %s "
            "UNION ALL SELECT change_seq, id, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
            "FROM memories_removed WHERE change_seq > %s ORDER BY 1 LIMIT %s")
#: The last number the change log handed out (not transactional: taken by uncommitted
#: changes too), one cheap read of the sequence.
_NUMBERED = ("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
             "FROM memories_change_seq")
_LAST_CHANGE = ("SELECT greatest((SELECT max(change_seq) FROM memories), "
                "(SELECT max(change_seq) FROM memories_removed))")
_INSERT = ("INSERT INTO memories (id, content, kind, source, project, updated_at, deleted, "
           "superseded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
#: A change to a memory the mirror holds; its text is set apart, only when it changed.
_UPSERT = (f"{_INSERT} ON CONFLICT (id) DO UPDATE SET "
           "kind = excluded.kind, source = excluded.source, project = excluded.project, "
           "updated_at = excluded.updated_at, deleted = excluded.deleted, "
           "superseded_by = excluded.superseded_by")


class KeywordMirror:
    """One store's mirror file, shared by the two PostgreSQL keyword channels of a process.

    `local(conn, live)` is the whole interface: a mirror connection brought up to date with
    `conn`'s snapshot, or None while PostgreSQL's own search should answer (no mirror yet, a
    backlog being applied, fewer than `min_live` memories by `live()`, a broken file). Only
    a process that `build`s (a service) starts a build."""

    def __init__(self, folder: Path, min_live: int, channels: Sequence[Channel],
                 build: bool = True) -> None:
        self.folder = folder
        self.min_live = min_live
        self.build = build  # False in a one-off command: it uses a mirror, never builds one
        self._channels = channels  # the SQLite channels whose tables the mirror holds
        self._store: PostgresStore | None = None
        self._path: Path | None = None
        self._lock = threading.Lock()  # one writer (sync, open, drop) at a time
        self._writer: sqlite3.Connection | None = None  # open while the mirror is ready
        self._readers = threading.local()
        self._generation = 0  # bumped when the file is dropped: readers reopen
        self._last = 0  # the last change applied, as this process last read or wrote it
        self._worker: threading.Thread | None = None
        #: The mirror's `scrub_due` mark as this process last read or wrote it: the change
        #: number of the last sync that applied purges whose words the indexes still hold
        #: (`_scrub`); None when none waits. Kept in the file, so that a scrub a process did
        #: not finish (a one-off command applied the purge, or the service stopped) is done
        #: by the next service to sync it.
        self._scrub_due: str | None = None

    def bind(self, store: PostgresStore) -> None:
        """Called by each channel's `bind`; the first call names the file."""
        if self._store is None:
            self._store = store
            store_id = store.read().execute(
                "SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0]
            self._path = self.folder / f"{store_id}.db"

    @property
    def ready(self) -> bool:
        return self._writer is not None

    def status(self) -> str:
        """What `memory-mcp stats` says of it."""
        if self._worker is not None and self._worker.is_alive() and self._writer is None:
            return "keyword mirror being built; PostgreSQL's own search answers meanwhile"
        files = [Path(f"{self._path}{suffix}") for suffix in ("", "-wal")] if self._path else []
        size = sum(f.stat().st_size for f in files if f.exists())
        if size:
            return (f"keyword mirror {size / 1e6:.1f} MB in {self.folder}"
                    + (", in use" if self._writer is not None else ", used from the next search"))
        return (f"no keyword mirror yet (a service builds one from {self.min_live:,} "
                "memories at its first search); PostgreSQL's own search answers")

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the build or catch-up running in the background, if any (benchmarks)."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    # --- searching --------------------------------------------------------------------------

    @contextmanager
    def local(self, conn: psycopg.Connection, live: Callable[[], int], follow: bool = True
              ) -> Iterator[sqlite3.Connection | None]:
        """A read transaction on the mirror holding every change `conn` sees, or None. Never
        inside a write transaction: the mirror must not follow changes that may roll back.
        `follow=False`: the mirror as it is, when open (judging hits a search of this
        snapshot found there: the changes were followed then)."""
        store = self._store
        if store is None or store.writing:
            yield None
            return
        current = self._writer is not None if not follow else self._up_to_date(conn, live)
        if not current:
            yield None
            return
        reader = self._reader()
        if reader is None:
            yield None
            return
        reader.execute("BEGIN")  # the search's statements see one state of the mirror
        try:
            yield reader
        finally:
            if reader.in_transaction:
                reader.execute("ROLLBACK")

    def failed(self, exc: sqlite3.Error) -> None:
        """A search on the mirror failed: a damaged file is dropped, to be built again."""
        if not _busy(exc):
            with self._lock:
                self._drop(f"cannot be searched ({exc})")

    def _up_to_date(self, conn: psycopg.Connection, live: Callable[[], int]) -> bool:
        with self._lock:
            if self._writer is None and not self._open(conn):
                if self.build and live() >= self.min_live:
                    self._start(self._build)
                return False
            last = self._last
        # Usually nothing changed, which the sequence says: every change, committed or not,
        # took a number from it (a change still in flight only costs the full question).
        # Asked without the lock, so two channels' searches ask at once.
        numbered = conn.execute(_NUMBERED).fetchone()[0]
        if numbered == last:
            if self._scrub_due is not None and self.build:  # one stopped short: again
                self._start(self._catch_up)
            return True
        with self._lock:
            if self._writer is None:
                return False
            if numbered < last:  # the database was restored from an older backup
                self._drop("is ahead of its store")
                return False
            try:
                complete = self._sync(conn)
            except sqlite3.Error as exc:
                if not _busy(exc):  # busy: another service is writing it; PostgreSQL answers
                    self._drop(f"cannot be written ({exc})")
                return False
        if not complete or (self._scrub_due is not None and self.build):
            self._start(self._catch_up)
        return complete

    def _reader(self) -> sqlite3.Connection | None:
        state = getattr(self._readers, "conn", None)
        if state is not None and state[0] == self._generation:
            return state[1]
        if state is not None:
            state[1].close()
        assert self._path is not None
        try:
            conn = _connect(self._path, readonly=True)
        except sqlite3.Error as exc:
            with self._lock:
                self._drop(f"cannot be read ({exc})")
            return None
        self._readers.conn = (self._generation, conn)
        return conn

    # --- following the change log -----------------------------------------------------------

    def _sync(self, conn: psycopg.Connection, limit: int = SYNC_LIMIT) -> bool:
        """Apply up to `limit` changes after the mirror's last; False when more are waiting.
        Under `_lock`, and in an IMMEDIATE transaction: services sharing a folder apply each
        change once, in order."""
        writer = self._writer
        assert writer is not None
        writer.execute("BEGIN IMMEDIATE")
        try:
            meta = dict(writer.execute(
                "SELECT key, value FROM mirror_meta WHERE key IN ('last_change', 'scrub_due')"))
            last = int(meta["last_change"])
            rows = conn.execute(_CHANGES, (last, last, limit)).fetchall()
            purged = False
            for _, memory_id, *columns in rows:
                if columns[0] is None:  # purged
                    writer.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
                    purged = True
                    continue
                writer.execute(_UPSERT, (memory_id, *columns))
                # Only a changed text is indexed again (the FTS5 tables' update trigger).
                writer.execute("UPDATE memories SET content = ? WHERE id = ? AND content <> ?",
                               (columns[0], memory_id, columns[0]))
            if rows:
                last = rows[-1][0]
                writer.execute("UPDATE mirror_meta SET value = ? WHERE key = 'last_change'",
                               (str(last),))
            if purged:
                meta["scrub_due"] = str(last)
                writer.execute("INSERT OR REPLACE INTO mirror_meta (key, value) "
                               "VALUES ('scrub_due', ?)", (meta["scrub_due"],))
            writer.execute("COMMIT")
        except BaseException:
            if writer.in_transaction:
                writer.execute("ROLLBACK")
            raise
        self._last = last
        self._scrub_due = meta.get("scrub_due")
        return len(rows) < limit

    def _catch_up(self) -> None:
        """A long backlog, applied in the background in batches small enough that a search
        waiting for the lock meanwhile waits a few milliseconds; then `_scrub` if a purge was
        applied (by this or by a search's sync)."""
        assert self._store is not None
        while True:  # the connection first: searches waiting for the lock hold theirs
            with self._store.snapshot() as pg, self._lock:
                if self._writer is None:
                    return
                if self._sync(pg, CATCH_UP_BATCH):
                    break
        while self.build and self._scrub_due is not None and self._scrub():
            pass

    def _scrub(self) -> bool:
        """Take the words of the memories purged out of the file: merge each FTS5 index into
        one segment (FTS5 keeps a deleted row's words, and the delete's own markers, until a
        merge rewrites every segment), SCRUB_STEP_PAGES a step, each step a transaction under
        `_lock` (searches read the mirror meanwhile; a sync waits a step at most); the writer
        zeroes the blocks replaced (secure_delete). Then the mark is cleared, unless a sync
        applied more purges meanwhile, and the WAL's old frames are cut. False when it could
        not go on (another service is writing the file: the next search starts it again)."""
        due = self._scrub_due
        with self._lock:
            if self._writer is None:
                return False
            tables = fts_tables(self._writer)
        for table in [*tables, None]:  # None: the mark, once every index is merged
            first = True
            while True:
                with self._lock:
                    writer = self._writer
                    if writer is None:
                        return False
                    try:
                        writer.execute("BEGIN IMMEDIATE")
                        if table is None:
                            writer.execute("DELETE FROM mirror_meta WHERE key = 'scrub_due' "
                                           "AND value = ?", (due,))
                            more = False
                        else:
                            more = merge_fts_step(writer, table, SCRUB_STEP_PAGES, first)
                        writer.execute("COMMIT")
                    except sqlite3.Error as exc:
                        if writer.in_transaction:
                            writer.execute("ROLLBACK")
                        if not _busy(exc):
                            self._drop(f"cannot be written ({exc})")
                        return False
                    if table is None and self._scrub_due == due:
                        self._scrub_due = None
                first = False
                if not more:
                    break
        self._cut_wal()
        return True

    def _cut_wal(self) -> None:
        """`wal_checkpoint(TRUNCATE)` of the mirror, tried for CUT_WAL_S while searches hold
        older snapshots (each for milliseconds); left as it is after that, until the next
        scrub (one line in the log)."""
        deadline = time.monotonic() + CUT_WAL_S
        while True:
            with self._lock:
                if self._writer is None:
                    return
                try:
                    if self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                        return
                except sqlite3.Error as exc:
                    if not _busy(exc):
                        raise
            if time.monotonic() >= deadline:
                log.info("postgres: keyword mirror %s-wal not cut: searches kept reading an "
                         "older state for %g s", self._path, CUT_WAL_S)
                return
            time.sleep(0.05)

    # --- the file ---------------------------------------------------------------------------

    def _open(self, conn: psycopg.Connection) -> bool:
        """Open an existing mirror of this store (under `_lock`, asking with the search's own
        connection): False when there is none or it cannot serve (then it is removed, to be
        built again)."""
        assert self._path is not None
        if not self._path.exists():
            return False
        try:
            writer = _connect(self._path)
            meta = dict(writer.execute("SELECT key, value FROM mirror_meta"))
            newest = conn.execute(_LAST_CHANGE).fetchone()[0] or 0
            if meta.get("format") != FORMAT or int(meta.get("last_change", -1)) > newest:
                writer.close()  # another format, or a store restored from an older backup
                _unlink(self._path)
                return False
        except sqlite3.Error as exc:
            self._drop(f"cannot be opened ({exc})")
            return False
        self._writer = writer
        self._last = int(meta["last_change"])
        self._scrub_due = meta.get("scrub_due")
        return True

    def _drop(self, why: str) -> None:
        """Stop using the mirror and remove its file (under `_lock`); PostgreSQL's searches
        answer until it is built again."""
        log.warning("postgres: keyword mirror %s %s; PostgreSQL's own search answers until it "
                    "is built again", self._path, why)
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._generation += 1
        if self._path is not None:
            _unlink(self._path)

    def _start(self, work: Callable[[], None]) -> None:
        """Run `work` in the background unless a build or catch-up is running already."""
        if self._worker is not None and self._worker.is_alive():
            return
        self._worker = threading.Thread(target=self._guarded, args=(work,), daemon=True,
                                        name="semantic-memory-pg-mirror")
        self._worker.start()

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:  # a background failure is one line; searches go on on PG
            log.warning("postgres: keyword mirror %s not updated: %s", self._path,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _build(self) -> None:
        """Copy the store's memories into a new file, index them, then put it in place. A
        lock file keeps two services sharing the folder from building the same mirror."""
        assert self._path is not None and self._store is not None
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with exclusive(self._path.with_suffix(".lock")) as held:
            if not held or self._path.exists():
                return  # another service is building it; its file is used once in place
            partial = self._path.with_suffix(".building")
            _unlink(partial)  # what a killed build left
            conn = _connect(partial)
            try:
                self._fill(conn)
            except BaseException:
                conn.close()
                _unlink(partial)
                raise
            conn.close()
            os.replace(partial, self._path)
        log.info("postgres: keyword mirror %s built", self._path)

    def _fill(self, conn: sqlite3.Connection) -> None:
        assert self._store is not None
        conn.execute("BEGIN")
        run_script(conn, LOCAL_SCHEMA)
        with self._store.snapshot() as pg:
            last = pg.execute(_LAST_CHANGE).fetchone()[0] or 0
            with pg.cursor(name="semantic_memory_mirror") as cursor:
                cursor.itersize = BUILD_BATCH
                cursor.execute(f"SELECT {_COLUMNS} FROM memories ORDER BY id")
                while rows := cursor.fetchmany(BUILD_BATCH):
                    conn.executemany(_INSERT, rows)
        for channel in self._channels:  # each indexes what is there in one pass
            channel.setup(conn)
        # One segment per index, as `SQLiteStore.optimize` leaves a bulk import: the trigram
        # index's searches were 1.3x slower in the segments 'rebuild' leaves.
        merge_fts_indexes(conn)
        conn.executemany("INSERT INTO mirror_meta (key, value) VALUES (?, ?)",
                         [("format", FORMAT), ("last_change", str(last))])
        conn.execute("COMMIT")


def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """An autocommit connection (transactions are explicit) to a mirror file only its owner
    may read."""
    if not readonly and not path.exists():
        path.touch(mode=0o600)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_S)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # a mirror lost to a power cut is built again
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:  # a purged row's text and the index blocks a merge replaces are zeroed where they lay
        conn.execute("PRAGMA secure_delete = ON")
    return conn


def _unlink(path: Path) -> None:
    """Remove a SQLite file with its write-ahead log and shared-memory index."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether `exc` says the file is locked by another writer for now (not damaged)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
