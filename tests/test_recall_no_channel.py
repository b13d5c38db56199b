"""With no retrieval channel, recall finds nothing whatever is stored: REST `/recall` and MCP
`memory_recall` say why in a `warning`, the line the CLI, stats, doctor and the log say
(docs/service.md, the recall rows), where they answered a plain `count: 0`, which an agent took
for "nothing in memory matches" (the wheels report's F7). A real service over HTTP, /mcp and
`--stdio`, loading only a harness plugin (MEMORY_PLUGINS), so no channel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from test_service_mcp_proxy import proxy_session
from test_service_support import http_session, start_service, stdio_session

WARNING = ("no retrieval channel is loaded (MEMORY_PLUGINS=claude_code loads none): recall "
           "finds nothing")
FACT = "The web repo uses pnpm as its package manager, not npm."


async def recalled(session: ClientSession) -> dict[str, Any]:
    result = await session.call_tool("memory_recall", {"query": "package manager"})
    assert not result.is_error, result.content
    return result.structured_content or {}


def test_recall_without_a_channel_says_why_over_rest_and_mcp(tmp_path: Path) -> None:
    service = start_service(tmp_path / "svc", MEMORY_PLUGINS="claude_code")
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": FACT}).json()["status"] == "new"
            answer = http.post("/recall", json={"query": "package manager"})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["count"] == 0 and body["warning"] == WARNING, body
            assert http.get("/api/stats").json()["channels"] == []

        async def over_http() -> dict[str, Any]:
            async with http_session(service.mcp_url) as session:
                return await recalled(session)

        result = anyio.run(over_http)
        assert result == {"count": 0, "items": [], "warning": WARNING}, result

        async def over_the_proxy() -> dict[str, Any]:  # what `install` registers
            async with proxy_session(tmp_path / "proxy", service.url) as session:
                return await recalled(session)

        result = anyio.run(over_the_proxy)
        assert result == {"count": 0, "items": [], "warning": WARNING}, result
    finally:
        service.stop()

    (tmp_path / "stdio").mkdir()

    async def over_stdio() -> dict[str, Any]:
        async with stdio_session(tmp_path / "stdio", MEMORY_PLUGINS="claude_code") as session:
            return await recalled(session)

    result = anyio.run(over_stdio)
    assert result["count"] == 0 and result["warning"] == WARNING, result


def test_a_recall_with_a_channel_carries_no_warning(tmp_path: Path) -> None:
    service = start_service(tmp_path / "svc")
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": FACT}).json()["status"] == "new"
            body = http.post("/recall", json={"query": "package manager"}).json()
            nothing = http.post("/recall", json={"query": "kubernetes"}).json()
        assert body["count"] == 1 and "warning" not in body, body
        assert nothing["count"] == 0 and "warning" not in nothing, nothing
    finally:
        service.stop()
