"""One schema step both stores run: names stored before they were normalized on the way in.

Releases before schema 9 (SQLite) / 6 (PostgreSQL) stored a project, kind or source as given, so
a store may hold "web " or "Decision". Every filter now normalizes what it is asked for
(`models.project_name`, `models.identifier`), so such rows were out of reach of any filter and
of the supersession rule. This step rewrites them as ingest would have; a memory that then says
word for word what a live one of its project says is the duplicate ingest would have refused,
and is forgotten (soft-deleted) in favour of the older one, as the PostgreSQL store's unique
index on live (content hash, project) requires.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..models import identifier, project_name
from .base import chunks, marks

#: Runs one statement written with `?` parameters in the store's transaction (a cursor back).
Execute = Callable[[str, Sequence[Any]], Any]


#: The tables holding projects and kinds (earlier versions of edited memories keep no source).
TABLES = ("memories", "memory_revisions")


#: The column of each table that says when a row was last written.
WRITTEN = {"memories": "updated_at", "memory_revisions": "replaced_at"}


def normalize_stored_names(execute: Execute, since: float | None = None) -> bool:
    """Rewrite every stored project, kind and source as ingest now writes it; with `since`,
    every one that a row written since then holds (the service's maintenance: a process of an
    older release, left running across the upgrade, writes names as it did). Returns whether
    anything was rewritten."""
    projects = _renamed(execute, "project", TABLES, lambda p: project_name(p) or None, since)
    _forget_new_twins(execute, projects)
    _rename(execute, "project", TABLES, projects)
    kinds = _renamed(execute, "kind", TABLES, identifier, since)
    _rename(execute, "kind", TABLES, kinds)
    sources = _renamed(execute, "source", TABLES[:1], identifier, since)
    _rename(execute, "source", TABLES[:1], sources)
    return bool(projects or kinds or sources)


def stale_names(execute: Execute, since: float) -> bool:
    """Whether a row written since `since` holds a name `normalize_stored_names` would rewrite:
    reads only, so that a store with none is looked at without its write lock."""
    return any(_renamed(execute, column, tables, normalize, since) for column, tables, normalize
               in (("project", TABLES, lambda p: project_name(p) or None),
                   ("kind", TABLES, identifier), ("source", TABLES[:1], identifier)))


def _rename(execute: Execute, column: str, tables: tuple[str, ...],
            renamed: dict[str, str | None]) -> None:
    for old, new in renamed.items():
        for table in tables:
            execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (new, old))


def _renamed(execute: Execute, column: str, tables: tuple[str, ...],
             normalize: Callable[[str], str | None], since: float | None
             ) -> dict[str, str | None]:
    """Stored values of `column` in `tables` (in rows written since `since`) that normalize to
    something else."""
    if since is None:
        values = {row[0] for table in tables for row in execute(
            f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL", ()).fetchall()}
    else:  # the column as an expression: SQLite walks the range of the time's index, not
        # the whole of the column's (1.6 s at 1M memories, for none written in the hour)
        values = {row[0] for table in tables for row in execute(
            f"SELECT DISTINCT coalesce({column}, '') FROM {table} "
            f"WHERE {WRITTEN[table]} >= ?", (since,)).fetchall()} - {""}
    return {v: new for v in values if (new := normalize(v)) != v}


def _forget_new_twins(execute: Execute, projects: dict[str, str | None]) -> None:
    """Forget each live memory of a renamed project whose text an older live memory of the
    project it joins already holds; what the forgotten one replaced points at the kept one."""
    if not projects:
        return
    # the texts of the live rows about to move, then every live row holding one of them
    hashes = sorted({row[0] for part in chunks(list(projects)) for row in execute(
        f"SELECT content_hash FROM memories WHERE deleted = 0 AND project IN ({marks(part)})",
        part).fetchall()})
    live = [row for part in chunks(hashes) for row in execute(
        "SELECT id, uid, content_hash, project FROM memories WHERE deleted = 0 "
        f"AND content_hash IN ({marks(part)})", part).fetchall()]
    kept: dict[tuple[str, str | None], str] = {}
    now = time.time()
    for id_, uid, digest, project in sorted(live):
        place = (digest, projects.get(project, project))
        if place not in kept:
            kept[place] = uid
            continue
        execute("UPDATE memories SET deleted = 1, updated_at = ? WHERE id = ?", (now, id_))
        execute("UPDATE memories SET superseded_by = ? WHERE superseded_by = ?",
                (kept[place], uid))
