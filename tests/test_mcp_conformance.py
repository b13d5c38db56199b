"""MCP over HTTP (`/mcp` of a real service) and stdio (`memory-mcp --stdio`, `memory-mcp
proxy`) with messages a well-behaved client would not send: each gets an answer (a JSON-RPC
error with a useful reason, or the call's own result), none leaves the client waiting, and
none puts a traceback in the service's log."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from lock_support import write_lock_held
from test_service_support import Service, memory_mcp_command, service_env, start_service

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


def test_an_id_is_free_again_as_soon_as_its_answer_is_out(service: Service) -> None:
    """A client that reuses one id for call after call sends the next request as soon as it
    has the answer, while the SDK's handler may still be returning: the id counted as in
    flight until then, and such a ping was refused as a duplicate now and then."""
    with service.client() as client:
        headers = open_session(client)
        for _ in range(200):
            answer = post(client, headers, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
            assert answer.status_code == 200, answer.text


# --- lines the SDK's stdio reader refuses ------------------------------------------------------


#: (a line an agent might send, the error it is answered: id, code, words of the message)
BAD_LINES = [
    (b'{"jsonrpc":"2.0","id":2,', None, -32700, "Parse error"),
    (b'[{"jsonrpc":"2.0","id":3,"method":"ping"}]', None, -32600, "batches are not supported"),
    (b"[]", None, -32600, "batches are not supported"),
    (b"42", None, -32600, "is an object, not a number"),
    (b'"ping"', None, -32600, "is an object, not a string"),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600, "id must be"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, -32600, "id must be"),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600, "id must be"),
    (b'{"jsonrpc":"2.0","id":{},"method":"ping"}', None, -32600, "id must be"),
    (b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"x"}', 4, -32600,
     "params must be an object"),
    (b'{"id":5,"method":"ping"}', 5, -32600, 'missing jsonrpc: "2.0"'),
    (b'{"jsonrpc":"1.0","id":6,"method":"ping"}', 6, -32600, 'jsonrpc must be "2.0"'),
    (b'{"jsonrpc":"2.0","id":7,"method":5}', 7, -32600, "method must be a string"),
]


@pytest.mark.parametrize("server", ["--stdio", "proxy"])
def test_every_line_the_sdk_refuses_is_answered(server: str, tmp_path: Path) -> None:
    """The SDK drops a line its parser refuses without an answer, so the agent waited on
    that request for ever: each is answered with a JSON-RPC error now, the session goes on."""
    initialize = json.dumps(INITIALIZE).encode()
    lines = [initialize, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', b"",
             *(line for line, *_ in BAD_LINES), b'{"jsonrpc":"2.0","id":"last","method":"ping"}']
    proc = subprocess.Popen([*memory_mcp_command(), server], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env=service_env(tmp_path, MEMORY_PLUGIN_URL="http://127.0.0.1:9"))
    watchdog = threading.Timer(60, proc.kill)  # an unanswered line fails the test, no hang
    watchdog.start()
    try:
        assert proc.stdin and proc.stdout
        proc.stdin.write(b"\n".join(lines) + b"\n")
        proc.stdin.flush()
        answers = []
        while (line := proc.stdout.readline()) and json.loads(line).get("id") != "last":
            answers.append(json.loads(line))
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    # Answers come in any order (JSON-RPC); the refusals, written as each line is read, in
    # the order of the lines.
    assert [a for a in answers if a.get("id") == 0 and "result" in a]
    errors = [a for a in answers if a.get("id") != 0]
    assert [(e["id"], e["error"]["code"]) for e in errors] == [
        (id_, code) for _, id_, code, _ in BAD_LINES]
    for error, (line, _, _, words) in zip(errors, BAD_LINES):
        assert words in error["error"]["message"], (line, error)


# --- a cancelled write ------------------------------------------------------------------------


def cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "the user pressed Esc"}}


def test_a_cancelled_write_over_http_is_answered_with_what_became_of_it(service: Service
                                                                         ) -> None:
    """A memory_store cancelled while it waited for the store's write lock was answered
    -32800 "Request cancelled", and stored all the same. A write's cancellation is not
    passed on: the call is answered with its real result."""
    project = "cancelled-http"
    with service.client() as client:
        headers = open_session(client)
        with write_lock_held(service.tmp / "memory.db") as holder, client.stream(
                "POST", "/mcp", json=store(42, "The avocet export runs at dawn", project),
                headers=headers) as stored:
            assert post(client, headers, cancel(42)).status_code == 202
            assert answer_of(post(client, headers, {"jsonrpc": "2.0", "id": 43,
                                                    "method": "ping"}))["result"] == {}
            release(holder)
            stored.read()
        answered = answer_of(stored)
        assert "error" not in answered, answered
        assert answered["result"]["structuredContent"]["status"] == "new"
        listed = client.get("/api/memories", params={"project": project}).json()
        assert [m["uid"] for m in listed["items"]] == [
            answered["result"]["structuredContent"]["uid"]]


def test_a_cancelled_write_over_stdio_is_answered(tmp_path: Path) -> None:
    """Over stdio the SDK never answers a cancelled request, and the write landed all the
    same: the agent was told nothing of a memory that is stored. It is answered now."""
    proc = subprocess.Popen([*memory_mcp_command(), "--stdio"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path,
                            env=service_env(tmp_path, MEMORY_PROJECT="cancelled-stdio"))
    watchdog = threading.Timer(60, proc.kill)  # an unanswered call fails the test, no hang
    watchdog.start()
    assert proc.stdin and proc.stdout

    def send(*messages: dict[str, Any]) -> None:
        assert proc.stdin
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()

    def answer(request_id: Any) -> dict[str, Any]:
        assert proc.stdout
        while line := proc.stdout.readline():
            if (reply := json.loads(line)).get("id") == request_id:
                return reply
        raise AssertionError(f"no answer to {request_id!r}")

    try:
        send(INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer(0)  # the store is open
        with write_lock_held(tmp_path / "memory.db") as holder:
            send(store(9, "The avocet export runs at dusk", "cancelled-stdio"), cancel(9),
                 {"jsonrpc": "2.0", "id": 10, "method": "ping"})
            assert answer(10)["result"] == {}  # the cancellation was read before it
            release(holder)
            stored = answer(9)
        assert stored["result"]["structuredContent"]["status"] == "new", stored
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()


# --- the session cap ----------------------------------------------------------------------------


def test_only_an_initialize_makes_room_at_the_session_cap(tmp_path: Path) -> None:
    """At MEMORY_MCP_MAX_SESSIONS any POST without a session id closed a live idle session:
    one the SDK then refused (400 "Missing session ID"), or a 2026-07-28 request, which needs
    no session. Only a handshake `initialize` closes the least recently used one now."""
    from mcp import Client

    svc = start_service(tmp_path, MEMORY_MCP_MAX_SESSIONS="2")
    try:
        with svc.client() as client:
            first, second = open_session(client), open_session(client)

            def alive(headers: dict[str, str]) -> bool:
                return post(client, headers, {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                            ).status_code == 200

            for _ in range(3):
                refused = post(client, {"accept": ACCEPT, "mcp-protocol-version": PROTOCOL},
                               {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                assert refused.status_code == 400
                assert refused.json()["error"]["message"] == "Bad Request: Missing session ID"
            assert alive(first) and alive(second)

            async def modern() -> None:
                async with Client(svc.mcp_url, mode="2026-07-28") as session:
                    for _ in range(3):
                        assert (await session.call_tool("memory_stats", {})).is_error is False

            anyio.run(modern)
            assert alive(first) and alive(second)
            third = open_session(client)  # `first` is the least recently used: it goes
            assert not alive(first) and alive(second) and alive(third)
    finally:
        svc.stop()


# --- bodies the SDK's parser refuses over HTTP ------------------------------------------------------


def test_every_body_the_sdk_refuses_is_a_useful_json_rpc_error(service: Service) -> None:
    """A batch, a scalar, a missing jsonrpc or a method that is no string got 400 with
    `-32602 Validation error: 4 validation errors for union[…]` (pydantic's header), and an id
    of null, 1.5, true or {} a 202 and no answer at all. Each is a -32600 saying what is wrong
    now, as over stdio; and `Content-Type: APPLICATION/JSON` (media types are caseless) is
    served, not refused 415."""
    with service.client() as client:
        headers = open_session(client)
        for line, id_, code, words in BAD_LINES:
            response = client.post("/mcp", content=line,
                                   headers={**headers, "content-type": "application/json"})
            assert response.status_code == 400, (line, response.text)
            refused = response.json()
            assert (refused["id"], refused["error"]["code"]) == (id_, code), (line, refused)
            assert words in refused["error"]["message"], (line, refused)
            assert "validation error" not in refused["error"]["message"].lower()
        shouted = client.post("/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                              headers={**headers, "content-type": "APPLICATION/JSON"})
        assert shouted.status_code == 200, shouted.text
        assert answer_of(shouted) == {"jsonrpc": "2.0", "id": 1, "result": {}}
