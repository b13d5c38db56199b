"""A time filter spelt oddly is refused, not read as a time in 1970: Python's float() reads
`1_000`, ` 1000 `, `1e3`, `nan`, `inf` and other scripts' digits, and `since=1_000` listed
everything "since 1970". REST (`since`, `created_at`), the MCP tools and the CLI's `--since`
share `models.parse_time`; each refuses with its usual message (422 / tool error / exit 2)."""

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

#: Odd spellings: each was taken as unix seconds (or read as a padded duration or date).
ODD = ["1_000", " 1000 ", "1000\n", "1e3", "nan", "inf", "-inf", "Infinity", "١٠٠٠", " 7d",
       "7d ", "2025-01-01 ", "2025-01-01_12:00"]
#: What stays readable: unix seconds, a duration back from now, ISO 8601 dates and times.
PLAIN = ["1700000000", "1700000000.5", "7d", "7 d", "24H", "2025-01-01", "2025-01-01T12:00:00Z",
         "2025-01-01 12:00", "2025-01-01T00:00+09:00"]
READ_AS = "expected ISO 8601, unix seconds or a duration back from now (7d)"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("times"))
    with svc.client() as http:
        assert http.post("/ingest", json={"content": "the deploy runs at noon"}).status_code == 200
    yield svc
    svc.stop()


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["MEMORY_DB_PATH"] = str(db)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value", ODD)
def test_rest_refuses_an_odd_since_and_created_at(service: Service, value: str) -> None:
    with service.client() as http:
        for answer in (http.get("/api/memories", params={"since": value}),
                       http.get("/api/search", params={"q": "deploy", "since": value}),
                       http.post("/recall", json={"query": "deploy", "since": value})):
            assert answer.status_code == 422, (value, answer.text)
            assert answer.json()["field"] == "since"
            assert answer.json()["error"].startswith(f"since: {READ_AS}, got"), answer.text
        stored = http.post("/ingest", json={"content": f"dated {value!r}", "created_at": value})
        assert stored.status_code == 422 and stored.json()["field"] == "created_at", stored.text


def test_rest_refuses_a_json_number_that_is_no_time(service: Service) -> None:
    """1e400 is an infinity once read: refused as no time, not as a time out of range."""
    with service.client() as http:
        answer = http.post("/recall", content=b'{"query": "deploy", "since": 1e400}',
                           headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["error"].startswith(f"since: {READ_AS}")


@pytest.mark.parametrize("value", PLAIN)
def test_rest_still_reads_plain_times(service: Service, value: str) -> None:
    with service.client() as http:
        answer = http.get("/api/memories", params={"since": value})
    assert answer.status_code == 200, answer.text


def test_mcp_tools_refuse_an_odd_since(service: Service) -> None:
    async def main() -> list[str]:
        messages = []
        async with http_session(service.mcp_url) as session:
            for tool, args in (("memory_list", {}), ("memory_recall", {"query": "deploy"})):
                for value in ("1_000", " 1000 ", "nan", "inf"):
                    result = await session.call_tool(tool, {**args, "since": value})
                    assert result.is_error, (tool, value)
                    messages.append(" ".join(getattr(c, "text", "") for c in result.content))
            plain = await session.call_tool("memory_list", {"since": "1700000000"})
            assert not plain.is_error and plain.structured_content["items"]
        return messages

    for message in anyio.run(main):
        assert "since: cannot read" in message and "as ISO 8601, unix seconds" in message, message


@pytest.mark.parametrize("value", ["1_000", " 1000 ", "nan", "inf", "1e3"])
def test_cli_since_refuses_an_odd_spelling(tmp_path: Path, value: str) -> None:
    db = tmp_path / "cli.db"
    assert cli(db, "store", "the deploy runs at noon").returncode == 0
    for command in (["list"], ["recall", "deploy"]):
        result = cli(db, *command, "--since", value)
        assert result.returncode == 2, result.stdout
        assert "--since" in result.stderr and "cannot read" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    listed = cli(db, "list", "--since", "1700000000", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1
