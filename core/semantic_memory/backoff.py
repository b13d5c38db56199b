"""The hooks' shared back-off: after one hook meets a dead or hung service, the hooks of the
next MEMORY_HOOK_BACKOFF_S seconds (every session's: they share the service) skip the network
at once, spooling their writes and injecting nothing, instead of each paying its whole budget
for the same silence.

State is one small JSON file beside the db, `{"until": <unix s>, "outcome": …, "detail": …}`,
replaced atomically. The service deletes it when it starts, and a hook that gets an answer
once the back-off has run out deletes it too. Standard library only: hook processes import it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import NamedTuple


class BackOff(NamedTuple):
    until: float  # unix seconds
    outcome: str  # "service down" | "timeout"
    detail: str


def active(path: Path, now: float | None = None) -> BackOff | None:
    """The back-off in force now, or None (no file, expired, or unreadable)."""
    try:
        data = json.loads(path.read_bytes())
        state = BackOff(float(data["until"]), str(data["outcome"]), str(data.get("detail", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if (time.time() if now is None else now) < state.until else None


def start(path: Path, seconds: float, outcome: str, detail: str) -> None:
    """Back off for `seconds` (0 = never); never raises (a hook must still exit on time)."""
    if seconds <= 0:
        return
    data = json.dumps({"until": round(time.time() + seconds, 3), "outcome": outcome,
                       "detail": detail[:300]}, ensure_ascii=False)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(data, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def clear(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
