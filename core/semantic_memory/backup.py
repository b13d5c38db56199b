"""`memory-mcp backup` and `memory-mcp restore`: a SQLite store copied whole, safely.

A store is three files: `memory.db`, its write-ahead log `memory.db-wal` (the newest writes,
not yet copied into the db) and the WAL's index `memory.db-shm`. Copying them by hand loses
data: `memory.db` alone misses the newest writes, the db and then its WAL copied while the
service writes are two moments that do not fit together, and a backup copied over `memory.db`
beside a newer `-wal` (left by a crash, or still open) has that WAL replayed onto its older
pages, which corrupts it. So:

- `backup` reads a snapshot inside one read transaction (`VACUUM INTO`), which never blocks
  the service's writes nor sees half of one, writes it beside the target, checks it and only
  then renames it into place.
- `restore` refuses while a service (or any process) has the store open, copies the backup
  beside the db and checks it, keeps the current db (its WAL checkpointed into it) as
  `memory.db.before-restore`, removes the old `-wal` and `-shm`, and renames the copy in.

Why `VACUUM INTO` and not the online backup API (`sqlite3.Connection.backup`): on 100k
memories (85.6 MB) they took the same (0.22-0.39 s against 0.27-0.48 s, three runs), but
VACUUM INTO writes a compact file (78.6 MB) in rollback-journal mode: one self-contained
file, readable without a `-wal` or `-shm`, and holding none of the free pages where deleted
text may linger in a store older than `secure_delete`. The backup API copies every page as it
is, the WAL flag included.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .cli_io import interrupt_deferred
from .config import Settings
from .service.discovery import other_owner
from .spool import process_gone
from .stores import scheme_of, store_url
from .stores.sqlite import SCHEMA_VERSION, path_of

#: The files SQLite keeps beside a db in WAL mode.
SIDE_FILES = ("-wal", "-shm")
#: SQLite's codes for a write the disk refused (full, a file size limit, a failing disk).
WRITE_FAILURES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR_WRITE,
                            sqlite3.SQLITE_IOERR_FSYNC, sqlite3.SQLITE_IOERR_TRUNCATE})
#: What `restore` renames the current db to (its `-wal`, when it could not be checkpointed,
#: goes along as `memory.db.before-restore-wal`, which SQLite pairs with it).
BEFORE_RESTORE = ".before-restore"
#: A copy being written beside FILE untouched this long is a dead process's, whatever its pid
#: says (the pid may live on in an unrelated process): VACUUM INTO writes it all along.
LEFTOVER_STALE_S = 3600.0
#: The characters of an earlier release's random temporary names (`tempfile.mkstemp`).
_MKSTEMP_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")


class BackupError(Exception):
    """A backup or restore that cannot be done: one line saying why; nothing was changed."""


@dataclass(frozen=True)
class Copy:
    """A checked copy of a store: where it is, its memories (forgotten ones included) and
    size; `cleared`: the copies killed backups or restores had left beside it, removed."""

    path: Path
    memories: int
    size: int
    cleared: tuple[Path, ...] = ()

    @property
    def cleared_note(self) -> str | None:
        """The line that says what was cleared (None when nothing was)."""
        if not self.cleared:
            return None
        names = ", ".join(p.name for p in self.cleared)
        return (f"removed {len(self.cleared)} unfinished copy(ies) of the store that a killed "
                f"backup or restore left in {self.path.parent}: {names}")


def sqlite_file(settings: Settings) -> Path | None:
    """The db file of a SQLite store; None for another engine (PostgreSQL)."""
    url = store_url(settings)
    return path_of(url) if scheme_of(url) == "sqlite" else None


def store_path(settings: Settings, command: str) -> Path:
    """The SQLite db file `command` copies; BackupError for a PostgreSQL store, which has
    its server's own tools."""
    db = sqlite_file(settings)
    if db is None:
        raise BackupError(f"{command} copies a SQLite store's file; on PostgreSQL use the "
                          "server's own backups (pg_dump; docs/postgres.md), or `memory-mcp "
                          "migrate --to sqlite:///copy.db` for a one-file copy")
    return Path(os.path.abspath(db))


def serving(settings: Settings, db: Path) -> str | None:
    """Why `db` cannot be restored now: a live service serves it (its discovery file names
    a running process and this db; one without `db_path`, an older release's, counts), else
    None."""
    found = other_owner(settings, db)
    if found is None:
        return None
    return (f"{db} is served by a running service (pid {found.get('pid')}, {found.get('url')}"
            "): stop it, restore, then start it again")


def store_files(db: Path) -> list[Path]:
    """The db file and the files SQLite keeps beside it, through links, as written to."""
    return [Path(os.path.realpath(f"{db}{side}")) for side in ("", *SIDE_FILES)]


def store_file_named(path: str | Path, db: Path) -> Path | None:
    """The store's own file (db, -wal or -shm) that writing to `path` would replace, or
    None: an export or backup written there destroys the store it copies."""
    target = Path(os.path.realpath(path))
    return next((f for f in store_files(db) if f == target), None)


def backup(db: Path, target: Path) -> Copy:
    """A consistent copy of the store at `db`, while a service serves and writes it, as
    `target` (0600), renamed into place only once `PRAGMA quick_check` passes on it."""
    if (own := store_file_named(target, db)) is not None:
        raise BackupError(f"{target} is the store's own file {own.name}: back it up to "
                          "another file")
    if not db.is_file():
        raise BackupError(f"no store at {db}")
    destination = Path(os.path.realpath(target))
    if destination.is_dir():
        raise BackupError(f"{target} is a folder: give a file name")
    cleared = clear_leftovers(destination)
    with _temp_beside(destination) as temp:
        try:
            with closing(sqlite3.connect(db, timeout=60)) as source:
                # One read transaction: the writes the service commits meanwhile go to its WAL
                # and are not in the copy; none is in it by half.
                source.execute("VACUUM INTO ?", (str(temp),))
        except sqlite3.DatabaseError as exc:
            raise BackupError(_copy_failed(exc, db, target)) from None
        # VACUUM INTO has just rebuilt every index from its table: the full integrity_check
        # would check that again (0.5-0.8 s at 100k memories against quick_check's 0.07-0.2 s);
        # quick_check reads every page, which is what a bad write or disk would damage.
        copy = _checked(temp, "quick_check", str(target))
        _sync(temp)
        os.replace(temp, destination)
        _sync(destination.parent)
    return Copy(destination, copy.memories, copy.size, cleared)


def _copy_failed(exc: sqlite3.DatabaseError, db: Path, target: Path) -> str:
    """Why `VACUUM INTO` failed, naming the side at fault: the copy's disk full, or its temp
    file beside `target` not creatable, is the target's (it said `cannot copy <db>: database
    or disk is full`, which read as the store's disk); anything else is the store's."""
    code = exc.sqlite_errorcode & 0xFF
    if code == sqlite3.SQLITE_FULL:
        return f"cannot write the copy {target}: its disk is full (free some space there)"
    if code == sqlite3.SQLITE_IOERR:  # the store is only read: the copy's writes failed
        return (f"cannot write the copy {target}: {exc} (a file size limit, a failing disk; "
                "the store is only read)")
    if code == sqlite3.SQLITE_CANTOPEN:
        return (f"cannot write the copy {target}: its temporary file beside it cannot be "
                f"created ({exc}; a name too long for the folder, or a folder that cannot be "
                "written)")
    return f"cannot copy {db}: {exc}"


def restore(settings: Settings, db: Path, source: Path) -> tuple[Copy, Path | None]:
    """Put a copy of the store `source` in place of `db`: the copy (at `db`) and where the
    earlier db is kept (`memory.db.before-restore`; None when there was none). Refused while
    a service or another process has `db` open."""
    if (why := serving(settings, db)) is not None:
        raise BackupError(why)
    if (own := store_file_named(source, db)) is not None:
        raise BackupError(f"{source} is the store's own file {own.name}: restore from a "
                          "backup")
    if source.exists() and not source.is_file():
        raise BackupError(f"{source} is not a regular file: restore takes a backup file")
    if not source.is_file():
        raise BackupError(f"no file {source}")
    kept = db.with_name(db.name + BEFORE_RESTORE)
    for earlier in (kept, Path(f"{kept}-wal")):
        if earlier.exists():
            raise BackupError(f"{earlier} is there from an earlier restore: move it away (or "
                              "delete it), then restore again")
    db.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    cleared = clear_leftovers(db)
    with _temp_beside(db) as temp:
        copy = _copy_in(source, temp)
        # Whole or not at all: a Ctrl-C between the renames left no store at `db` (the
        # next command made an empty one) and deleted the checked copy.
        with interrupt_deferred():
            if db.exists():
                _set_aside(db, kept)
            for side in SIDE_FILES:  # a WAL left here would be replayed onto the restored pages
                Path(f"{db}{side}").unlink(missing_ok=True)
            os.replace(temp, db)
            _sync(db.parent)
    return Copy(db, copy.memories, copy.size, cleared), kept if kept.exists() else None


def _copy_in(source: Path, temp: Path) -> Copy:
    """Copy the store `source` (with its -wal, if one is beside it) to `temp` and check the
    copy: a SQLite file, a store of this project, a schema this release reads, intact."""
    try:  # read-only: the user's backup is left as it is
        with closing(sqlite3.connect(f"{source.absolute().as_uri()}?mode=ro", uri=True,
                                     timeout=60)) as conn:
            _check_schema(conn, source)
            conn.execute("VACUUM INTO ?", (str(temp),))
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) in WRITE_FAILURES:  # the copy, not FILE
            raise BackupError(f"cannot write the copy beside {temp.parent}/ ({exc}): free "
                              "some space there, then restore again") from None
        raise BackupError(f"{source} is not a store that can be restored: {exc}") from None
    # A file of unknown history: the full check, indexes against their tables too.
    return _checked(temp, "integrity_check", str(source))


def _check_schema(conn: sqlite3.Connection, source: Path) -> None:
    """BackupError unless `conn` is a memory store whose schema this release reads (an
    older one is upgraded when it is next opened)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = "
                    "'memories'").fetchone() is None:
        raise BackupError(f"{source} is a SQLite file but not a memory store (no memories "
                          "table)")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise BackupError(f"{source} has schema version {version}, newer than this release "
                          f"reads ({SCHEMA_VERSION}): upgrade semantic-memory-core first")


def _checked(path: Path, check: str, name: str) -> Copy:
    """`path` once `PRAGMA <check>` finds it intact, with its count of memories."""
    try:
        with closing(sqlite3.connect(path)) as conn:
            problems = [row[0] for row in conn.execute(f"PRAGMA {check}")]
            memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"the copy of {name} cannot be read: {exc}") from None
    if problems != ["ok"]:
        raise BackupError(f"the copy of {name} is damaged ({check}: {problems[0]})")
    return Copy(path, memories, path.stat().st_size)


def _set_aside(db: Path, kept: Path) -> None:
    """Rename the current db to `kept`, its WAL checkpointed into it first so that it is one
    file; BackupError, nothing changed, when another process has it open."""
    try:
        with closing(sqlite3.connect(db, timeout=60)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # The last connection to close deletes the WAL: one still there is another's.
        held = Path(f"{db}-wal").exists()
    except sqlite3.DatabaseError:  # a damaged store (why it is restored): kept as it is
        held = False
    if held:
        raise BackupError(f"{db} is open in another process (a --stdio server, a command "
                          "still running): stop it, then restore")
    os.rename(db, kept)
    wal = Path(f"{db}-wal")
    if wal.exists():  # not checkpointed (a damaged store): kept beside it, as its pair
        os.rename(wal, f"{kept}-wal")


@contextmanager
def _temp_beside(target: Path) -> Iterator[Path]:
    """An empty file (0600: it will hold every memory) beside `target`, on its file system so
    that a rename puts it in place; removed unless renamed. VACUUM INTO takes an empty file.
    Named `.<target>.<pid>.tmp`: killed (no `finally` runs), this process leaves a file whose
    name says it is dead, which the next backup or restore removes (`clear_leftovers`)."""
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as exc:
        raise BackupError(f"cannot write beside {target}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        yield temp
    finally:
        for leftover in _with_side_files(temp):
            leftover.unlink(missing_ok=True)


def _with_side_files(temp: Path) -> list[Path]:
    """A copy and the files SQLite may keep beside it while writing it."""
    return [temp, *(Path(f"{temp}{side}") for side in ("-journal", *SIDE_FILES))]


def clear_leftovers(target: Path, now: float | None = None) -> tuple[Path, ...]:
    """Remove the copies killed backups or restores left beside `target` (`.<target>.<pid>.tmp`
    whose pid no process has, or any such copy untouched for LEFTOVER_STALE_S, an earlier
    release's randomly named ones included), with their journals: each is a hidden copy of
    every memory, purged ones included. Returns the copies removed. A copy a live backup is
    writing is left alone."""
    now = time.time() if now is None else now
    prefix = f".{target.name}."
    try:
        names = os.listdir(target.parent)
    except OSError:
        return ()
    # Each copy once, by its own name, also where only its journal is left.
    copies = sorted({name[:name.rindex(".tmp") + 4] for name in names
                     if name.startswith(prefix) and ".tmp" in name[len(prefix):]})
    removed = []
    for name in copies:
        tag = name[len(prefix):-len(".tmp")]
        pid = int(tag) if tag.isdigit() else None
        if pid is None and not (len(tag) == 8 and set(tag) <= _MKSTEMP_CHARS):
            continue
        files = [f for f in _with_side_files(target.parent / name) if f.name in names]
        if not files:  # `.tmp` inside some other name
            continue
        # This process's own pid on a copy it has not made yet: a dead earlier process's.
        dead = pid is not None and (pid == os.getpid() or process_gone(pid))
        try:
            if not dead and now - max(f.lstat().st_mtime for f in files) < LEFTOVER_STALE_S:
                continue
            for file in files:
                file.unlink(missing_ok=True)
        except OSError:  # removed by another backup meanwhile, or not ours to remove
            continue
        removed.append(target.parent / name)
    return tuple(removed)


def _sync(path: Path) -> None:
    """fsync a file or folder, so that a rename after it survives a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
