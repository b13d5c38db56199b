"""The CLI's standard streams and current folder, as an odd environment leaves them: a stream
closed (`<&-`, `>&-`), a reader that stops early (`| head -1`), a folder deleted under the
shell, a narrow terminal. Each is one line and an exit code, never a traceback (docs/cli.md).
Also what every command prints through: tables that fit the terminal, and JSON safe to print.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


class Interrupted(Exception):
    """Ctrl-C in a command, with the line saying what was and was not done. Not a
    KeyboardInterrupt, which click answers with "Aborted!" and exit code 1: `TextGroup.main`
    prints the line and exits INTERRUPTED_EXIT, as a shell reports a program SIGINT ended."""


INTERRUPTED_EXIT = 130


def say(line: str) -> None:
    """One line on standard error, or nowhere when it is closed (`2>&-`): never on standard
    output, where a script's JSON goes (click fell back to it)."""
    if sys.stderr is None or not _open(2):
        return
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


@contextmanager
def interrupt_deferred() -> Iterator[None]:
    """Ctrl-C held off until the block ends, then raised where it would have been: for work
    that must be done and told whole (an import batch committed and counted, a restore's
    renames). Outside the main thread, where no handler can be set, the block runs as is."""
    caught: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and callable(previous):
        previous(signal.SIGINT, None)
    elif caught and previous == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


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
#: Below this many terminal columns, or when the widest of the other columns (a memory's
#: content) would get fewer than CONTENT_ROOM of them, a table is printed as when piped: one
#: row per line, every value whole (a terminal wraps the line), rather than a column a word
#: or two wide. (`list` at 80 columns gave its content 8.)
NARROW_COLUMNS = 60
CONTENT_ROOM = 30


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
    whole, others = 0, []
    for column in renderable.columns:
        longest = max((len(cell.plain) for cell in column._cells), default=0)
        if column.header in WHOLE_COLUMNS:
            column.min_width = longest or None
            whole += max(longest, len(column.header))
        else:
            others.append(max(longest, len(column.header)))
    room = out.width - whole - 2 * len(renderable.columns)  # a space each side of a column
    if out.is_terminal and (out.width < NARROW_COLUMNS or _squeezed(others, room)):
        out = console(PIPED_WIDTH)
    out.print(renderable)


def _squeezed(widths: list[int], room: int) -> bool:
    """Whether the widest of these columns gets fewer than CONTENT_ROOM of `room` (or of its
    own width, when narrower), rich cutting the widest columns first as it does."""
    if not widths:
        return room < 0
    widest, left = max(widths), room
    for count, width in enumerate(sorted(widths)):
        share = left // (len(widths) - count)
        if width > share:  # this and every wider column get `share`
            return share < min(CONTENT_ROOM, widest)
        left -= width
    return False


#: C1 controls: JSON leaves them raw (it escapes only C0), and U+009B is a terminal's CSI.
_C1 = re.compile("[\x80-\x9f]")


def to_json(data: Any) -> str:
    """One line of JSON, safe to print: a memory stored before ingest stripped terminal
    controls may still hold C1 ones, written here as \\u escapes."""
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(data, ensure_ascii=False))
