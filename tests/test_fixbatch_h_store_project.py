"""memory_store's `project` tells an agent to leave it out (the server started in its folder
fills in the project the hooks use there), not to give "the repository name": an agent that
followed it stored under `shop` where the hooks recall `github.com/acme/shop`, and no hook ever
injected it. `--stdio`'s server instructions name the workspace's project, so an agent can pass
it to memory_recall; the service's /mcp, which serves every folder, names none. Real servers,
a real repository."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from semantic_memory.service.mcp_front import CACHE_NAME
from test_fixbatch_d_project_setting import clone
from test_service_mcp import call
from test_service_mcp_proxy import proxy_session
from test_service_support import Service, http_session, start_service, stdio_session

PROJECT = "github.com/acme/shop"
FACT = "the shop's checkout retries a declined card once after three seconds"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("store-project"))
    yield running
    running.stop()


def test_memory_stores_project_says_to_leave_it_out(service: Service) -> None:
    async def main() -> tuple[str, str | None]:
        async with http_session(service.mcp_url) as session:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            return (tools["memory_store"].input_schema["properties"]["project"]["description"],
                    session.instructions)

    described, instructions = anyio.run(main)
    assert "repository name" not in described
    assert described.startswith("Usually omit it: the memory then goes under this "
                                "workspace's project, named as the hooks name it")
    assert instructions is not None and "workspace's project" not in instructions


def test_stdio_names_the_workspaces_project_for_recall(service: Service, tmp_path: Path) -> None:
    shop = clone(tmp_path / "shop")

    async def main() -> tuple[str | None, dict, dict]:
        async with stdio_session(service.tmp, cwd=shop) as session:
            instructions = session.instructions
            stored = await call(session, "memory_store", {"content": FACT})
            recalled = await call(session, "memory_recall", {
                "query": "checkout declined card retry", "project": PROJECT})
            return instructions, stored, recalled

    instructions, stored, recalled = anyio.run(main)
    assert instructions is not None
    assert f'This workspace\'s project is "{PROJECT}": memory_store files a memory under it ' \
           "when you leave `project` out" in instructions
    assert [item["uid"] for item in recalled["items"]] == [stored["uid"]]
    with service.client() as client:
        assert client.get(f"/api/memories/{stored['uid']}").json()["project"] == PROJECT


def test_the_proxy_names_each_folders_project_cached_or_not(service: Service,
                                                             tmp_path: Path) -> None:
    """`memory-mcp proxy`, the server `install` registers, named no project: its front answers
    `initialize` from one cache for every folder. Each folder's answer names its own, the
    first (the SDK's) and a later one (the cache's) alike."""
    shop = clone(tmp_path / "shop")
    other = tmp_path / "notes"
    other.mkdir()

    async def instructions(cwd: Path) -> str | None:
        async with proxy_session(tmp_path / "proxy", service.url, cwd=cwd) as session:
            return session.instructions

    first, cached = anyio.run(instructions, shop), anyio.run(instructions, shop)
    elsewhere = anyio.run(instructions, other)
    assert (tmp_path / "proxy" / CACHE_NAME).exists()
    for answer in (first, cached):
        assert answer is not None and f'This workspace\'s project is "{PROJECT}"' in answer
    assert elsewhere is not None and PROJECT not in elsewhere
    assert 'This workspace\'s project is "notes"' in elsewhere
