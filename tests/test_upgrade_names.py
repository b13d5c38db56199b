"""A process of an older release left running across an upgrade (an agent session's `--stdio`
server, which no discovery file names, so nothing refuses the upgrade under it) goes on
writing projects and kinds as that release did ("GitHub.com/Acme/Web-App/", "Fact"). The
schema step that rewrote the older rows ran once, so those writes stayed out of reach of every
filter and of the hooks' recall for good. The service's maintenance now rewrites the names of
the rows written since its last run. The old process's write is made here as that release
made it: a row inserted with its names as given."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_service_support import Service, start_service

from semantic_memory.stores.base import content_hash

pytestmark = pytest.mark.both_stores
OLD_PROJECT, PROJECT = "GitHub.com/Acme/Web-App/", "github.com/acme/web-app"
TEXT = "The puffin cache is keyed by tenant id and region"


def write_as_an_older_release(store_kind: str, where: str, uid: str) -> None:
    row = (uid, TEXT, content_hash(TEXT), "Fact", "MCP", OLD_PROJECT, "[]", time.time(),
           time.time())
    columns = "uid, content, content_hash, kind, source, project, tags, created_at, updated_at"
    if store_kind == "postgresql":
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute(f"INSERT INTO memories ({columns}) VALUES "
                         "(%s, %s, %s, %s, %s, %s, %s, %s, %s)", row)
        return
    import sqlite3

    with sqlite3.connect(where) as conn:
        conn.execute(f"INSERT INTO memories ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)


def found(service: Service) -> list[dict[str, str]]:
    with service.client() as http:
        return http.get("/api/memories", params={"project": PROJECT, "kind": "fact"}
                        ).json()["items"]


def test_the_maintenance_rewrites_names_an_older_releases_process_wrote(
        tmp_path: Path, store_kind: str) -> None:
    env = {"MEMORY_MAINTENANCE_INTERVAL_S": "1"}
    if store_kind == "postgresql":
        import pg

        env["MEMORY_DB_URL"] = where = pg.new_database()
    else:
        where = str(tmp_path / "memory.db")
    service = start_service(tmp_path, **env)
    try:
        with service.client() as http:  # the store is this release's schema
            http.post("/ingest", json={"content": "filler", "project": "other"})
        write_as_an_older_release(store_kind, where, "0123456789abcdef")
        deadline = time.monotonic() + 60
        while not found(service):
            assert time.monotonic() < deadline, "the older release's names were not rewritten"
            time.sleep(0.3)
        [memory] = found(service)
        assert (memory["uid"], memory["kind"], memory["source"], memory["project"]) == \
            ("0123456789abcdef", "fact", "mcp", PROJECT)
        with service.client() as http:
            stats = http.get("/api/stats").json()
        assert OLD_PROJECT not in stats["by_project"]
        assert "rewrote the project, kind or source names" in \
            (tmp_path / "stderr.log").read_text()
    finally:
        service.stop()
