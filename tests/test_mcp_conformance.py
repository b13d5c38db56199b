"""MCP over HTTP (`/mcp` of a real service) and stdio (`memory-mcp --stdio`, `memory-mcp
proxy`) with messages a well-behaved client would not send: each gets an answer (a JSON-RPC
error with a useful reason, or the call's own result), none leaves the client waiting, and
none puts a traceback in the service's log."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from lock_support import write_lock_held
from test_service_support import Service, start_service

BODY_LIMIT = 64 * 1024
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-06-18"
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": PROTOCOL, "capabilities": {},
    "clientInfo": {"name": "conformance", "version": "1"}}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("conformance"),
                        MEMORY_MAX_BODY_BYTES=str(BODY_LIMIT))
    yield svc
    svc.stop()


def answer_of(response: httpx2.Response) -> Any:
    """The JSON-RPC message of a /mcp answer (JSON, or the one event of an SSE stream)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        [data] = [line[5:] for line in response.text.splitlines() if line.startswith("data:")
                  and line[5:].strip()]
        return json.loads(data)
    return response.json()


def open_session(client: httpx2.Client) -> dict[str, str]:
    """A handshake session's headers."""
    opened = client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
    assert opened.status_code == 200, opened.text
    headers = {"accept": ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"],
               "mcp-protocol-version": PROTOCOL}
    assert client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                       headers=headers).status_code == 202
    return headers


def post(client: httpx2.Client, headers: dict[str, str], body: Any) -> httpx2.Response:
    return client.post("/mcp", json=body, headers=headers)


# --- bodies the guard refuses -----------------------------------------------------------------


def test_a_chunked_body_over_the_limit_is_413_without_a_traceback(service: Service) -> None:
    """A chunked /mcp body over MEMORY_MAX_BODY_BYTES was answered 413, but the SDK, reading
    the body the guard cut off, logged a ~45-line ClientDisconnect traceback."""
    def chunks() -> Iterator[bytes]:
        for _ in range(4):
            yield b"x" * BODY_LIMIT

    with service.client() as client:
        headers = open_session(client)
        refused = client.post("/mcp", content=chunks(),
                              headers={**headers, "content-type": "application/json"})
        assert refused.status_code == 413
        assert "MEMORY_MAX_BODY_BYTES" in refused.json()["error"]
        assert answer_of(post(client, headers, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
                         ) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    log = service.stderr()
    assert "Traceback" not in log and "ClientDisconnect" not in log and "╭" not in log, log


# --- one session's requests -------------------------------------------------------------------


def store(id_: Any, content: str, project: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {
        "name": "memory_store", "arguments": {"content": content, "project": project}}}


def release(holder: subprocess.Popen[str]) -> None:
    """Let a `write_lock_held` holder commit now."""
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(30)


def test_a_second_request_with_an_id_in_flight_is_refused(service: Service) -> None:
    """Two requests with one id in flight in one session: the SDK keys its answers by id,
    and one of the two was never answered. The second is refused at once (-32600); the
    first, waiting on the store's write lock, is answered once it is free."""
    project = "duplicate-ids"
    with service.client() as client:  # 30 s: a request never answered fails the test
        headers = open_session(client)
        with write_lock_held(service.tmp / "memory.db") as holder, client.stream(
                "POST", "/mcp", json=store(7, "The ibis cron runs hourly", project),
                headers=headers) as first:
            assert first.status_code == 200  # its stream is open: the request is in flight
            second = post(client, headers, store("7", "The ibis cron runs daily", project))
            assert second.status_code == 400
            refused = second.json()
            assert refused["id"] == "7" and refused["error"]["code"] == -32600
            assert refused["error"]["message"].startswith("duplicate request id '7'")
            release(holder)
            first.read()
        answered = answer_of(first)
        assert answered["id"] == 7 and answered["result"]["structuredContent"]["status"] == "new"
        listed = answer_of(post(client, headers, {
            "jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "memory_list", "arguments": {"project": project}}}))
        assert [m["content"] for m in listed["result"]["structuredContent"]["items"]] == [
            "The ibis cron runs hourly"]
        # the id is free again once answered
        assert answer_of(post(client, headers, {"jsonrpc": "2.0", "id": 7, "method": "ping"})
                         ) == {"jsonrpc": "2.0", "id": 7, "result": {}}
