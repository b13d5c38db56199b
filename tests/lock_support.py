"""Helpers for the tests where another process holds the SQLite store's write lock (a CLI
import, a purge, a VACUUM; here a python sqlite3 `BEGIN IMMEDIATE` on the db file), as users
meet it. Their checks assert no seconds: an answer came while the lock was still held (the
holder process still running), or what was stored once it was released.
"""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from test_service_support import memory_mcp_command, service_env

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.app import create_app
from semantic_memory.service.protocol import guarded_protocol
from semantic_memory.service.runner import bind_socket

#: The default install's channels (the vector plugin, installed in this workspace, is added
#: where a test asks for it).
PLUGINS = "bm25_porter,bm25_trigram,bigram"
#: The longest the holder keeps the lock: a process that waits for it goes on only after this,
#: and the check that the lock was still held fails (rather than the test hanging).
HOLD_MAX_S = 20.0

HOLDER = """
import select, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[2]))  # until the test closes stdin
conn.execute("COMMIT")
"""


@contextmanager
def write_lock_held(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the write lock of `db` until the block ends (or HOLD_MAX_S)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(HOLD_MAX_S)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "held"
    try:
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(30)


def held(holder: subprocess.Popen[str]) -> bool:
    return holder.poll() is None


def seed(db: Path, contents: list[str], forget: int = 0, plugins: str = PLUGINS) -> None:
    """A store holding `contents`, the first `forget` of them forgotten; closed."""
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=plugins,
                                   maintenance_on_start=False))
    try:
        results = engine.ingest([NewMemory(content=c) for c in contents])
        for result in results[:forget]:
            assert engine.forget(result.uid)
    finally:
        engine.close()


def cli(tmp: Path, *args: str, plugins: str = PLUGINS,
        as_anyone: bool = False) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS`; `as_anyone`: without root's capabilities, so file modes bind it (a
    0444 file is read-only to it) as they bind any user."""
    env = service_env(tmp, MEMORY_PLUGINS=plugins)
    return subprocess.run([*memory_mcp_command(), *args], env=env, text=True,
                          capture_output=True, timeout=120,
                          preexec_fn=_without_capabilities if as_anyone else None)


#: prctl(2) option removing one capability from the calling process's bounding set.
PR_CAPBSET_DROP = 24


def _without_capabilities() -> None:
    """In the child before exec: an empty bounding set, so a root process execs with no
    capabilities (CAP_DAC_OVERRIDE included) and a file's mode holds for it. Any other user
    has none to lose."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):  # past the kernel's last capability: EINVAL
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")


@contextmanager
def serving(engine: MemoryEngine, graceful_s: float = 3.0,
            app: Any = None) -> Iterator[tuple[str, uvicorn.Server]]:
    """The service's app (or `app`) under a real uvicorn on a random port, in this process."""
    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn.Config(app or create_app(engine), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=graceful_s,
                            http=guarded_protocol(engine.settings))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(3000):
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", server
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
