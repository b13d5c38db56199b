"""`memory-mcp purge`, by hand: the forgotten memories (`purge_forgotten`), or every copy of a
text (`purge_matching`); what a purge cut short by Ctrl-C had done, and the marker that lets
the next purge finish its VACUUM and WAL cut."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import click

from .cli_io import Interrupted, add_row, print_table, table, to_json
from .config import Settings
from .errors import one_line
from .models import Holdings, folded, project_name
from .pipeline import MemoryEngine
from .stores import StoreError, scheme_of, store_url


def purge_forgotten(engine: MemoryEngine, settings: Settings) -> None:
    """`purge`: every forgotten memory, expired artifacts and telemetry, then the VACUUM and
    the WAL cut, which also finish those an earlier purge cut short left undone."""
    before = engine.counts()
    try:
        with _purging(settings) as run:
            report = engine.purge()
            if run.earlier_cut_short and not report.vacuumed and report.warning is None:
                report.vacuumed, report.warning = _finish_purge(engine)
            run.done = report.warning is None
    except KeyboardInterrupt:
        raise Interrupted(_purge_cut_short(engine, before)) from None
    click.echo(to_json(report.to_dict()))


#: Beside a SQLite db while a purge runs, and after one cut short (Ctrl-C, a kill): what it
#: deleted is gone, but the VACUUM and WAL cut after it (the index merge too) may not have
#: run, and a later purge that deletes nothing would skip them.
UNFINISHED_PURGE = ".purge-unfinished"


@dataclass
class _PurgeRun:
    """A purge under way: its marker (None: no SQLite file, or one that cannot be written),
    whether an earlier purge was cut short, and whether this one got to its end."""

    marker: Path | None
    earlier_cut_short: bool
    done: bool = False


@contextmanager
def _purging(settings: Settings) -> Iterator[_PurgeRun]:
    """The marker of a purge under way (SQLite only: a server's VACUUM is the server's), left
    in place unless the purge got to its end (`done`)."""
    from .backup import sqlite_file

    db = sqlite_file(settings)
    marker = None if db is None else Path(f"{os.path.abspath(db)}{UNFINISHED_PURGE}")
    run = _PurgeRun(marker, marker is not None and marker.exists())
    if marker is not None:
        try:
            marker.touch()
        except OSError:  # a folder not writable: the purge says so itself
            run.marker = None
    yield run
    if run.done and run.marker is not None:
        run.marker.unlink(missing_ok=True)


def _finish_purge(engine: MemoryEngine) -> tuple[bool, str | None]:
    """The index merge, VACUUM and WAL cut an earlier purge cut short did not run: (whether
    the VACUUM ran, why something was skipped)."""
    try:
        engine.store.optimize(vacuum=True)
    except StoreError as exc:
        return False, f"the index merge and VACUUM were skipped: {one_line(exc)}"
    return True, engine.store.flush_journal()


#: What a purge cut short says of the work after its delete.
PURGE_AGAIN = ("the index merge, VACUUM and WAL cut after it did not finish: `memory-mcp purge` "
               "again finishes them")


def _purge_cut_short(engine: MemoryEngine, before: dict[str, int]) -> str:
    """What a purge interrupted had done: its delete is one transaction, committed or not."""
    try:
        after = engine.counts()
    except (StoreError, sqlite3.Error):
        return "the purge may have been committed: `memory-mcp purge` again finishes it"
    # a service may store meanwhile: only what fewer there are now went
    gone = {name: max(before[key] - after[key], 0) for key, name in (
        ("forgotten", "forgotten memories"), ("memories", "expired artifacts"),
        ("injections", "injection reports"))}
    if not any(gone.values()):
        return (f"nothing was purged ({after['forgotten']} forgotten memories wait: "
                "`memory-mcp purge` again)")
    went = [f"{count} {name}" for name, count in gone.items()
            if count or name == "forgotten memories"]
    return f"the purge was committed: {', '.join(went)} are gone for good; {PURGE_AGAIN}"


def purge_matching(engine: MemoryEngine, settings: Settings, text: str, project: str | None,
                   dry_run: bool, yes: bool) -> None:
    """`purge --matching TEXT`: list what holds TEXT, then, confirmed, delete it for good
    from the store and the spool (a replay would store a spooled copy again)."""
    from . import spool as queue

    if not text.strip():
        raise click.UsageError("--matching needs a text that is not blank")
    needle, scope = folded(text), None if project is None else project_name(project.strip())

    def spooled(item: dict[str, Any]) -> bool:
        """Whether a spooled memory holds the text: its content or tags, or, a flushed
        exchange, its question or reply (or both as stored: "User: …\nAssistant: …")."""
        if scope is not None and project_name(str(item.get("project") or "").strip()) != scope:
            return False
        tags, exchange = item.get("tags"), item.get("exchange")
        texts = [item.get("content", ""), *(tags if isinstance(tags, list) else [])]
        if isinstance(exchange, dict):  # as stored, which holds the question and the reply
            texts.append(f"User: {exchange.get('user', '')}\nAssistant: "
                         f"{exchange.get('reply', '')}")
        return any(needle in folded(str(text)) for text in texts)

    found = engine.holding(text, project)
    unsearched = _unsearched_copies(settings)
    if dry_run or not yes:  # a dry run deletes nothing, --yes or not
        waiting = queue.scrub(settings.spool_path, spooled, dry_run=True)
        _show_holdings(found, waiting, text)
        for copy in unsearched:
            click.echo(f"{copy} (the store `restore` replaced) is not searched: delete it if "
                       "it may hold the text", err=True)
        if dry_run or not (found or waiting):
            return
        raise click.UsageError("this deletes them for good (no `unforget`); add --yes to "
                               "confirm")
    scrubbed: int | None = None
    try:
        with _purging(settings) as run:
            # The spool first: a running service replays it every few seconds, and a write
            # it replayed after the store was purged would be there again, with no spooled
            # copy left for the scrub to find.
            scrubbed = queue.scrub(settings.spool_path, spooled)
            report = engine.purge_matching(found, text).to_dict()
            if run.earlier_cut_short and "warning" not in report:
                vacuumed, warning = _finish_purge(engine)
                report.update({"vacuumed": vacuumed} if warning is None else
                              {"vacuumed": vacuumed, "warning": warning})
            run.done = "warning" not in report
    except KeyboardInterrupt:
        raise Interrupted(_matching_cut_short(engine, found, text, project,
                                              scrubbed)) from None
    report["spooled"] = scrubbed
    if unsearched:
        report["not_searched"] = [str(copy) for copy in unsearched]
    click.echo(to_json(report))


def _unsearched_copies(settings: Settings) -> list[Path]:
    """The earlier store `restore` kept beside the db (`memory.db.before-restore`): a copy
    of every memory it held, which `purge --matching` does not open."""
    from .backup import BEFORE_RESTORE

    if scheme_of(store_url(settings)) != "sqlite":
        return []
    db = settings.resolved_db_path
    return [path for path in (db.with_name(db.name + BEFORE_RESTORE),) if path.exists()]


def _matching_cut_short(engine: MemoryEngine, found: Holdings, text: str,
                        project: str | None, scrubbed: int | None) -> str:
    """What a `purge --matching` interrupted had done: the spool's copies are scrubbed first,
    then the store's in one transaction."""
    spool = "no spooled write was changed" if scrubbed is None else \
        f"{scrubbed} spooled memories holding the text were deleted"
    try:
        left = engine.holding(text, project)
    except (StoreError, sqlite3.Error):
        return f"{spool}; the store's delete may have been committed: run the same command again"
    if not found:
        return f"{spool}; nothing in the store held it"
    if left:
        return f"{spool}; nothing in the store was purged: run the same command again"
    return (f"{spool}; {len(found.memories)} memories, {len(found.revisions)} earlier versions "
            f"and {len(found.reports)} injection prompts holding it are gone for good; the "
            "index rewrite and WAL cut after it did not finish: the same command again "
            "finishes them")


def _show_holdings(found: Holdings, spooled: int, text: str) -> None:
    """The memories that hold a text, and a line counting every place it is kept."""
    if found.memories:
        shown = table("uid", "state", "kind", "project", "content")
        for m in found.memories:
            state = "forgotten" if m.deleted else "superseded" if m.superseded_by else "live"
            add_row(shown, m.uid, state, m.kind, m.project or "",
                    m.content[:100].replace("\n", " "))
        print_table(shown)
    places = [f"{len(found.memories)} memories", f"{len(found.revisions)} earlier versions of "
              "other memories", f"{len(found.reports)} injection prompts",
              f"{spooled} spooled memories"]
    click.echo(f"{', '.join(places[:-1])} and {places[-1]} hold {text!r}", err=True)
