"""Publishing where the HTTP service listens: one stdout line and a discovery file.

The moment the socket is bound and the app has started, the service prints

    MEMORY_MCP_LISTENING {"url": "http://127.0.0.1:41697", "mcp_url": ".../mcp", "port": 41697, "pid": ...}

and writes the same JSON to `<db>.server.json` (`MEMORY_DISCOVERY_FILE` overrides the path,
`off` disables the file). The file is removed on graceful shutdown (SIGINT/SIGTERM); after a
hard kill, `read_discovery` recognises the leftover by its `pid` and reports it as stale: a pid
that is gone, or that the system has since given to another program (`is_service`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..config import Settings
from ..lite import proc_start, read_discovery, replace_private
from ..stdout_guard import answer_stream

LINE_PREFIX = "MEMORY_MCP_LISTENING"
#: Seconds between a service's looks at its discovery file (runner's `_keep_discovery`).
DISCOVERY_CHECK_S = 5.0
# Hooks read the discovery file on every run: reading it imports nothing beyond this module
# (logging and the auth rules are imported where the service side needs them).


def base_url(host: str, port: int) -> str:
    """The URL a local client should use: wildcard binds are reached via loopback."""
    from .auth import WILDCARD_HOSTS

    host = host.strip().strip("[]")
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1" if host != "::" else "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listening_info(settings: Settings, host: str, port: int) -> dict[str, Any]:
    from .. import __version__  # read from the metadata: not at import (hooks read the file)

    url = base_url(host, port)
    return {
        "url": url,
        "mcp_url": f"{url}/mcp",
        "port": port,
        "pid": os.getpid(),
        "host": host,
        "db_path": str(settings.resolved_db_path),
        "version": __version__,
        "auth": bool(settings.token),
        "started_at": time.time(),
        # With `pid`, what names this process and no later one given the same pid.
        "proc_start": proc_start(os.getpid()),
    }


def publish(settings: Settings, info: dict[str, Any]) -> Path | None:
    """Write the discovery file (atomically), then print the LISTENING line, so a client that
    saw the line finds the file too; returns the file's path (None when disabled), written or
    not: one that cannot be written now (its folder not writable yet, a full disk) is logged,
    and the service's look every DISCOVERY_CHECK_S (`reclaim`) writes it once it can."""
    path = settings.discovery_path
    if path is not None:
        _write(path, info)
    stdout = answer_stream()  # not stderr, whichever thread is loading a plugin now
    stdout.write(f"{LINE_PREFIX} {json.dumps(info, separators=(',', ':'))}\n")
    stdout.flush()
    return path


#: Why the last write of a discovery file failed: a failure is logged once until its reason
#: changes (the service tries again every DISCOVERY_CHECK_S), and a write that works again
#: says so.
_failing: dict[Path, str] = {}


def _write(path: Path, info: dict[str, Any]) -> bool:
    """Write `info` to `path` atomically; False (logged) when it cannot, leaving no temporary
    file behind."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data folder
        replace_private(path, (json.dumps(info, indent=2) + "\n").encode("utf-8"),
                        temp=path.with_name(f".{path.name}.{os.getpid()}.tmp"))
    except OSError as exc:  # serving matters more than advertising
        why = exc.strerror or str(exc)
        if _failing.get(path) != why:
            _failing[path] = why
            _log().warning("cannot write the discovery file %s: %s; tried again every %g s",
                           path, why, DISCOVERY_CHECK_S)
        return False
    if _failing.pop(path, None) is not None:
        _log().info("discovery file %s written", path)
    return True


def _log() -> Any:
    import logging

    return logging.getLogger("semantic_memory.service")


def other_owner(settings: Settings, db: Path | None = None) -> dict[str, Any] | None:
    """The live process, not this one, that the discovery file names serving `db` (these
    settings' db file by default; `lite.serves`: a file that names another db, copied with
    its folder or shared through MEMORY_DISCOVERY_FILE, is not this db's), else None."""
    path = settings.discovery_path
    found = read_discovery(path, db or settings.resolved_db_path) if path is not None else None
    if found is None or found["stale"] or found.get("pid") == os.getpid():
        return None
    return found


def upgrade_refusal(settings: Settings, location: str) -> str | None:
    """Why a store at `location` must not upgrade its schema now (one line), else None: the
    discovery file names a live service, not this process, on the same db (its `db_path`
    is ours). A service of this release upgrades the schema as it starts, so one running on
    an older schema is of an older release: upgraded under it, it would go on writing what
    its schema allowed (project "alpha ", kind "Fact" before v9's normalized names), where
    no filter of this release finds them. Only a service on this machine, publishing where
    these settings look, can be seen."""
    found = other_owner(settings)
    if found is None:
        return None
    return (f"{location} is served by a running service (pid {found.get('pid')}) of an older "
            "release: stop it (or restart it with this release), then try again")


def reclaim(path: Path, info: dict[str, Any]) -> bool:
    """Write `info` again when the discovery file is gone or names a process that is gone:
    two services on one db, the newer (which took the file over) stopped and removed it,
    and the hooks would look for this one, still serving, at the default port. True when
    written."""
    found = read_discovery(path)
    if found is not None and not found["stale"]:
        return False
    taken_back = path not in _failing  # else it is the first write that works (logged)
    if not _write(path, info):
        return False
    if taken_back:
        _log().info("discovery file %s written again: the service that had taken it over "
                    "is gone", path)
    return True


def retract(path: Path | None, pid: int | None = None) -> bool:
    """Remove the discovery file if it is ours (same pid); True when removed."""
    if path is None:
        return False
    pid = os.getpid() if pid is None else pid
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("pid") != pid:
        return False  # another instance took the file over; leave it
    try:
        path.unlink()
    except OSError:
        return False
    return True
