"""`memory-mcp migrate`: copy one store into another (SQLite -> PostgreSQL, or back) and check
that everything arrived.

Memories keep their uid, timestamps (to the microsecond), forgotten state, session and place,
supersession and earlier versions (edits); injection reports keep their memories; the tombstones
of purged texts (hashes) come along; vectors are copied with their model tags from a channel
that exports them to one that imports them (nothing is embedded again: a vector of the model the
target is configured with serves at once, others wait for `memory-mcp backfill`). The target
must be empty, so that the counts after the copy say whether anything was lost.

Everything is read from one snapshot of the source, so a service writing to it meanwhile
changes neither the counts nor the copy. A SQLite target is filled from a copy made and
verified beside it, in one transaction: a copy that fails (a full disk) leaves it as it was. A
PostgreSQL target is written in place; a copy that fails there says to drop and recreate it.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

from .channels import TransfersVectors
from .errors import InvalidMemory, one_line
from .filelock import exclusive
from .ingest import validate
from .models import Memory, NewMemory, RecallFilters
from .pipeline import MemoryEngine, as_stored
from .stores import StoreError
from .stores.sqlite import SQLiteStore

BATCH = 1_000


class MigrationError(RuntimeError):
    """The copy cannot start (target not empty) or did not arrive whole."""


def _restore(memory: Memory) -> NewMemory:
    return NewMemory(content=memory.content, kind=memory.kind, source=memory.source,
                     project=memory.project, tags=list(memory.tags),
                     created_at=memory.created_at, session=memory.session, uid=memory.uid,
                     updated_at=memory.updated_at, forgotten=memory.deleted, seq=memory.seq,
                     superseded_by=memory.superseded_by)


def _refused_as(memory: NewMemory) -> str:
    """The count a memory the target's filters refused would have been in."""
    if memory.forgotten:
        return "forgotten"
    return "superseded" if memory.superseded_by else "memories"


def _cleaned_revision(row: dict[str, Any]) -> dict[str, Any]:
    """An earlier version as the target's hygiene keeps text (private spans out, secrets
    redacted): it was cleaned by the rules of its day, which may have missed what today's
    catch, and it is read back by `memory-mcp history` and the browse page."""
    return row | {"content": as_stored(row["content"]) or "",
                  "tags": [as_stored(tag) or "" for tag in row["tags"]]}


def _cleaned_report(report: dict[str, Any]) -> dict[str, Any]:
    """An injection report's text fields as `record_injection` keeps them today."""
    return report | {key: as_stored(report.get(key))
                     for key in ("harness", "hook", "project", "query", "session")}


def _copy_revisions(source: MemoryEngine, target: MemoryEngine,
                    refused: set[str]) -> dict[str, int]:
    """Copy every memory's earlier versions (edits), cleaned; returns how many were exported
    (leaving out those of `refused` memories, which have none to go to) and stored."""
    return _in_batches((_cleaned_revision(row) for row in source.store.export_revisions()
                        if row["uid"] not in refused), target.store.restore_revisions)


def _copy_purged(source: MemoryEngine, target: MemoryEngine) -> dict[str, int]:
    """Copy the tombstones of purged texts (hashes, no text: `store.export_purged`), so that
    the target's automatic capture does not store again what was purged at the source;
    returns how many were exported and are in the target."""
    return _in_batches(source.store.export_purged(), target.store.restore_purged)


def _in_batches(rows: Iterable[dict[str, Any]], restore: Callable[[list[dict[str, Any]]], int]
                ) -> dict[str, int]:
    """`restore` the rows BATCH at a time; how many there were (`exported`) and how many it
    says it stored (`copied`)."""
    counts = {"exported": 0, "copied": 0}
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            counts["exported"] += len(batch)
            counts["copied"] += restore(batch)
            batch = []
    if batch:
        counts["exported"] += len(batch)
        counts["copied"] += restore(batch)
    return counts


def _superseded(engine: MemoryEngine) -> int:
    """How many memories a newer one replaced (supersession must arrive too)."""
    filters = RecallFilters(include_superseded=True)
    return engine.count(filters) - engine.count(RecallFilters())


def _copy_vectors(source: MemoryEngine, target: MemoryEngine) -> dict[str, int]:
    """Copy every vector the source's channels export into the target's first channel that
    imports them; returns how many were exported and stored."""
    importer = next((c for c in target.channels if isinstance(c, TransfersVectors)), None)
    counts = {"exported": 0, "copied": 0}
    for channel in source.channels:
        if not isinstance(channel, TransfersVectors):
            continue
        export = channel.export_vectors
        rows: list[tuple[str, str, int, list[float]]] = []
        for row in export(source.store):
            rows.append(row)
            if len(rows) >= BATCH:
                counts["copied"] += _import(target, importer, rows)
                counts["exported"] += len(rows)
                rows = []
        counts["copied"] += _import(target, importer, rows)
        counts["exported"] += len(rows)
    return counts


def _import(target: MemoryEngine, importer: TransfersVectors | None, rows: list[Any]) -> int:
    if importer is None or not rows:
        return 0
    with target.store.write() as conn:
        return int(importer.import_vectors(conn, rows))


#: What to do with a store that a failed copy left part of (written in place: PostgreSQL).
START_AGAIN = "drop and recreate it (docs/postgres.md#setup-for-a-team), then migrate again"


def migrate(source: MemoryEngine, target: MemoryEngine,
            progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Copy every memory and injection report of `source` into the empty `target`; returns
    the counts of both and `verified`. Every memory goes through the target's checks and
    filters, as an import would: one they refuse whole (nothing but a secret by today's rules,
    a text over the target's length limit) is listed in `refused` and not expected, never
    failing the copy. A time more than a day ahead is no refusal: the source took it. Raises
    MigrationError when the target is not empty or the copy failed or did not arrive whole: a
    SQLite target is then as it was, another may hold part of the copy (the message says what
    to do)."""
    before = target.counts()
    if any(before.values()):
        advice = ("migrate into a new file" if isinstance(target.store, SQLiteStore) else
                  f"migrate into a new database, or if a failed migrate left this: {START_AGAIN}")
        raise MigrationError(f"the target {target.store.location} is not empty ({before}); "
                             + advice)
    if isinstance(target.store, SQLiteStore):
        return _copy_through_file(source, target, target.store.path, progress)
    try:
        return _copy(source, target, progress)
    except Exception as exc:  # noqa: BLE001 - a server gone, a full disk, counts that differ
        raise MigrationError(f"{_why(exc)}; the target may now hold part of the copy: "
                             f"{START_AGAIN}") from None


def _why(exc: Exception) -> str:
    """What went wrong, in one line: a store's or this module's own words as they are (they
    are written for the user), any other exception with its type."""
    if isinstance(exc, (StoreError, MigrationError)):
        return " ".join(str(exc).split())
    return one_line(exc)


def _copy_through_file(source: MemoryEngine, target: MemoryEngine, file: Path,
                       progress: Callable[[int], None] | None) -> dict[str, Any]:
    """Copy into a new SQLite file beside the target's (same disk, same plugins), verify it
    there, then copy its pages into the target in one transaction (SQLite's backup): a copy
    that fails anywhere (a full disk, counts that differ, Ctrl-C) leaves the target as it was
    and removes the new file. Not renamed over the target: `target` stays open, and in use."""
    path = Path(os.path.realpath(file))  # through a link, as SQLite opens it
    _remove_abandoned(path)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_STAGED, dir=path.parent)
    except OSError as exc:
        raise MigrationError(f"cannot create a file beside {path}: {exc.strerror or exc}; "
                             "nothing was written to it") from None
    os.close(fd)
    staged = Path(name)
    try:
        with exclusive(_lock_of(staged)):  # held while the copy lives: not abandoned
            copy = MemoryEngine(replace(target.settings, db_url=f"sqlite:///{staged}"),
                                plugin_manager=target.pm)
            try:
                result = _copy(source, copy, progress)
            finally:
                copy.close()
            _fill(path, staged)
    except Exception as exc:  # noqa: BLE001 - whatever it was, the target is as it was
        raise MigrationError(f"the copy failed ({_why(exc)}); nothing was written to "
                             f"{path}") from None
    finally:
        _remove_with_companions(staged)  # the lock too, released first (Windows)
    return result | {"target": target.store.location}


#: The suffix of the copy `_copy_through_file` stages beside a SQLite target.
_STAGED = ".migrating"


def _lock_of(staged: Path) -> Path:
    """The file whose lock says a migration still works on `staged` (a companion of it)."""
    return staged.with_name(staged.name + ".lock")


def _remove_abandoned(path: Path) -> None:
    """The copies beside `path` that a migration killed outright (SIGKILL, a power cut) left:
    as big as the source each, hidden, and never read again. One whose lock nobody holds is
    abandoned; a copy made before its lock was (the instant after `mkstemp`) looks abandoned
    only to a migration into the same file started in that instant."""
    for staged in path.parent.glob(glob.escape(f".{path.name}.") + "*" + _STAGED):
        with exclusive(_lock_of(staged)) as free:
            abandoned = free
        if abandoned:
            _remove_with_companions(staged)


def _fill(path: Path, staged: Path) -> None:
    """Every page of the verified copy `staged` into the empty SQLite file `path`, in one
    write transaction (the target's own connections see it at their next read)."""
    with closing(sqlite3.connect(staged)) as copy, \
            closing(sqlite3.connect(path, timeout=30)) as into:
        copy.backup(into)


def _remove_with_companions(staged: Path) -> None:
    """The copy and whatever SQLite and the channels made beside it (its -wal and -shm, a
    vector index folder): every path whose name starts with its own."""
    for found in staged.parent.glob(glob.escape(staged.name) + "*"):
        if found.is_dir() and not found.is_symlink():
            shutil.rmtree(found, ignore_errors=True)
        else:
            found.unlink(missing_ok=True)


def _copy(source: MemoryEngine, target: MemoryEngine,
          progress: Callable[[int], None] | None) -> dict[str, Any]:
    """The copy into the empty `target`, from one snapshot of the source: a service writing
    to it meanwhile changes neither the counts expected nor what is copied. (SQLite: every
    read of this thread joins the snapshot's transaction.)"""
    with source.store.snapshot():
        return _copy_state(source, target, progress)


def _copy_state(source: MemoryEngine, target: MemoryEngine,
                progress: Callable[[int], None] | None) -> dict[str, Any]:
    expected = source.counts() | {"superseded": _superseded(source)}
    refused: dict[str, str] = {}  # uid -> the filters' reason
    batch: list[NewMemory] = []

    def refuse(item: NewMemory, reason: str) -> None:
        if item.uid is not None:
            refused[item.uid] = reason
            expected[_refused_as(item)] -= 1

    def flush() -> None:
        # one memory today's checks refuse (a longer limit at the source) is refused alone:
        # `ingest` would refuse its whole batch, and the copy with it
        valid = []
        for item in batch:
            try:
                validate(item, target.settings.max_content_chars)
            except InvalidMemory as exc:
                refuse(item, str(exc))
            else:
                valid.append(item)
        results = target.ingest(valid, batch_is_session=False, prepare=False) if valid else []
        for item, result in zip(valid, results, strict=True):
            if result.status == "rejected":
                refuse(item, result.reason or "refused")
        if progress is not None:
            progress(len(batch))
        batch.clear()

    for memory in source.store.export(include_deleted=True):
        batch.append(_restore(memory))
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    reports: list[dict[str, Any]] = []
    for report in source.store.export_injections():
        reports.append(_cleaned_report(report))
        if len(reports) >= BATCH:
            target.store.restore_injections(reports)
            reports.clear()
    target.store.restore_injections(reports)
    if refused:
        # What a refused memory had replaced has nothing to stay hidden behind: current again
        # now, as maintenance would make it, not hidden until the target's next run.
        with target.store.write() as conn:
            current = target.store.clear_dangling_supersessions(conn)
        expected["superseded"] -= current
        expected["memories"] += current
    revisions = _copy_revisions(source, target, set(refused))
    vectors = _copy_vectors(source, target)
    purged = _copy_purged(source, target)
    target.store.optimize()
    expected["revisions"] = revisions["exported"]
    copied = target.counts() | {"superseded": _superseded(target),
                                "revisions": revisions["copied"]}
    result = {"source": source.store.location, "target": target.store.location,
              "expected": expected, "copied": copied, "verified": copied == expected,
              "vectors": vectors, "purged_texts": purged}
    if refused:
        result["refused"] = {"count": len(refused),
                             "first": [f"{uid}: {why}" for uid, why in list(refused.items())[:20]]}
    if vectors["exported"] and not any(isinstance(c, TransfersVectors)
                                       for c in target.channels):
        result["note"] = (f"{vectors['exported']} vectors were not copied: no channel of the "
                          "target stores them (install the embed extra there and run backfill)")
    elif vectors["copied"] != vectors["exported"]:
        raise MigrationError(f"vectors: {vectors['exported']} exported, "
                             f"{vectors['copied']} stored")
    if purged["copied"] != purged["exported"]:
        raise MigrationError(f"purged texts: {purged['exported']} exported, "
                             f"{purged['copied']} stored")
    if copied != expected:
        raise MigrationError(f"counts differ after the copy: expected {expected}, "
                             f"copied {copied}")
    return result
