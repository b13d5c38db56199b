"""The service's edges, against a real `memory-mcp` process over real sockets: body-read timeout
(408) and oversized bodies (413) on REST and /mcp alike, answers a client that writes its whole
body before reading can still read, JSON error bodies for everything (the HTTP parser's own 400s
included), one-line MCP argument errors, and the MCP session cap and idle timeout."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from semantic_memory.config import ConfigError, Settings
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.app import create_app
from semantic_memory.service.edges import BodyGuard
from semantic_memory.service.log_setup import ClientGoneFilter
from test_service_support import (
    Service,
    http_session,
    start_service,
    stdio_session,
)

BODY_LIMIT = 64 * 1024
BODY_TIMEOUT_S = 2
MAX_SESSIONS = 5
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": PROTOCOL, "capabilities": {},
    "clientInfo": {"name": "edges", "version": "1"}}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("edges"), MEMORY_MAX_BODY_BYTES=str(BODY_LIMIT),
                        MEMORY_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
                        MEMORY_MCP_MAX_SESSIONS=str(MAX_SESSIONS))
    with svc.client() as client:  # load the MCP SDK before the timing-sensitive tests
        assert client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT}).status_code == 200
    yield svc
    svc.stop()


# --- raw HTTP helpers -------------------------------------------------------------------------


def port_of(svc: Service) -> int:
    return int(svc.info["port"])


def exchange(svc: Service, data: bytes, timeout: float = 20) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port_of(svc)), timeout=timeout) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def assert_json_error(status: int, headers: dict[str, str], body: bytes) -> str:
    """A JSON error body with a one-line message; returns the message."""
    assert status >= 400
    assert headers["content-type"] == "application/json", (status, headers, body)
    data = json.loads(body)
    error = data["error"]
    message = error["message"] if isinstance(error, dict) else error  # JSON-RPC keeps its shape
    assert isinstance(message, str) and message and "\n" not in message, data
    return message


def request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


# --- 1. body-read timeout ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/mcp", "/recall"])
def test_a_body_that_never_arrives_is_408(service: Service, path: str) -> None:
    started = time.monotonic()
    # A service that did not give up would leave the client waiting: 5x its timeout is the
    # bound (a ratio to the setting, with room for a loaded machine).
    raw = exchange(service, (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT}\r\nContent-Length: 100\r\n\r\n").encode() + b'{"jsonrpc": "2"',
        timeout=5 * BODY_TIMEOUT_S)
    elapsed = time.monotonic() - started
    status, headers, body = parse(raw)
    assert status == 408, raw
    assert "MEMORY_BODY_TIMEOUT_S" in assert_json_error(status, headers, body)
    assert headers["connection"] == "close"
    assert elapsed >= BODY_TIMEOUT_S - 0.5  # not before the timeout


def test_a_slow_client_does_not_block_others(service: Service) -> None:
    with socket.create_connection(("127.0.0.1", port_of(service))) as slow:
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 50\r\n\r\n{")
        with service.client() as client:
            assert client.get("/health", timeout=5).status_code == 200


def test_headers_that_never_finish_are_cut_off(tmp_path: Path) -> None:
    svc = start_service(tmp_path, MEMORY_HEADER_TIMEOUT_S="1")
    try:
        with socket.create_connection(("127.0.0.1", port_of(svc))) as slow:
            slow.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1")
            slow.settimeout(30)  # a bound for the test, not the figure: the service closes first
            assert slow.recv(1024) == b""  # closed by the service, no answer
    finally:
        svc.stop()


def test_a_flood_of_half_open_requests_does_not_lock_others_out(tmp_path: Path) -> None:
    """~1,100 connections that never finish their headers, against a service whose file
    descriptors are capped at 1024 (a common `ulimit -n`): /health keeps answering, because
    a connection over the cap closes the oldest one still waiting for its headers."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))  # this process holds them
    svc = start_service(tmp_path, fd_limit=1024)
    held: list[socket.socket] = []
    try:
        for _ in range(1100):
            conn = socket.create_connection(("127.0.0.1", port_of(svc)), timeout=10)
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            held.append(conn)
        failures = 0
        with svc.client() as client:
            for _ in range(60):
                try:
                    failures += client.get("/health", timeout=10).status_code != 200
                except Exception:  # noqa: BLE001 - a refused or reset connection is the failure
                    failures += 1
        assert failures == 0
        assert svc.proc.poll() is None
    finally:
        for conn in held:
            conn.close()
        svc.stop()
    assert "Traceback" not in svc.stderr()


# --- 2. oversized bodies: the client reads the 413 ----------------------------------------------


def urllib_post(svc: Service, path: str, body: bytes, **headers: str) -> tuple[int, str, bytes]:
    req = urllib.request.Request(svc.url + path, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": ACCEPT, **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["content-type"], exc.read()


@pytest.mark.parametrize("path", ["/recall", "/ingest", "/mcp"])
@pytest.mark.parametrize("size", [BODY_LIMIT + 1, 3 * BODY_LIMIT, 5 * 1024 * 1024])
def test_oversized_body_without_expect_reads_413(service: Service, path: str, size: int) -> None:
    """urllib sends the whole body before it reads anything: closing on unread data would
    reset the connection before it sees the answer."""
    for _ in range(4):
        status, content_type, body = urllib_post(service, path, b"x" * size)
        assert status == 413
        assert content_type == "application/json"
        assert "MEMORY_MAX_BODY_BYTES" in json.loads(body)["error"]


@pytest.mark.parametrize("path", ["/recall", "/mcp"])
def test_oversized_chunked_body_is_413(service: Service, path: str) -> None:
    chunk = b"y" * 8192
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2 * BODY_LIMIT // 8192))
    raw = exchange(service, (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: {ACCEPT}\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunks + b"0\r\n\r\n")
    status, headers, body = parse(raw)
    assert status == 413
    assert_json_error(status, headers, body)


@pytest.mark.parametrize("path", ["/recall", "/mcp"])
def test_expect_continue_gets_413_before_sending(service: Service, path: str) -> None:
    raw = exchange(service, (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Expect: 100-continue\r\nContent-Length: {BODY_LIMIT * 10}\r\n\r\n").encode())
    status, headers, body = parse(raw)
    assert status == 413
    assert_json_error(status, headers, body)


def test_a_body_within_the_limit_still_works(service: Service) -> None:
    content = "z" * (BODY_LIMIT - 200)
    status, _, body = urllib_post(service, "/ingest", json.dumps({"content": content}).encode())
    assert status == 200 and json.loads(body)["status"] in ("new", "duplicate")


# --- 3. every error is JSON ---------------------------------------------------------------------


PARSER_ERRORS = {
    "bad content-length": b"POST /recall HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: abc\r\n\r\n",
    "content-length and transfer-encoding": b"POST /recall HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two content-lengths": b"POST /recall HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
    b"Content-Length: 3\r\n\r\n{}",
    "unknown method": b"FROB /recall HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "malformed request line": b"GET\r\n\r\n",
    "not HTTP at all": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
    "bad header name": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n",
    "control character in a header": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"X: a\x01b\r\n\r\n",
}


@pytest.mark.parametrize("name", list(PARSER_ERRORS))
def test_parser_level_errors_are_json(service: Service, name: str) -> None:
    status, headers, body = parse(exchange(service, PARSER_ERRORS[name]))
    assert status == 400, (name, body)
    message = assert_json_error(status, headers, body)
    assert message.startswith("invalid HTTP request")
    assert headers["connection"] == "close"


def test_an_overlong_url_is_400_saying_so(service: Service) -> None:
    """httptools refuses a URL over 65,535 bytes from inside uvicorn's callback: the answer
    gives httptools' reason, not "User callback error"."""
    raw = b"GET /api/memories?project=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    status, headers, body = parse(exchange(service, raw))
    assert status == 400
    message = assert_json_error(status, headers, body)
    assert message == ("invalid HTTP request: url is too long: url length of 70022 bytes "
                       "exceeds the maximum of 65535 bytes"), message
    assert headers["connection"] == "close"


MCP_ERRORS = [
    # (what, raw request)
    ("text/plain POST", request("POST", "/mcp", json.dumps(INITIALIZE).encode(),
                                content_type="text/plain", accept=ACCEPT)),
    ("no Accept", request("POST", "/mcp", json.dumps(INITIALIZE).encode(),
                          content_type="application/json")),
    ("not JSON", request("POST", "/mcp", b"{nope", content_type="application/json",
                         accept=ACCEPT)),
    ("not JSON-RPC", request("POST", "/mcp", b"{}", content_type="application/json",
                             accept=ACCEPT)),
    ("unknown session", request("POST", "/mcp", b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                                content_type="application/json", accept=ACCEPT,
                                mcp_session_id="f" * 32, mcp_protocol_version=PROTOCOL)),
    ("GET without a session", request("GET", "/mcp", accept="text/event-stream")),
    ("DELETE without a session", request("DELETE", "/mcp")),
    ("PUT", request("PUT", "/mcp", b"{}", content_type="application/json")),
    ("unknown route", request("GET", "/nope")),
    ("wrong method", request("GET", "/ingest")),
]


@pytest.mark.parametrize(("what", "raw"), MCP_ERRORS, ids=[what for what, _ in MCP_ERRORS])
def test_mcp_and_route_errors_are_json_with_one_line(service: Service, what: str,
                                                     raw: bytes) -> None:
    status, headers, body = parse(exchange(service, raw))
    assert status >= 400, (what, body)
    assert_json_error(status, headers, body)


# --- 4. MCP argument errors ---------------------------------------------------------------------


BAD_CALLS = [
    # (tool, arguments, what the one line must name)
    ("memory_store", {"content": 5}, "content: Input should be a valid string"),
    ("memory_store", {}, "content: missing required argument"),
    ("memory_store", {"content": "x", "colour": "red"}, "colour: unknown argument"),
    ("memory_store", {"content": "x", "tags": ["a", 7]}, "tags[1]: Input should be a valid"),
    ("memory_recall", {"query": "x", "k": 201}, "k: Input should be less than or equal to 200"),
    ("memory_recall", {"query": "x", "limit": 3}, "limit: unknown argument"),
    ("memory_list", {"limit": "many"}, "limit: Input should be a valid integer"),
    ("memory_forget", {"uid": "a", "all": True}, "all: unknown argument"),
    ("memory_stats", {"verbose": True}, "verbose: unknown argument"),
]


async def check_bad_calls(session: ClientSession) -> None:
    for name, args, needle in BAD_CALLS:
        result = await session.call_tool(name, args)
        assert result.is_error, (name, args)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert needle in text, (name, args, text)
        assert "\n" not in text and "pydantic" not in text and "http" not in text, text
        assert text.startswith(f"invalid arguments for {name}: ")
    assert (await session.call_tool("memory_stats", {})).is_error is False  # session goes on


def test_mcp_argument_errors_are_one_line_over_http(service: Service) -> None:
    async def main() -> None:
        async with http_session(service.mcp_url) as session:
            await check_bad_calls(session)

    anyio.run(main)


def test_mcp_argument_errors_are_one_line_over_stdio(tmp_path: Path) -> None:
    async def main() -> None:
        async with stdio_session(tmp_path) as session:
            await check_bad_calls(session)

    anyio.run(main)


# --- 5. MCP sessions: capped, and closed when idle ------------------------------------------------


def open_session(client: httpx2.Client) -> str:
    response = client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


def session_alive(client: httpx2.Client, session_id: str) -> bool:
    response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={
        "accept": ACCEPT, "mcp-session-id": session_id, "mcp-protocol-version": PROTOCOL})
    assert response.status_code in (200, 404), response.text
    return response.status_code == 200


def test_session_cap_closes_the_least_recently_used(service: Service) -> None:
    with service.client() as client:
        ids = [open_session(client) for _ in range(4 * MAX_SESSIONS)]  # never closed
        alive = [sid for sid in ids if session_alive(client, sid)]
        assert alive == ids[-MAX_SESSIONS:]  # the least recently used ones were closed
    # one log line for them all, not one per session closed (clients that never close one)
    closed = [line for line in service.stderr().splitlines() if "idle MCP session" in line]
    assert len(closed) == 1 and "closed 1 least recently used" in closed[0], closed

    async def main() -> None:
        async with http_session(service.mcp_url) as session:
            assert (await session.call_tool("memory_stats", {})).is_error is False

    anyio.run(main)
    with service.client() as client:
        assert sum(session_alive(client, sid) for sid in ids) <= MAX_SESSIONS - 1


def test_the_eviction_lines_add_up_to_every_session_closed(tmp_path: Path) -> None:
    """The line said "closed 1" for the first eviction of a minute and nothing of the others
    until one more came a minute later: 50 sessions closed read as 1, and the rest never
    showed if evictions stopped. The count left is said by a timer or at shutdown."""
    svc = start_service(tmp_path, MEMORY_MCP_MAX_SESSIONS="3")
    try:
        with svc.client() as client:
            for _ in range(15):
                open_session(client)
    finally:
        svc.stop()
    counts = [int(re.search(r"closed (\d+) least recently used", line)[1])  # type: ignore[index]
              for line in svc.stderr().splitlines() if "idle MCP session" in line]
    assert counts[0] == 1 and sum(counts) == 12, counts


def test_idle_session_is_closed(tmp_path: Path) -> None:
    svc = start_service(tmp_path, MEMORY_MCP_SESSION_IDLE_S="1")
    try:
        with svc.client() as client:
            session_id = open_session(client)
            assert session_alive(client, session_id)
            deadline = time.monotonic() + 15
            while session_alive(client, session_id):
                assert time.monotonic() < deadline, "idle session was never closed"
                time.sleep(1.5)  # a ping resets the idle clock: sleep past it
            assert open_session(client)
    finally:
        svc.stop()


# --- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), [
    ("MEMORY_BODY_TIMEOUT_S", "0"), ("MEMORY_BODY_TIMEOUT_S", "nan"),
    ("MEMORY_BODY_TIMEOUT_S", "-1"), ("MEMORY_MCP_MAX_SESSIONS", "0"),
    ("MEMORY_MCP_MAX_SESSIONS", "many"), ("MEMORY_MCP_SESSION_IDLE_S", "0"),
    ("MEMORY_MCP_SESSION_IDLE_S", "inf"), ("MEMORY_HEADER_TIMEOUT_S", "0"),
    ("MEMORY_HEADER_TIMEOUT_S", "nan"), ("MEMORY_MAX_CONNECTIONS", "3"),
    ("MEMORY_MAX_CONNECTIONS_PER_CLIENT", "0"), ("MEMORY_HOOK_BACKOFF_S", "-1"),
    ("MEMORY_MAX_CONTENT_CHARS", "0"), ("MEMORY_MAX_CONTENT_CHARS", "-1"),
    ("MEMORY_PLUGIN_BUDGET_CHARS", "300"),  # the block's wrapper alone takes ~200
    # a Host check compares names: an entry with a port or a scheme would never match
    ("MEMORY_ALLOWED_HOSTS", "memory.lan:8765"), ("MEMORY_ALLOWED_HOSTS", "http://memory.lan"),
    ("MEMORY_ALLOWED_HOSTS", "memory.lan,10.0.0.5/24"),
])
def test_bad_limits_are_config_errors(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        Settings.from_env({name: value})
    assert "\n" not in str(info.value)


def test_allowed_hosts_take_names_and_addresses() -> None:
    settings = Settings.from_env({"MEMORY_ALLOWED_HOSTS": "memory.lan, 192.168.1.5,[::1],fe80::1"})
    assert settings.allowed_hosts.count(",") == 3


def test_limit_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.body_timeout_s == 30 and settings.mcp_max_sessions == 100
    assert settings.mcp_session_idle_s == 1800


def test_an_answer_after_the_response_ended_is_dropped() -> None:
    """The MCP SDK answers a notification 202, then hands it to a session that a leaving client
    has closed, and its error handler starts a 500 (seen under load at the end of a session):
    uvicorn refuses a second response with a traceback. The guard passes the first answer
    whole and drops what comes after it."""
    async def sdk_like_app(scope: dict, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        await send({"type": "http.response.start", "status": 500,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"Internal Server Error"})

    sent: list[dict] = []

    async def server_send(message: dict) -> None:  # as uvicorn's: nothing after the end
        if sent and sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body"):
            raise RuntimeError(f"Unexpected ASGI message {message['type']!r} sent, after "
                               "response already completed.")
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    anyio.run(BodyGuard(sdk_like_app, Settings()), scope, receive, server_send)
    assert [(m["type"], m.get("status")) for m in sent] == [
        ("http.response.start", 202), ("http.response.body", None)]


def test_a_notification_crossing_its_sessions_close_is_no_traceback(
        engine: MemoryEngine, caplog: pytest.LogCaptureFixture) -> None:
    """A leaving client's last notification can reach the real SDK while its DELETE closes the
    session (seen under load). The SDK answers 202, fails to hand the message on, and re-raises
    from its error handler; the service keeps that to a debug line. Deterministic here: the
    DELETE runs right when the 202 goes out, the moment the SDK's race window opens."""
    app = create_app(engine)
    base = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
            (b"accept", ACCEPT.encode())]

    async def call(method: str, body: dict | None, headers: list, send: object = None) -> list:
        sent: list[dict] = []
        payload = json.dumps(body).encode() if body is not None else b""
        chunks = [{"type": "http.request", "body": payload, "more_body": False}]

        async def receive() -> dict:
            if chunks:
                return chunks.pop()
            await anyio.sleep_forever()
            raise AssertionError

        async def record(message: dict) -> None:
            if send is not None:
                await send(message)
            sent.append(message)

        scope = {"type": "http", "method": method, "path": "/mcp", "raw_path": b"/mcp",
                 "query_string": b"", "headers": [*base, *headers], "scheme": "http",
                 "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 5000),
                 "http_version": "1.1", "root_path": ""}
        with anyio.fail_after(20):
            await app(scope, receive, record)
        return sent

    async def main() -> list:
        async with app.router.lifespan_context(app):
            opened = await call("POST", INITIALIZE, [])
            headers = dict(opened[0]["headers"])
            session = [(b"mcp-session-id", headers[b"mcp-session-id"]),
                       (b"mcp-protocol-version", PROTOCOL.encode())]

            async def delete_first(message: dict) -> None:
                if message["type"] == "http.response.start" and message["status"] == 202:
                    closed = await call("DELETE", None, session)
                    assert closed[0]["status"] == 200

            return await call("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                              session, delete_first)

    caplog.set_level(logging.DEBUG, logger="semantic_memory")
    sdk_log, gone = logging.getLogger("mcp.server.streamable_http"), ClientGoneFilter()
    sdk_log.addFilter(gone)  # as the service's own logging set-up does
    try:
        sent = anyio.run(main)
    finally:
        sdk_log.removeFilter(gone)
    assert [(m["type"], m.get("status")) for m in sent] == [
        ("http.response.start", 202), ("http.response.body", None)]
    assert "session already closed" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_a_client_gone_before_its_pipelined_answers_leaves_no_traceback(tmp_path: Path) -> None:
    """A client pipelines twenty requests for big pages on a small receive buffer, then closes
    its socket: uvicorn marks only the request it is reading as disconnected, and the answers
    queued behind it met the closed socket (`RuntimeError: unable to perform operation on
    <TCPTransport closed=True …>`), two tracebacks each in the service's log. Now dropped
    quietly; the service answers the next client."""
    svc = start_service(tmp_path)
    try:
        with svc.client() as client:
            for start in range(0, 300, 100):
                items = [{"content": f"memory {n} about the build " + "x%dy " % n * 80}
                         for n in range(start, start + 100)]
                assert client.post("/ingest", json={"items": items}).status_code == 200
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", port_of(svc)))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /api/memories?limit=500 HTTP/1.1\r\nHost: localhost\r\n\r\n" * 20)
            time.sleep(0.5)
            sock.close()
        with svc.client() as client:
            assert client.get("/api/memories?limit=5").status_code == 200
        time.sleep(1)  # the queued answers meet the closed socket
    finally:
        svc.stop()
    log = svc.stderr()
    assert "Traceback" not in log and "unexpected error" not in log, log[-3000:]
