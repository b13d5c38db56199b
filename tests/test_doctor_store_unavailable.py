"""`memory-mcp doctor` on a service that is up while its store cannot answer. Before, a
PostgreSQL server stopped gave "NOT REACHABLE — error: HTTP 503: … is unavailable" and "start
it with `memory-mcp`", and a table locked gave "NOT REACHABLE — timeout" with "find it …, end
it, then start `memory-mcp`": advice that turns a passing outage into a lasting one, as a
service started while the database is down exits. Now any answer of the service's own (a 503
with the store's line, or `HEAD /` answered while /health waits on the store) is "up, but its
store is unavailable", which recovers by itself, and a damaged SQLite file is "up, but
FAILING" with the line saying what to run. Real PostgreSQL servers (tests/pg.py), real
services, real CLI subprocesses."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pg
import psycopg
import pytest
from harness_support import hook_env
from test_service_support import Service, memory_mcp_command, start_service

UP_BUT_UNAVAILABLE = "up, but its store is unavailable: "
RECOVERS = "it recovers by itself once its store answers again"
#: What doctor says of a service that is down, hung or another program: never of one that is up.
DOWN_ADVICE = ("NOT REACHABLE", "start it with", "end it", "ss -ltnp", "a hung service")


def doctor(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp doctor` against the service at `url`, with no harness configs."""
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    env = hook_env(tmp_path, url, CODEX_HOME=str(tmp_path / "codex"),
                   KIMI_CODE_HOME=str(tmp_path / "kimi"), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
                   CLAUDE_CONFIG_DIR="")
    done = subprocess.run([*memory_mcp_command(), "doctor", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def service_lines(done: subprocess.CompletedProcess[str]) -> str:
    """The service's line and its advice (the lines before the hook log's)."""
    return done.stdout.split("hook log")[0]


def assert_up_not_down(said: str) -> None:
    assert not any(advice in said for advice in DOWN_ADVICE), said


@contextmanager
def pg_service(tmp_path: Path) -> Iterator[tuple[pg.ExtraServer, Service]]:
    """A service on a PostgreSQL server of the test's own (which it may stop), one memory in."""
    server = pg.ExtraServer()
    service = start_service(tmp_path / "svc", "serve", MEMORY_DB_URL=server.url,
                            MEMORY_MAINTENANCE_ON_START="0")
    try:
        with service.client() as http:
            http.post("/ingest", json={"content": "the deploy pipeline runs at noon",
                                       "project": "team"}).raise_for_status()
        yield server, service
    finally:
        service.stop()
        server.stop()


def test_a_database_server_down_is_a_store_unavailable_not_a_service_to_start(
        tmp_path: Path) -> None:
    with pg_service(tmp_path) as (server, service):
        server.stop()
        with service.client() as http:
            health = http.get("/health")
        # The liveness part beside the store's line: the service is up, its store is not.
        assert health.status_code == 503, health.text
        body = health.json()
        assert "is unavailable" in body["error"] and "change-me" not in body["error"]
        assert body["ok"] is False and body["version"] and body["auth"] is False

        done = doctor(tmp_path, service.url)
        said = service_lines(done)
        assert done.returncode == 1
        assert f"{UP_BUT_UNAVAILABLE}{body['error']}\n" in said, said
        assert RECOVERS in said and "nothing to end or restart" in said
        assert_up_not_down(said)
        report = json.loads(doctor(tmp_path, service.url, "--json").stdout)["service"]
        assert report["state"] == "store unavailable" and report["status"] == 503
        assert report["error"] == body["error"] and report["reachable"] is False

        server.start()  # the same service, not restarted, answers again
        done = doctor(tmp_path, service.url)
        assert done.returncode == 0 and "up, version" in done.stdout, done.stdout


@contextmanager
def table_locked(server: pg.ExtraServer) -> Iterator[None]:
    """The memories table locked by another session (a migration, a long admin job)."""
    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with psycopg.connect(server.url) as conn:
            conn.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(60)

    holder = threading.Thread(target=hold_lock, daemon=True)
    holder.start()
    try:
        assert locked.wait(30)
        yield
    finally:
        release.set()
        holder.join(30)


@contextmanager
def server_paused(server: pg.ExtraServer) -> Iterator[None]:
    """The server's processes stopped: its sockets open, nothing answers (a partition)."""
    server.pause()
    try:
        yield
    finally:
        server.resume()


@pytest.mark.parametrize("slow", [table_locked, server_paused], ids=["locked", "paused"])
def test_a_store_that_does_not_answer_is_unavailable_not_a_hung_service(
        tmp_path: Path, slow: Callable[[pg.ExtraServer], AbstractContextManager[None]]) -> None:
    """/health waits on the store (5 s at PostgreSQL's deadline) past doctor's 2 s; `HEAD /`,
    which waits on no store, answers at once: the service is up."""
    with pg_service(tmp_path) as (server, service):
        with slow(server):
            done = doctor(tmp_path, service.url)
            report = json.loads(doctor(tmp_path, service.url, "--json").stdout)["service"]
        said = service_lines(done)
        assert done.returncode == 1
        assert (f"{UP_BUT_UNAVAILABLE}/health got no answer within 2 s while the service "
                "answers `HEAD /` at once") in said, said
        assert RECOVERS in said
        assert_up_not_down(said)
        assert report["state"] == "store unavailable" and "status" not in report


def test_a_damaged_sqlite_file_is_failing_and_says_what_to_run(tmp_path: Path) -> None:
    """The counts /health reads meet the damage: a 500 with the CLI's one line (what to run,
    the service stopped for `restore`), the liveness part beside it; doctor says the service
    is up and failing, neither "start it" nor "recovers by itself"."""
    db = tmp_path / "memory.db"
    lines = "\n".join(json.dumps({"content": f"note {i}: the build cache lives in /var/c{i}"})
                      for i in range(3000))
    (tmp_path / "notes.jsonl").write_text(lines, encoding="utf-8")
    imported = subprocess.run([*memory_mcp_command(), "--db", str(db), "import",
                               str(tmp_path / "notes.jsonl")], capture_output=True, text=True,
                              timeout=120)
    assert imported.returncode == 0, imported.stderr
    with sqlite3.connect(db) as conn:  # the index `SELECT count(*) FROM memories` reads
        assert "memories_updated" in str(conn.execute(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM memories").fetchall())
        pages = [n for (n,) in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'memories_updated' AND pagetype = 'leaf'")]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(db.read_bytes())
    for page in pages:
        start = (page - 1) * size
        data[start:start + size] = b"\xa5" * size
    db.write_bytes(bytes(data))
    service = start_service(tmp_path / "svc", MEMORY_DB_PATH=str(db),
                            MEMORY_MAINTENANCE_ON_START="0")
    try:
        with service.client() as http:
            health = http.get("/health")
        done = doctor(tmp_path / "cli", service.url)
    finally:
        service.stop()
    assert health.status_code == 500, health.text
    body = health.json()
    assert body["error"].startswith("the store cannot be read (")
    assert "memory-mcp restore" in body["error"] and body["ok"] is False and body["version"]
    said = service_lines(done)
    assert done.returncode == 1
    assert f"up, but FAILING: {body['error']}\n" in said, said
    assert RECOVERS not in said
    assert_up_not_down(said)
    log = service.stderr()
    assert "Traceback" not in log and "GET /health: the store cannot be read" in log, log


def test_a_request_the_service_refuses_is_said_as_such_not_as_a_service_down() -> None:
    """A 4xx of the service's own (a Host it does not allow: 421) is its answer too."""
    from semantic_memory.harness import doctor as doc
    from semantic_memory.harness.client import ServiceFailed

    refused = ServiceFailed(421, "Host 'memory.lan:8765' is not allowed (DNS-rebinding "
                                 "protection); add it to MEMORY_ALLOWED_HOSTS")
    url = "http://memory.lan:8765"
    assert doc.unreachable_state(refused, url) == "refused"
    service = {"url": url, "from": "MEMORY_PLUGIN_URL", "reachable": False, "state": "refused",
               "status": 421, "error": str(refused).removeprefix("HTTP 421: ")}
    said = doc.render({"service": service, "hook_log": "hooks.jsonl", "harnesses": [],
                       "spool": {"path": "spool", "pending": 0, "rejected": 0,
                                 "blocked": None, "backoff": None},
                       "repository": {"summary": "none", "project": None}})
    assert (f"{url} (MEMORY_PLUGIN_URL): up, but it REFUSES doctor's request: Host "
            "'memory.lan:8765' is not allowed") in said, said
    assert_up_not_down(said)
