"""The service side reads MEMORY_PROJECT as the hooks do (harness/settings.py
`project_setting`): blank is unset, so `memory-mcp --stdio` and `memory-mcp proxy` store a
memory_store without a project under the repository's project, as the hooks do (they took
"   " as the project and stored global memories); a name every write would be refused for is
a bad setting: one line, exit code 2. Real servers, real repositories."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from test_fixbatch_d_project_setting import clone
from test_service_mcp import call
from test_service_mcp_proxy import proxy_session
from test_service_support import Service, memory_mcp_command, service_env, start_service, \
    stdio_session

PROJECT = "github.com/acme/shop"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


async def store(session: ClientSession, content: str) -> None:
    assert (await call(session, "memory_store", {"content": content}))["status"] == "new"


@pytest.mark.parametrize("blank", ["   ", "\t"])
def test_a_blank_memory_project_is_the_repositorys_project_for_stdio_and_the_proxy(
        service: Service, tmp_path: Path, blank: str) -> None:
    shop = clone(tmp_path / "shop")

    async def main() -> None:
        async with stdio_session(service.tmp, cwd=shop, MEMORY_PROJECT=blank) as session:
            await store(session, "the shop's stdio server stores under the repository")
        async with proxy_session(tmp_path / "proxy", service.url, cwd=shop,
                                 MEMORY_PROJECT=blank) as session:
            await store(session, "the shop's proxy stores under the repository")

    anyio.run(main)
    with service.client() as client:
        items = client.get("/api/memories").json()["items"]
    assert sorted((m["project"], m["content"]) for m in items) == [
        (PROJECT, "the shop's proxy stores under the repository"),
        (PROJECT, "the shop's stdio server stores under the repository")]


BAD = {"x" * 257: "MEMORY_PROJECT must be 1..256 characters",
       "shop\nother": "MEMORY_PROJECT must be one line (no newline, tab or NUL)",
       "<private>shop</private>": "MEMORY_PROJECT must not hold <private> text"}


@pytest.mark.parametrize("value", list(BAD))
def test_a_project_every_write_would_be_refused_for_is_a_bad_setting(tmp_path: Path,
                                                                     value: str) -> None:
    env = service_env(tmp_path, MEMORY_PROJECT=value)
    for args, prefix in ((["--stdio"], "Error: "), (["proxy"], "memory-mcp proxy: "),
                         (["list"], "Error: ")):
        done = subprocess.run([*memory_mcp_command(), *args], env=env, cwd=tmp_path,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 2 and done.stdout == "", (args, done.stdout)
        assert done.stderr.splitlines() == [prefix + BAD[value]], (args, done.stderr)
        assert value not in done.stderr  # the name may be private

