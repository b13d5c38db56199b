"""Plugin code runs with stdout sent to stderr: stdout carries the answer (a hook's reply to
its harness, `--stdio`'s JSON-RPC, the service's LISTENING line, `--json` data), and a plugin
that prints while it loads must not write into it.

One guard for the whole process, safe across threads: the first to enter swaps `sys.stdout`,
the last to leave puts the real one back. Two threads swapping it by hand could leave it
pointing at stderr for good (one saved the other's swap as "the real stdout"), and every
later answer went to stderr. Code that writes an answer while another thread may be inside
the guard writes to `answer_stream()`.

A hook's watchdog re-enters it from a signal handler, in the thread already inside: the lock
is re-entrant, and the count is raised before the swap and lowered after the restore, so a
handler run between two steps never takes stderr for the real stdout.
"""

from __future__ import annotations

import sys
import threading

TYPE_CHECKING = False  # hooks import this module: not `typing` (tests/test_hook_cpu.py)
if TYPE_CHECKING:
    from types import TracebackType
    from typing import TextIO

_lock = threading.RLock()
_depth = 0
_real: TextIO | None = None


class StdoutToStderr:
    """`with StdoutToStderr():` sends what the block prints to stderr (re-entrant, and
    across threads)."""

    def __enter__(self) -> None:
        global _depth, _real
        with _lock:
            _depth += 1
            if _depth == 1:
                _real, sys.stdout = sys.stdout, sys.stderr

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        global _depth, _real
        with _lock:
            if _depth == 1:
                sys.stdout, _real = _real, None  # type: ignore[assignment]
            _depth -= 1


def stdout_to_stderr() -> StdoutToStderr:
    """The guard (see the module's docstring)."""
    return StdoutToStderr()


def answer_stream() -> TextIO:
    """The real stdout, even while some thread is inside the guard."""
    with _lock:
        return _real if _real is not None else sys.stdout
