"""A service of an older release still running after the package is upgraded: no command of
this release upgrades the schema under it (it would go on writing names v9 normalizes, which
no filter then finds), on SQLite and on PostgreSQL; once it is gone, the upgrade goes on.

The older store is made with SQL (old_schemas: schema 8 on SQLite, 5 on PostgreSQL), holding
what an older service wrote ("alpha ", "Fact"). The older service is a real live process that
owns the db's discovery file, written as service/discovery.py writes it (its own pid, the
db_path), and serves nothing: the refusal reads that file alone.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pg
import psycopg
from old_schemas import as_written_before_v9
from test_service_support import memory_mcp_command, service_env

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores.sqlite import SCHEMA_VERSION

REFUSED = "of an older release: stop it (or restart it with this release), then try again"
CONTENT = "Grafana runs on port 3000"

#: The older service: publishes `<db>.server.json` as service/discovery.py does (the keys of
#: `listening_info`, written atomically), on a port it holds but serves nothing on, then waits.
OLDER_SERVICE = r"""
import json, os, socket, sys, time
db, path = sys.argv[1], sys.argv[2]
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
port = sock.getsockname()[1]
url = f"http://127.0.0.1:{port}"
info = {"url": url, "mcp_url": f"{url}/mcp", "port": port, "pid": os.getpid(),
        "host": "127.0.0.1", "db_path": db, "version": "0.1.0", "auth": False,
        "started_at": time.time()}
tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
with open(tmp, "w", encoding="utf-8") as f:
    f.write(json.dumps(info, indent=2) + "\n")
os.replace(tmp, path)
print("listening", flush=True)
time.sleep(600)
"""


@contextmanager
def older_service(db: Path) -> Iterator[subprocess.Popen[str]]:
    """A live process that owns `<db>.server.json` for `db`; killed on the way out if the test
    has not killed it (SIGKILL: the file stays behind, stale)."""
    proc = subprocess.Popen([sys.executable, "-c", OLDER_SERVICE, str(db), f"{db}.server.json"],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def older_store(settings: Settings) -> None:
    """The store as the older service left it: a memory it filed under project "alpha "
    with kind "Fact", names its schema allowed and v9 normalizes."""
    engine = MemoryEngine(settings)
    uid = engine.store_one(NewMemory(CONTENT, project="alpha")).uid
    engine.close()
    as_written_before_v9(settings, [
        ("UPDATE memories SET project = ?, kind = ? WHERE uid = ?", ("alpha ", "Fact", uid))])


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def sqlite_version(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def pg_version(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT value FROM store_meta "
                                "WHERE key = 'schema_version'").fetchone()[0])


def pg_names(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT project, kind FROM memories").fetchall()


def assert_refused(done: subprocess.CompletedProcess[str], pid: int) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"served by a running service (pid {pid}) {REFUSED}" in lines[0], \
        done.stderr


def assert_no_command_upgrades(env: dict[str, str], pid: int) -> None:
    """`stats`, `list` and a new `serve` (port 0) of this release are refused, one line."""
    for args in (["stats"], ["list", "--project", "alpha"], ["serve"]):
        assert_refused(cli(env, *args), pid)


def assert_upgraded_and_found(env: dict[str, str]) -> None:
    """The upgrade ran: what the older service wrote is normalized, and the filters find it."""
    listed = cli(env, "list", "--project", "alpha", "--kind", "fact", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(m["content"], m["project"], m["kind"]) for m in json.loads(listed.stdout)] == [
        (CONTENT, "alpha", "fact")]


def test_no_command_of_this_release_upgrades_a_sqlite_db_an_older_service_serves(
        tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    older_store(Settings(db_path=str(db), device="cpu"))
    # another db at v8, whose settings share the discovery file: not the old service's db
    other = tmp_path / "other.db"
    older_store(Settings(db_path=str(other), device="cpu"))
    written = db.read_bytes()
    env = service_env(tmp_path)
    with older_service(db) as service:
        assert_no_command_upgrades(env, service.pid)
        assert sqlite_version(db) == 8 and db.read_bytes() == written
        shared = cli({**env, "MEMORY_DB_PATH": str(other),
                      "MEMORY_DISCOVERY_FILE": f"{db}.server.json"}, "stats")
        assert shared.returncode == 0, shared.stderr
        assert sqlite_version(other) == SCHEMA_VERSION
        service.kill()
        service.wait()
    assert Path(f"{db}.server.json").exists()  # left behind, naming a process that is gone
    assert_upgraded_and_found(env)
    assert sqlite_version(db) == SCHEMA_VERSION


def test_no_command_of_this_release_upgrades_a_postgres_db_an_older_local_service_serves(
        tmp_path: Path) -> None:
    db, url = tmp_path / "memory.db", pg.new_database()  # db: where the discovery file lies
    older_store(Settings(db_path=str(db), db_url=url, device="cpu"))
    env = service_env(tmp_path, MEMORY_DB_URL=url)
    with older_service(db) as service:
        assert_no_command_upgrades(env, service.pid)
        assert pg_version(url) == 5 and pg_names(url) == [("alpha ", "Fact")]
        service.kill()
        service.wait()
    assert Path(f"{db}.server.json").exists()
    assert_upgraded_and_found(env)
    assert pg_version(url) > 5
