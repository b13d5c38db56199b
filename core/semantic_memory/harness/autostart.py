"""MEMORY_PLUGIN_AUTOSTART=1: a session start that finds no service starts one.

The service is spawned detached (its own session, so it outlives the hook and the agent's
process group) on an OS-assigned port (MEMORY_PORT=0) and found again through its discovery
file. The hook waits for it only while its own budget lasts; a service that needs longer is
found by the next hook. A lock file keeps concurrent session starts from spawning twice.
The service's stderr goes to `service.log` beside the db, rotated as a service is spawned
(`rotate_log`): a child's stdout is a file descriptor, which no logging handler can rotate.
A fresh user's first session start may be what makes the data folder: it is made 0700 and the
log 0600 (the log quotes what the service was given), whatever the umask.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from ..config import Settings
from .client import (ServiceClient, ServiceDown, ServiceFailed, ServiceTimeout,
                     ServiceUnavailable, resolve_address)
from .install import entry_point_path
from .urls import split_url

#: A lock younger than this means another hook is starting the service.
LOCK_FRESH_S = 20.0
POLL_S = 0.02
#: A service.log over this many bytes is moved to `service.log.1` (replacing the one before)
#: as a service is spawned: the two stay within about twice this.
LOG_MAX_BYTES = 5_000_000


def ensure_running(service: ServiceClient, settings: Settings) -> ServiceClient:
    """`service` if it answers; else a client for a service started now, or ServiceDown.
    Started too where something else holds the service's address (another program's HTTP
    server, another user's process): the new service listens on a free port, found through
    its discovery file. Not for the service's own refusal (a token) nor a hung service."""
    try:
        service.get("/health")
        return service
    except ServiceFailed as exc:
        if not exc.foreign:
            raise
    except ServiceTimeout:
        raise
    except ServiceUnavailable:  # down, another user's, or not the memory service
        pass
    path = settings.discovery_path
    if path is None and not settings.plugin_url:
        raise ServiceDown("service down; autostart needs the discovery file "
                          "(MEMORY_DISCOVERY_FILE is off)")
    settings.make_data_folder()  # the lock and the log go there
    if _take_lock(_lock_path(settings)):
        spawn(settings)
    while service.remaining() > POLL_S:
        url, origin, store = resolve_address(settings)
        if url != service.url or origin == "MEMORY_PLUGIN_URL":
            candidate = ServiceClient(url, service.deadline, service.token, store=store)
            try:
                candidate.get("/health")
                return candidate
            except ServiceDown:
                pass
        time.sleep(POLL_S)
    raise ServiceDown("service down; started one, not ready within the hook's budget")


def spawn(settings: Settings) -> subprocess.Popen[bytes]:
    """Start `memory-mcp serve` detached, its log beside the db file (in the folder
    `ensure_running` made)."""
    env = dict(os.environ)
    if settings.plugin_url:  # the user named the address: serve there
        parts = split_url(settings.plugin_url)
        env["MEMORY_HOST"], env["MEMORY_PORT"] = parts.host, str(parts.port)
    else:
        env["MEMORY_PORT"] = "0"
    log_path = settings.resolved_db_path.with_name("service.log")
    rotate_log(log_path)
    # 0600 when made here: open(..., "ab") gave the umask's 0644.
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        return subprocess.Popen(
            [entry_point_path(), "serve"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, close_fds=True)
    finally:
        os.close(log)  # the child has its own copy


def rotate_log(path: Path) -> None:
    """Move `path` to `<path>.1` when it is over LOG_MAX_BYTES, so every autostart does not
    append to one file forever. Only the spawning hook (it holds the lock) rotates; a service
    still writing to the old file goes on writing to `.1`."""
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_name(f"{path.name}.1"))
    except OSError:  # none yet, or it cannot be moved: appended to as before
        pass


def _lock_path(settings: Settings) -> Path:
    return settings.resolved_db_path.with_name("autostart.lock")


def _take_lock(path: Path) -> bool:
    """True when this hook may spawn (no other spawned within LOCK_FRESH_S)."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime < LOCK_FRESH_S:
                    return False
                path.unlink()
            except FileNotFoundError:
                pass
            continue
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return True
    return False
