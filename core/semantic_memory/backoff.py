"""The hooks' shared back-off: after one hook meets a dead or hung service, the hooks of the
next MEMORY_HOOK_BACKOFF_S seconds (every session's: they share the service) skip the network
at once, spooling their writes and injecting nothing, instead of each paying its whole budget
for the same silence.

State is one small JSON file beside the db, `{"until": <unix s>, "outcome": …, "detail": …,
"url": …}`, replaced atomically. It holds for the service URL that failed only: a shell whose
MEMORY_PLUGIN_URL names a dead service must not silence the hooks of another shell whose
service (same db folder, another URL) answers. The service deletes it when it starts, and a
hook that gets an answer from that URL deletes it too.

The slow mark is its lighter sibling, `hooks.slow.json` in the same folder and the same format
(`"outcome": "slow"`): after a request was sent and timed out while the service still answered
the probe (slow, not hung: a purge, an import's index merge, a locked store), the writes of the
next SLOW_S seconds (every session's and harness's) go straight to the spool, which the
service replays exactly once, instead of each waiting its whole budget for the same slowness;
recalls still try (a recall cannot be spooled). A write the service takes ends it, and so does
the service starting (`clear` without a URL). Standard library only: hook processes import it.
"""

from __future__ import annotations

import os
import time

#: The slow mark's file, beside the back-off's (opencode-plugin/src/backoff.ts SLOW_FILE).
SLOW_FILE = "hooks.slow.json"
#: How long a slow mark holds: long enough that a one-shot agent's next turns (seconds apart)
#: spool their writes at once, short enough that the writes go live again soon after the
#: service does (it replays the spool every few seconds meanwhile). At most the back-off's
#: own length (MEMORY_HOOK_BACKOFF_S; 0 turns both off).
SLOW_S = 20.0

TYPE_CHECKING = False  # typing, pathlib and json cost a hook process more than its own work
if TYPE_CHECKING:
    from pathlib import Path


class BackOff(tuple):  # (until, outcome, detail), a NamedTuple without importing typing
    __slots__ = ()

    def __new__(cls, until: float, outcome: str, detail: str) -> BackOff:
        return tuple.__new__(cls, (until, outcome, detail))

    until = property(lambda self: self[0])  # unix seconds
    outcome = property(lambda self: self[1])  # "service down" | "timeout" | "slow"
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
    from .lite import dumps, replace_private

    data = dumps({"until": round(time.time() + seconds, 3), "outcome": outcome,
                  "detail": detail[:300], "url": url})
    folder, name = os.path.split(os.fspath(path))
    try:
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)  # the data folder: its owner's
        replace_private(path, data.encode("utf-8"),
                        temp=os.path.join(folder, f".{name}.{os.getpid()}.tmp"))
    except OSError:
        pass


def clear(path: str | Path, url: str | None = None) -> None:
    """End the back-off: any, and the slow mark too (the service starting), or only one from
    `url` (a hook that got an answer from there: another URL's service may still be dead)."""
    if url is None:
        _unlink(slow_path(path))
    elif _read(path).get("url", url) != url:
        return
    _unlink(path)


def slow_path(path: str | Path) -> str:
    """The slow mark's file beside the back-off file `path`."""
    return os.path.join(os.path.dirname(os.fspath(path)), SLOW_FILE)


def slow(path: str | Path, url: str, now: float | None = None) -> BackOff | None:
    """The slow mark in force now for the service at `url` (back-off file `path`), or None."""
    return active(slow_path(path), url, now)


def mark_slow(path: str | Path, url: str, seconds: float, detail: str) -> None:
    """Mark the service at `url` slow for `seconds` (0 = never): writes spool at once."""
    start(slow_path(path), url, seconds, "slow", detail)


def clear_slow(path: str | Path, url: str) -> None:
    """End the slow mark of the service at `url` (one of its writes was taken)."""
    clear(slow_path(path), url)


def slow_seconds(backoff_s: float) -> float:
    """How long a slow mark holds under MEMORY_HOOK_BACKOFF_S=`backoff_s`."""
    return min(SLOW_S, backoff_s)


def _unlink(path: str | Path) -> None:
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
