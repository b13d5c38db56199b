"""A service of an older release still running after the package is upgraded: no command of
this release upgrades the schema under it (it would go on writing names v9 normalizes, which
no filter then finds), on SQLite and on PostgreSQL; once it stops, the upgrade goes on.

The older release is real: the packages of older_release.OLD_REV, run from a worktree.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import older_release
import pg
import psycopg
import pytest
from test_service_support import memory_mcp_command, service_env, start_service

REFUSED = "of an older release: stop it (or restart it with this release), then try again"


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The PYTHONPATH that runs the older release."""
    with older_release.worktree(tmp_path_factory.mktemp("old-release") / "tree") as path:
        yield path


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp args`: of this release unless `env` has the old one's PYTHONPATH."""
    return subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=120)


def this_release(tmp: Path, **overrides: str) -> dict[str, str]:
    env = service_env(tmp, **overrides)
    env.pop("PYTHONPATH", None)
    return env


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


def assert_refused(done: subprocess.CompletedProcess[str], pid: int) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"served by a running service (pid {pid}) {REFUSED}" in lines[0], \
        done.stderr


def test_no_command_of_this_release_upgrades_a_sqlite_db_an_older_service_serves(
        tmp_path: Path, old_release: str) -> None:
    db = tmp_path / "memory.db"
    env = this_release(tmp_path)
    assert cli({**env, "PYTHONPATH": old_release}, "store", "--project", "alpha",
               "seed fact").returncode == 0
    assert sqlite_version(db) == 8
    # another db at v8, whose settings share the discovery file: not the old service's db
    other = tmp_path / "other.db"
    assert cli({**env, "PYTHONPATH": old_release, "MEMORY_DB_PATH": str(other)}, "store",
               "other fact").returncode == 0
    service = start_service(tmp_path, "serve", PYTHONPATH=old_release)
    pid = service.info["pid"]
    try:
        for args in (["stats"], ["list", "--project", "alpha"]):
            assert_refused(cli(env, *args), pid)
        # a service of this release started beside it: refused too, before it listens
        assert_refused(cli(env, "serve"), pid)
        assert sqlite_version(db) == 8
        shared = cli({**env, "MEMORY_DB_PATH": str(other),
                      "MEMORY_DISCOVERY_FILE": f"{db}.server.json"}, "stats")
        assert shared.returncode == 0, shared.stderr
        assert sqlite_version(other) == 10
        # what the old service writes, in the names its schema allows
        with service.client() as http:
            answer = http.post("/ingest", json={"content": "Grafana runs on port 3000",
                                                "project": "alpha ", "kind": "Fact"})
        assert answer.status_code == 200, answer.text
    finally:
        assert service.stop() == 0
    # stopped: this release upgrades, normalizing what it wrote, and its filters find it
    listed = cli(env, "list", "--project", "alpha", "--kind", "fact", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "Grafana runs on port 3000" in listed.stdout
    assert sqlite_version(db) == 10


def test_a_killed_older_service_does_not_hold_the_upgrade_back(
        tmp_path: Path, old_release: str) -> None:
    db = tmp_path / "memory.db"
    env = this_release(tmp_path)
    assert cli({**env, "PYTHONPATH": old_release}, "store", "seed fact").returncode == 0
    service = start_service(tmp_path, "serve", PYTHONPATH=old_release)
    service.stop(signal.SIGKILL)
    assert Path(f"{db}.server.json").exists()  # left behind, naming a process that is gone
    done = cli(env, "stats")
    assert done.returncode == 0, done.stderr
    assert sqlite_version(db) == 10


def test_no_command_of_this_release_upgrades_a_postgres_db_an_older_local_service_serves(
        tmp_path: Path, old_release: str) -> None:
    url = pg.new_database()
    env = this_release(tmp_path, MEMORY_DB_URL=url)
    assert cli({**env, "PYTHONPATH": old_release}, "store", "--project", "alpha",
               "seed fact").returncode == 0
    assert pg_version(url) == 5
    service = start_service(tmp_path, "serve", MEMORY_DB_URL=url, PYTHONPATH=old_release)
    try:
        assert_refused(cli(env, "stats"), service.info["pid"])
        assert pg_version(url) == 5
    finally:
        assert service.stop() == 0
    done = cli(env, "list", "--project", "alpha", "--json")
    assert done.returncode == 0, done.stderr
    assert [m["content"] for m in json.loads(done.stdout)] == ["seed fact"]
    assert pg_version(url) > 5
