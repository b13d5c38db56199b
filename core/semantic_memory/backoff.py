"""The hooks' shared back-off: after one hook meets a dead or hung service, the hooks of the
next MEMORY_HOOK_BACKOFF_S seconds (every session's: they share the service) skip the network
at once, spooling their writes and injecting nothing, instead of each paying its whole budget
for the same silence.

State is one small JSON file beside the db, `{"until": <unix s>, "outcome": …, "detail": …}`,
replaced atomically. The service deletes it when it starts, and a hook that gets an answer
once the back-off has run out deletes it too. Standard library only: hook processes import it.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # typing, pathlib and json cost a hook process more than its own work
if TYPE_CHECKING:
    from pathlib import Path


class BackOff(tuple):  # (until, outcome, detail), a NamedTuple without importing typing
    __slots__ = ()

    def __new__(cls, until: float, outcome: str, detail: str) -> BackOff:
        return tuple.__new__(cls, (until, outcome, detail))

    until = property(lambda self: self[0])  # unix seconds
    outcome = property(lambda self: self[1])  # "service down" | "timeout"
    detail = property(lambda self: self[2])


def active(path: str | Path, now: float | None = None) -> BackOff | None:
    """The back-off in force now, or None (no file, expired, or unreadable)."""
    from .lite import try_loads

    try:
        with open(path, "rb") as handle:
            data = try_loads(handle.read())
        state = BackOff(float(data["until"]), str(data["outcome"]), str(data.get("detail", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if (time.time() if now is None else now) < state.until else None


def start(path: str | Path, seconds: float, outcome: str, detail: str) -> None:
    """Back off for `seconds` (0 = never); never raises (a hook must still exit on time)."""
    if seconds <= 0:
        return
    from .lite import dumps

    data = dumps({"until": round(time.time() + seconds, 3), "outcome": outcome,
                  "detail": detail[:300]})
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def clear(path: str | Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
