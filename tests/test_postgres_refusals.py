"""A PostgreSQL store whose database refuses or fails to answer, on a real server (tests/pg.py)
and through the real `memory-mcp` (CLI and service): a revoked privilege is the store's one
line naming the GRANT to ask for (CLI `Error:`, REST 503, the MCP tool's error), a recall whose
channels meet the store's outage is that one line, connecting to a hung server waits
MEMORY_DB_TIMEOUT, and the pool's reconnect warnings stay out of a command's stderr and take at
most one line per outage in a service's log."""

from __future__ import annotations

import json
import logging
import subprocess
import time
import uuid
from pathlib import Path

import anyio
import pg
import pytest
import semantic_memory_postgres.store as store_module
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError
from test_service_support import http_session, memory_mcp_command, service_env, start_service

PASSWORD = "change-me-7Qx"


def team_database() -> tuple[str, str, str]:
    """A database set up as docs/postgres.md's admin SQL sets one up, with a role of its own
    (roles are the server's, shared by every test on it): (the admin's URL of the database,
    the role's URL, the role)."""
    import psycopg

    admin = pg.server_url()
    suffix = uuid.uuid4().hex[:8]
    name, role = f"team_{suffix}", f"memory_{suffix}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    db = admin.replace("/postgres?", f"/{name}?")
    with psycopg.connect(db, autocommit=True) as conn:
        for statement in ("CREATE EXTENSION IF NOT EXISTS vector",
                          "CREATE EXTENSION IF NOT EXISTS pg_trgm",
                          f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'",
                          f"REVOKE ALL ON DATABASE {name} FROM PUBLIC",
                          f"GRANT CONNECT ON DATABASE {name} TO {role}",
                          f"CREATE SCHEMA {role} AUTHORIZATION {role}",
                          f"ALTER ROLE {role} SET search_path = {role}, public"):
            conn.execute(statement)
    return db, db.replace("postgres:@", f"{role}:{PASSWORD}@"), role


def admin_runs(db: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(sql)


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                          timeout=120, env=service_env(tmp_path, **env))


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's stderr, which must be its one `Error:` line and nothing else."""
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    assert PASSWORD not in done.stderr + done.stdout
    return lines[0]


def test_a_revoked_privilege_is_one_line_naming_the_grant_everywhere(tmp_path: Path) -> None:
    """An admin revokes the role's INSERT and UPDATE on `memories`, then its SELECT: `store`,
    `forget` and `recall` printed a 60-line traceback (InsufficientPrivilege), REST answered
    500 "internal error" and the MCP tool "Error executing tool memory_store". Each is now the
    store's one line: what was refused and the GRANT to ask the admin for (the password
    masked); once granted again, the same write is stored."""
    db, url, role = team_database()
    env = {"MEMORY_DB_URL": url, "MEMORY_MAINTENANCE_ON_START": "0"}
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "seed.db"), db_url=url, device="cpu"))
    uid = engine.store_one(NewMemory("seed note about the deploy pipeline", project="proj")).uid
    engine.close()
    service = start_service(tmp_path / "svc", "serve", **env)
    try:
        admin_runs(db, f"REVOKE INSERT, UPDATE ON {role}.memories FROM {role}")
        grant = (f"permission denied for table memories: the role {role} lacks INSERT, UPDATE "
                 f"on {role}.memories; ask the admin to run GRANT INSERT, UPDATE ON TABLE "
                 f"{role}.memories TO {role}")
        stored = one_error_line(cli(tmp_path, "store", "note while revoked", "--project",
                                    "proj", **env))
        assert stored.endswith(grant) and "***@" in stored, stored
        assert one_error_line(cli(tmp_path, "forget", uid, **env)).endswith(grant)
        with service.client() as http:
            ingest = http.post("/ingest", json={"content": "x1", "project": "proj"})
            forget = http.delete(f"/api/memories/{uid}")
        for answer in (ingest, forget):
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"].endswith(grant) and PASSWORD not in answer.text

        async def mcp_store() -> str:
            async with http_session(service.mcp_url) as session:
                result = await session.call_tool("memory_store", {"content": "x2"})
                assert result.is_error
                return " ".join(getattr(c, "text", "") for c in result.content)

        assert anyio.run(mcp_store).endswith(grant)

        admin_runs(db, f"REVOKE SELECT ON {role}.memories FROM {role}")
        unreadable = f"the role {role} lacks SELECT, INSERT, UPDATE on {role}.memories"
        with service.client() as http:
            polls = [http.get("/health") for _ in range(8)]  # a monitor, a `doctor` loop
            health = polls[-1]
        assert health.status_code == 503 and unreadable in health.json()["error"], health.text
        assert all(unreadable in p.json()["error"] for p in polls)
        # Each answer carries the line; the log says it once a minute, not once a poll.
        assert sum("GET /health:" in line and unreadable in line
                   for line in service.stderr().splitlines()) == 1, service.stderr()
        recalled = one_error_line(cli(tmp_path, "recall", "deploy pipeline", **env))
        assert unreadable in recalled and "goes on without it" not in recalled, recalled

        admin_runs(db, f"GRANT SELECT, INSERT, UPDATE ON {role}.memories TO {role}")
        with service.client() as http:
            again = http.post("/ingest", json={"content": "x1", "project": "proj"})
        assert again.status_code == 200, again.text
    finally:
        service.stop()


def test_a_sequence_refused_and_a_read_only_database_are_the_stores_lines(
        tmp_path: Path) -> None:
    """Other refusals of the database's state, not bugs, are the store's one line too: the
    change-numbering sequence an insert's trigger draws from (the GRANT names the sequence),
    and a database an admin set read-only (as a standby is), where reads still answer."""
    db, url, role = team_database()
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "a.db"), db_url=url, device="cpu"))
    try:
        uid = engine.store_one(NewMemory("the deploy pipeline runs on fridays")).uid
        admin_runs(db, f"REVOKE USAGE, UPDATE ON SEQUENCE {role}.memories_change_seq "
                       f"FROM {role}")
        with pytest.raises(StoreError) as refused:
            engine.store_one(NewMemory("a second note"))
        assert str(refused.value).endswith(
            f"permission denied for sequence memories_change_seq: the role {role} lacks "
            f"USAGE, UPDATE on {role}.memories_change_seq; ask the admin to run GRANT USAGE, "
            f"UPDATE ON SEQUENCE {role}.memories_change_seq TO {role}"), refused.value
        assert PASSWORD not in str(refused.value)
    finally:
        engine.close()
    from psycopg.conninfo import conninfo_to_dict

    admin_runs(db, f"ALTER DATABASE {conninfo_to_dict(db)['dbname']} "
                   "SET default_transaction_read_only = on")
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "b.db"), db_url=url, device="cpu"))
    try:
        assert [h.memory.uid for h in engine.recall("deploy pipeline")] == [uid]
        with pytest.raises(StoreError, match=r": the server takes no writes \(cannot execute "
                           r"\w+ in a read-only transaction\): a standby"):
            engine.forget(uid)
    finally:
        engine.close()


def test_a_recall_on_a_locked_table_is_the_stores_one_line(tmp_path: Path) -> None:
    """Another session holds `memories` locked past MEMORY_DB_TIMEOUT: the first channel's
    search passes the deadline (which closes the recall's connection) and the second fails on
    the closed connection. The CLI printed a "recall goes on without it" line per channel and
    then "every channel's search failed", naming the closed connection as a second cause;
    it is now the store's one line, as `list` and `stats` print under the same lock."""
    import psycopg

    url = pg.new_database()
    env = {"MEMORY_DB_URL": url, "MEMORY_DB_TIMEOUT": "1"}
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "seed.db"), db_url=url, device="cpu"))
    engine.store_one(NewMemory("the queue depth alarm fires at 500"))
    engine.close()
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        recalled = one_error_line(cli(tmp_path, "recall", "queue depth", **env))
        listed = one_error_line(cli(tmp_path, "list", **env))
    assert recalled.endswith(" is unavailable: no answer from the server within 1 s"), recalled
    assert listed == recalled


def test_connecting_to_a_hung_server_waits_memory_db_timeout(tmp_path: Path) -> None:
    """The server's processes stopped (SIGSTOP): a command's first connection waited a fixed
    15 s whatever MEMORY_DB_TIMEOUT said; it waits that setting now (libpq's connect_timeout:
    whole seconds, at least 2)."""
    server = pg.ExtraServer()
    try:
        server.pause()
        started = time.monotonic()
        done = cli(tmp_path, "stats", MEMORY_DB_URL=server.url, MEMORY_DB_TIMEOUT="2")
        took = time.monotonic() - started
        server.resume()
        line = one_error_line(done)
        assert line.startswith("Error: cannot connect to ") and "timeout expired" in line, line
        assert took < store_module.CONNECT_TIMEOUT_S, took  # the fixed wait it replaces
        assert [store_module.connect_seconds(t) for t in (0, 0.5, 2, 2.5, 5)] == [
            store_module.CONNECT_TIMEOUT_S, 2, 2, 3, 5]
    finally:
        server.resume()
        server.stop()


def pool_lines(records: list[logging.LogRecord]) -> tuple[list[str], list[str]]:
    """(psycopg.pool's warnings, the store's "cannot reach" lines) among `records`."""
    return ([r.getMessage() for r in records
             if r.name.startswith("psycopg.pool") and r.levelno >= logging.WARNING],
            [r.getMessage() for r in records if "connection pool cannot reach" in r.getMessage()])


@pytest.mark.parametrize("serving", [True, False])
def test_the_pools_reconnect_warnings_are_one_line_per_outage_in_a_service(
        caplog: pytest.LogCaptureFixture, serving: bool) -> None:
    """The server stops twice under a store: the pool's failed connection attempts (a
    warning each, libpq's message over several lines: 95 six-line boxes in a service's log
    over 8 short outages) are one line per outage in a service, none in a one-off command,
    whose `Error:` line says it."""
    server = pg.ExtraServer()
    store = store_module.PostgresStore(server.url, pool_size=2, timeout=1.0, serving=serving)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(2):
                assert store.read().execute("SELECT 1").fetchone() == (1,)
                server.stop()
                for _ in range(3):  # the pool tries to connect again in the background
                    with pytest.raises(StoreError, match="is unavailable"):
                        store.read().execute("SELECT 1")
                    time.sleep(store_module.RECONNECT_S)
                server.start()
                for _ in range(50):  # the pool reaches the server again
                    try:
                        store.read().execute("SELECT 1")
                        break
                    except StoreError:
                        time.sleep(0.2)
        warnings, outages = pool_lines(caplog.records)
        assert warnings == []
        if serving:
            assert len(outages) == 2, outages
            assert all("\n" not in line for line in outages), outages
        else:
            assert outages == []
    finally:
        store.close()
        server.stop()


def test_an_import_whose_server_dies_prints_its_one_error_line(tmp_path: Path) -> None:
    """The server stops between two batches of an import: stderr held the pool's `error
    connecting in 'semantic-memory': … server closed the connection unexpectedly` over 3
    lines before the `Error:` line; now that one line only. What was committed stays."""
    import psycopg

    server = pg.ExtraServer()
    try:
        proc = subprocess.Popen(
            [*memory_mcp_command(), "import", "-"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=service_env(tmp_path, MEMORY_DB_URL=server.url))
        assert proc.stdin is not None
        lines = [json.dumps({"content": f"imported note {n} about shard x{n}"})
                 for n in range(2_000)]  # one batch (IMPORT_BATCH), committed on its own
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        for _ in range(600):
            try:
                with psycopg.connect(server.url) as conn:
                    if conn.execute("SELECT count(*) FROM memories").fetchone()[0] >= 2_000:
                        break
            except psycopg.Error:  # the import is still setting the store up
                pass
            time.sleep(0.1)
        server.stop()
        proc.stdin.write(json.dumps({"content": "after the server went"}) + "\n")
        _, stderr = proc.communicate(timeout=120)
        lines = stderr.splitlines()
        assert proc.returncode == 1 and len(lines) == 1, stderr
        assert lines[0].startswith("Error: ") and "unavailable" in lines[0], stderr
        server.start()
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 2_000
    finally:
        server.stop()
