"""An empty project filter means the global memories alone (those without a project) on every
read surface, as the CLI's `--project ''` does: REST's /recall, /api/memories and /api/search,
and the MCP tools memory_recall and memory_list (the service's /mcp, `--stdio`, the proxy),
where it was refused (422, a tool error). Omitting the project still reads everything. A real
service, real MCP clients, a real CLI."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from test_service_mcp import call
from test_service_mcp_proxy import proxy_session
from test_service_support import (
    Service,
    http_session,
    memory_mcp_command,
    service_env,
    start_service,
    stdio_session,
)

QUERY = "staging database password rotation"
MEMORIES = {"github.com/acme/app": "the app's staging database password rotation is weekly",
            "github.com/acme/web": "the web staging database password rotation is monthly",
            None: "every staging database password rotation is logged in the vault"}
GLOBAL = MEMORIES[None]
BLANKS = ["", "  "]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("global"))
    with running.client() as client:
        for project, text in MEMORIES.items():
            answer = client.post("/ingest", json={"content": text, "project": project}).json()
            assert answer["status"] == "new", answer
    yield running
    running.stop()


def contents(items: list[dict[str, Any]]) -> list[str]:
    return sorted(item["content"] for item in items)


@pytest.mark.parametrize("blank", BLANKS)
def test_rest_reads_take_an_empty_project_as_the_global_memories(service: Service,
                                                                 blank: str) -> None:
    with service.client() as client:
        recalled = client.post("/recall", json={"query": QUERY, "project": blank})
        listed = client.get("/api/memories", params={"project": blank})
        searched = client.get("/api/search", params={"q": QUERY, "project": blank})
        everything = client.get("/api/memories").json()["items"]
    for answer in (recalled, listed, searched):
        assert answer.status_code == 200, answer.text
    assert contents(recalled.json()["items"]) == [GLOBAL]
    assert GLOBAL in recalled.json()["block"]
    assert contents(listed.json()["items"]) == [GLOBAL] and listed.json()["total"] == 1
    assert contents(searched.json()["items"]) == [GLOBAL]
    assert contents(everything) == sorted(MEMORIES.values())


async def global_reads(session: ClientSession, blank: str) -> tuple[list[str], list[str]]:
    recalled = await call(session, "memory_recall", {"query": QUERY, "project": blank})
    listed = await call(session, "memory_list", {"project": blank})
    assert listed["total"] == 1
    return contents(recalled["items"]), contents(listed["items"])


@pytest.mark.parametrize("blank", BLANKS)
def test_mcp_read_tools_take_an_empty_project_as_the_global_memories(
        service: Service, tmp_path: Path, blank: str) -> None:
    async def main() -> dict[str, tuple[list[str], list[str]]]:
        found = {}
        async with http_session(service.mcp_url) as session:
            found["/mcp"] = await global_reads(session, blank)
            everything = await call(session, "memory_list", {})
            assert everything["total"] == len(MEMORIES)
        async with stdio_session(service.tmp, cwd=tmp_path) as session:
            found["--stdio"] = await global_reads(session, blank)
        async with proxy_session(tmp_path / "proxy", service.url, cwd=tmp_path) as session:
            found["proxy"] = await global_reads(session, blank)
        return found

    found = anyio.run(main)
    assert found == {surface: ([GLOBAL], [GLOBAL]) for surface in ("/mcp", "--stdio", "proxy")}


def test_the_cli_reads_an_empty_project_the_same_way(service: Service) -> None:
    env = service_env(service.tmp)
    listed = subprocess.run([*memory_mcp_command(), "list", "--project", "", "--json"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert contents(json.loads(listed.stdout)) == [GLOBAL]
