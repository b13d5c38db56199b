"""The CLI's standard streams and current folder, as an odd environment leaves them: a stream
closed (`<&-`, `>&-`), a reader that stops early (`| head -1`), a folder deleted under the
shell, a narrow terminal. Each is one line and an exit code, never a traceback (docs/cli.md).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import click

from .harness.project import working_folder
from .safety.terminal import shown_on_terminal
from .service.stdio import FOLDER_GONE


class FolderGone(click.ClickException):
    """The current folder was deleted under the shell: exit code 2, as for a setting."""

    exit_code = 2

    def __init__(self) -> None:
        super().__init__(FOLDER_GONE)


class ReaderGone(Exception):
    """Standard output's reader went away (`| head -1`). Not an OSError: click would answer
    one with exit code 1; `cli.main` ends quietly instead (`reader_gone`)."""


def here() -> Path:
    """The current folder; FolderGone once it was deleted."""
    folder = working_folder()
    if folder is None:
        raise FolderGone()
    return Path(folder)


def stdin_bytes() -> BinaryIO:
    """Standard input, binary; one line (exit code 1) when it is closed (`<&-`)."""
    if sys.stdin is None or not _open(0):
        raise click.ClickException("standard input is closed: nothing to read")
    return sys.stdin.buffer


def stdout_text() -> TextIO:
    """Standard output; one line (exit code 1) when it is closed (`>&-`)."""
    if sys.stdout is None or not _open(1):
        raise click.ClickException("standard output is closed: write to a file with -o FILE")
    return sys.stdout


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def reader_gone() -> None:
    """What every command does once its reader stopped reading (`| head -1`): nothing more.
    Standard output goes to /dev/null, so the interpreter's flush at exit fails no more."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def flush_stdout() -> None:
    """Flush standard output now, so a reader gone is noticed here and not at exit (where
    Python prints `Exception ignored … BrokenPipeError` and exits 120)."""
    if sys.stdout is not None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            reader_gone()
        except (OSError, ValueError):  # closed: nothing was written to lose
            pass


#: The columns shown whole, never cut or wrapped: a uid is copied into `forget` or `update`,
#: a time read whole, a score compared.
WHOLE_COLUMNS = frozenset({"uid", "updated", "forgotten", "purged after", "score"})
#: Below this many terminal columns, or when the whole columns leave the others less than
#: SQUEEZE_ROOM between them, a table is printed as when piped: one row per line, every value
#: whole (a terminal wraps the line), rather than columns of "…".
NARROW_COLUMNS = 60
SQUEEZE_ROOM = 24


# rich is imported where it is used: it would add ~50 ms to every start, the service's too.
def table(*columns: str) -> Any:
    """A borderless table; a narrow terminal wraps every column but the WHOLE_COLUMNS (a word
    too long for its column is folded, never cut to "…")."""
    from rich.table import Column, Table

    return Table(*(Column(name, no_wrap=True) if name in WHOLE_COLUMNS else
                   Column(name, overflow="fold") for name in columns), box=None)


def add_row(table: Any, *cells: str) -> None:
    """A row of stored, untrusted text: shown as written, never read as rich markup (`[/i]`
    in a memory raised MarkupError) nor sent to the terminal as control sequences."""
    from rich.text import Text

    table.add_row(*(Text(shown_on_terminal(cell)) for cell in cells))


#: The width of stdout when it is no terminal: wider than any row (rich's default there is
#: 80 columns, which cut values such as `2026-12-06T21…` for a script or `grep` to read).
PIPED_WIDTH = 100_000


def console(width: int | None = None) -> Any:
    """A console on stdout: as wide as the terminal (or `width`), or, piped or redirected,
    wide enough that no value is cut or wrapped (a table is as wide as its longest values, no
    wider). A reader gone raises BrokenPipeError, which `cli.main` answers as for every
    command (rich's own answer is exit code 1)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError()

    terminal = _Console(width=width)
    return terminal if terminal.is_terminal else _Console(width=PIPED_WIDTH)


def print_table(renderable: Any) -> None:
    """Print a table made by `table`: its WHOLE_COLUMNS as wide as their longest value, the
    others squeezed into what is left; on a terminal too narrow for that, one row per line
    as when piped."""
    out = console()
    columns = getattr(renderable, "columns", [])
    whole = 0
    for column in columns:
        if column.header in WHOLE_COLUMNS:
            column.min_width = max((len(cell.plain) for cell in column._cells),
                                   default=0) or None
            whole += max(column.min_width or 0, len(column.header))
    needed = whole + 2 * len(columns) + (SQUEEZE_ROOM if len(columns) > 1 else 0)
    if out.is_terminal and out.width < max(NARROW_COLUMNS, needed):
        out = console(PIPED_WIDTH)
    out.print(renderable)
