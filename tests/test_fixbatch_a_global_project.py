"""`"project": ""` stores a global memory on every surface that writes one. PATCH, memory_update
and `memory-mcp update --project ""` made a memory global, and memory_store took "" as global,
while /ingest (one memory, a batch, an exchange), `memory-mcp store --project ""`, an import
line and memory_store's "  " refused it ("project: expected a string of 1..256 characters")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from test_service_support import Service, http_session, start_service



def exchange(n: int) -> dict[str, str]:
    return {"user": f"Which port does staging database {n} listen on these days?",
            "reply": f"Staging database {n} listens on port 654{n} since the migration."}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("global"))
    yield svc
    svc.stop()


def projects(service: Service) -> dict[str, str | None]:
    """content -> project of every live memory."""
    with service.client() as http:
        items = http.get("/api/memories", params={"limit": 500}).json()["items"]
    return {item["content"]: item["project"] for item in items}


@pytest.mark.parametrize("blank", ["", "  "])
def test_ingest_stores_a_blank_project_as_global(service: Service, blank: str) -> None:
    with service.client() as http:
        one = http.post("/ingest", json={"content": f"one global memory {blank!r}",
                                         "project": blank})
        assert one.status_code == 200 and one.json()["status"] == "new", one.text
        batch = http.post("/ingest", json={"items": [
            {"content": f"a batch's global memory {blank!r}", "project": blank},
            {"exchange": exchange(len(blank)), "project": blank, "tags": [f"blank{len(blank)}"]}]})
        assert batch.status_code == 200 and batch.json()["rejected"] == 0, batch.text
    stored = projects(service)
    assert stored[f"one global memory {blank!r}"] is None
    assert stored[f"a batch's global memory {blank!r}"] is None
    with service.client() as http:
        pieces = http.get("/api/memories", params={"limit": 500}).json()["items"]
    assert [p["project"] for p in pieces if f"blank{len(blank)}" in p["tags"]] == [None]


def test_patch_and_ingest_agree(service: Service) -> None:
    with service.client() as http:
        uid = http.post("/ingest", json={"content": "moved to global later",
                                         "project": "web"}).json()["uid"]
        assert http.patch(f"/api/memories/{uid}", json={"project": ""}).json()["project"] is None


def test_memory_store_takes_a_blank_project_as_global(service: Service) -> None:
    async def main() -> None:
        async with http_session(service.mcp_url) as session:
            for blank in ("", "  "):
                result = await session.call_tool(
                    "memory_store", {"content": f"an agent's global memory {blank!r}",
                                     "project": blank})
                assert not result.is_error, result.content

    anyio.run(main)
    stored = projects(service)
    assert stored["an agent's global memory ''"] is None
    assert stored["an agent's global memory '  '"] is None


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["MEMORY_DB_PATH"] = str(db)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_cli_store_and_import_take_a_blank_project_as_global(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    for blank in ("", "  "):
        stored = cli(db, "store", f"a global memory from the shell {blank!r}", "--project",
                     blank, "--json")
        assert stored.returncode == 0, stored.stderr
        assert json.loads(stored.stdout)["status"] == "new"
    lines = tmp_path / "import.jsonl"
    lines.write_text(json.dumps({"content": "an imported global memory", "project": ""}) + "\n"
                     + json.dumps({"content": "a bad project", "project": 5}) + "\n")
    imported = cli(db, "import", str(lines))
    assert json.loads(imported.stdout)["new"] == 1 and "line 2: project" in imported.stderr
    listed = json.loads(cli(db, "list", "--project", "", "--json").stdout)
    assert sorted(m["content"] for m in listed) == [
        "a global memory from the shell '  '", "a global memory from the shell ''",
        "an imported global memory"]
