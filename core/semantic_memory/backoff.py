"""The hooks' shared back-off: after one hook meets a dead or hung service, the hooks of the
next MEMORY_HOOK_BACKOFF_S seconds (every session's: they share the service) skip the network
at once, spooling their writes and injecting nothing, instead of each paying its whole budget
for the same silence.

State is one small JSON file beside the db, `{"until": <unix s>, "outcome": …, "detail": …,
"url": …}`, replaced atomically. It holds for the service URL that failed only: a shell whose
MEMORY_PLUGIN_URL names a dead service must not silence the hooks of another shell whose
service (same db folder, another URL) answers. The service deletes it when it starts, and a
hook that gets an answer from that URL deletes it too. Standard library only: hook processes
import it.
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


def active(path: str | Path, url: str, now: float | None = None) -> BackOff | None:
    """The back-off in force now for the service at `url`, or None (no file, expired,
    unreadable, or another URL's). A file without a URL (an older release's) holds for all."""
    data = _read(path)
    try:
        state = BackOff(float(data["until"]), str(data["outcome"]), str(data.get("detail", "")))
    except (ValueError, KeyError, TypeError):
        return None
    if data.get("url", url) != url:
        return None
    return state if (time.time() if now is None else now) < state.until else None


def start(path: str | Path, url: str, seconds: float, outcome: str, detail: str) -> None:
    """Back off from the service at `url` for `seconds` (0 = never); never raises (a hook
    must still exit on time)."""
    if seconds <= 0:
        return
    from .lite import dumps

    data = dumps({"until": round(time.time() + seconds, 3), "outcome": outcome,
                  "detail": detail[:300], "url": url})
    folder, name = os.path.split(os.fspath(path))
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    try:
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)  # the data folder: its owner's
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def clear(path: str | Path, url: str | None = None) -> None:
    """End the back-off: any (the service starting), or only one from `url` (a hook that got
    an answer from there: another URL's service may still be dead)."""
    if url is not None and _read(path).get("url", url) != url:
        return
    try:
        os.unlink(path)
    except OSError:
        pass


def _read(path: str | Path) -> dict:
    """The state file's object; {} when there is none or it is not one."""
    from .lite import try_loads

    try:
        with open(path, "rb") as handle:
            data = try_loads(handle.read())
    except OSError:
        return {}
    return data if isinstance(data, dict) else {}
