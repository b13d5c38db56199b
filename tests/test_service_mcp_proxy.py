"""`memory-mcp proxy` (the MCP server `install` registers) through the SDK's stdio client: the
same tools as the service's own MCP server, each call forwarded to a real service; a write
spooled while the service is down lands once it is back, exactly once; a hung service never
holds the client: initialize and tools/list do not touch it, every call comes back within the
proxy's bound; a later start answers initialize and tools/list from the SDK's cached answers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness_support import closed_port, hanging_server, hook_env, hook_log, run_hook
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from lock_support import write_lock_held
from test_service_mcp import bad_calls_keep_the_session, call, call_error, exercise_every_tool
from test_service_support import (
    Service,
    http_session,
    memory_mcp_command,
    service_env,
    start_service,
    stdio_session,
)

#: The proxy's bound per call (MEMORY_MCP_PROXY_TIMEOUT_S) facing a hung service, and facing
#: a healthy one on a loaded machine.
BOUND_S = 1.0
HEALTHY_BOUND_S = 30.0
FACT = "The billing service retries webhooks five times with exponential backoff"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("proxy"))
    yield svc
    svc.stop()


@asynccontextmanager
async def proxy_session(db_dir: Path, url: str, cwd: Path | None = None,
                        **env: str) -> AsyncIterator[ClientSession]:
    """A client of `memory-mcp proxy` whose db (and so spool) is in `db_dir`, service at `url`,
    started in `cwd` (the agent's working folder; default `db_dir`)."""
    command = memory_mcp_command()
    # A healthy service gets all the time a loaded test machine may need.
    environment = service_env(db_dir, **{"MEMORY_PLUGIN_URL": url,
                                         "MEMORY_MCP_PROXY_TIMEOUT_S": str(HEALTHY_BOUND_S),
                                         **env})
    params = StdioServerParameters(command=command[0], args=[*command[1:], "proxy"],
                                   env=environment, cwd=cwd or db_dir)
    db_dir.mkdir(parents=True, exist_ok=True)
    with open(db_dir / "proxy-stderr.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                yield session


def spooled(db_dir: Path) -> list[Path]:
    return sorted((db_dir / "spool").glob("*.json"))


def test_proxy_serves_the_services_tools(service: Service) -> None:
    """Every tool works through the proxy, and tools/list is the service's own, field for
    field (names, descriptions, schemas, annotations)."""
    async def main() -> None:
        async with proxy_session(service.tmp, service.url, MEMORY_PROJECT="proxied") as session:
            await exercise_every_tool(session, "proxied")
            await bad_calls_keep_the_session(session)
            proxied = (await session.list_tools()).tools
        async with http_session(service.mcp_url) as session:
            served = (await session.list_tools()).tools
        assert [t.model_dump() for t in proxied] == [t.model_dump() for t in served]

    anyio.run(main)


def test_recall_items_are_the_same_on_every_surface(service: Service) -> None:
    """memory_recall's items are /recall's, whichever way the tool is reached (the service's
    /mcp, `memory-mcp --stdio`, the proxy): wrapper tags escaped and the content cut to
    `budget_chars`, marked `truncated` with its full length."""
    content = ("The release checklist </semantic-memory> <memory>runs the smoke tests first "
               + "then the canary " * 100)
    query = {"query": "release checklist smoke tests", "project": "surfaces", "k": 3,
             "budget_chars": 400}
    with service.client() as client:
        uid = client.post("/ingest", json={"content": content, "project": "surfaces"}
                          ).json()["uid"]
        rest = client.post("/recall", json=query).json()["items"]
    expected = [{key: item.get(key) for key in ("uid", "content", "truncated", "content_chars")}
                for item in rest]
    [item] = expected
    assert item["uid"] == uid and item["truncated"] is True
    assert item["content"].startswith("The release checklist &lt;/semantic-memory> &lt;memory>")
    # the memory's own length, not its escaped text's
    assert len(item["content"]) <= 400 and item["content_chars"] == len(content)

    async def recalled(session: ClientSession) -> list[dict[str, Any]]:
        items = (await call(session, "memory_recall", query))["items"]
        assert all("deleted" not in item for item in items)
        return [{key: item.get(key) for key in ("uid", "content", "truncated", "content_chars")}
                for item in items]

    async def main() -> dict[str, list[dict[str, Any]]]:
        async with http_session(service.mcp_url) as session:
            mcp = await recalled(session)
        async with stdio_session(service.tmp) as session:  # the same db, its own engine
            stdio = await recalled(session)
        async with proxy_session(service.tmp, service.url) as session:
            proxied = await recalled(session)
        return {"/mcp": mcp, "--stdio": stdio, "proxy": proxied}

    for surface, items in anyio.run(main).items():
        assert items == expected, surface


def test_a_store_while_the_service_is_down_lands_once_it_is_back(tmp_path: Path) -> None:
    db_dir = tmp_path / "svc"
    down = f"http://127.0.0.1:{closed_port()}"

    async def while_down() -> None:
        async with proxy_session(db_dir, down, MEMORY_PROJECT="billing") as session:
            answer = await call(session, "memory_store", {"content": FACT, "project": "billing"})
            assert answer["status"] == "spooled"
            assert "stored once the service can take it" in answer["reason"]
            assert "nothing listens" in answer["reason"]
            # The reads say why in one line, at once.
            message = await call_error(session, "memory_recall", {"query": "webhooks"})
            assert "the memory service is unavailable: " in message
            assert "\n" not in message

    anyio.run(while_down)
    [record] = spooled(db_dir)
    assert FACT in record.read_text()

    service = start_service(db_dir)  # the same db: it drains the spool at start
    try:
        async def once_back() -> None:
            async with proxy_session(db_dir, service.url, MEMORY_PROJECT="billing") as session:
                for _ in range(100):  # the replay runs beside the service's start
                    found = await call(session, "memory_recall", {"query": "billing webhooks"})
                    if found["items"]:
                        break
                    await anyio.sleep(0.1)
                assert [i["content"] for i in found["items"]] == [FACT]
                again = await call(session, "memory_store", {"content": FACT,
                                                              "project": "billing"})
                assert again == {"status": "duplicate", "uid": found["items"][0]["uid"],
                                 "project": "billing"}
                listed = await call(session, "memory_list", {"project": "billing"})
                assert listed["total"] == 1

        anyio.run(once_back)
        assert spooled(db_dir) == []
    finally:
        service.stop()


async def timed(session: ClientSession, name: str, args: dict[str, Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = await session.call_tool(name, args)
    return result, time.monotonic() - start


def test_a_hung_service_never_holds_the_client(tmp_path: Path) -> None:
    """initialize and tools/list are answered without a connection to the service; each tool
    call comes back within the proxy's bound (a ratio of it, wide margin), the store spooled."""
    connections: list[socket.socket] = []
    calls = [("memory_store", {"content": FACT}), ("memory_recall", {"query": "webhooks"}),
             ("memory_list", {}), ("memory_stats", {}), ("memory_forget", {"uid": "abc"}),
             ("memory_update", {"uid": "abc", "content": "Webhooks retry five times"})]

    async def main(url: str) -> None:
        # MEMORY_HOOK_BACKOFF_S=0: every call goes to the hung service and pays the bound.
        async with proxy_session(tmp_path, url, MEMORY_HOOK_BACKOFF_S="0",
                                 MEMORY_MCP_PROXY_TIMEOUT_S=str(BOUND_S)) as session:
            tools = (await session.list_tools()).tools
            assert len(tools) == 6 and connections == []  # nothing asked of the service
            for name, args in calls:
                result, seconds = await timed(session, name, args)
                assert seconds <= BOUND_S * 4, (name, seconds)
                if name == "memory_store":
                    assert not result.is_error and result.structured_content["status"] == \
                        "spooled"
                else:
                    text = result.content[0].text  # type: ignore[union-attr]
                    assert result.is_error and "did not answer" in text, text
            assert len(connections) == len(calls)

    with hanging_server(connections) as url:
        anyio.run(main, url)
    assert len(spooled(tmp_path)) == 1


def test_after_one_hung_call_the_proxy_backs_off(tmp_path: Path) -> None:
    """The first call meets the hung service (no answer to the call, nor to the probe after
    it) and starts the hooks' shared back-off; the next ones answer without a connection."""
    connections: list[socket.socket] = []

    async def main(url: str) -> None:
        async with proxy_session(tmp_path, url, MEMORY_MCP_PROXY_TIMEOUT_S=str(BOUND_S)
                                 ) as session:
            first = await session.call_tool("memory_recall", {"query": "webhooks"})
            # The call, then the probe that tells hung from slow: unanswered too.
            assert first.is_error and len(connections) == 2
            stored = await call(session, "memory_store", {"content": FACT})
            assert stored["status"] == "spooled" and "backing off" in stored["reason"]
            assert "backing off" in await call_error(session, "memory_stats", {})
            assert len(connections) == 2

    with hanging_server(connections) as url:
        anyio.run(main, url)
    assert (tmp_path / "hooks.backoff.json").exists()


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used (what a loaded machine does not distort)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_and_list(db_dir: Path, url: str) -> tuple[float, Any, Any]:
    """Spawn the proxy as an agent does; (CPU it used until `initialize` was answered, that
    answer, the tools/list answer)."""
    command = memory_mcp_command()
    proc = subprocess.Popen([*command, "proxy"], env=service_env(db_dir, MEMORY_PLUGIN_URL=url),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin and proc.stdout
    try:
        def ask(id_: int, method: str, params: dict[str, Any] | None = None) -> Any:
            message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params or {}}
            proc.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

        # Claude Code probes for the 2026 protocol first; a "method not found" sends it on to
        # initialize, at once.
        probe = ask(0, "server/discover", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
        assert probe["error"]["code"] == -32601
        initialized = ask(1, "initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}})["result"]
        cpu = cpu_seconds(proc.pid)
        proc.stdin.write(json.dumps({"jsonrpc": "2.0",
                                     "method": "notifications/initialized"}) + "\n")
        tools = ask(2, "tools/list")["result"]
        called = ask(3, "tools/call", {"name": "memory_stats", "arguments": {}})["result"]
        assert called["structuredContent"]["memories"] >= 0
    finally:
        proc.stdin.close()
        proc.wait(30)
    return cpu, initialized, tools


def test_a_later_start_answers_from_the_sdks_cached_answers(service: Service,
                                                            tmp_path: Path) -> None:
    """The first start caches what the SDK answered to initialize and tools/list; the next
    answers the same from the cache before the SDK has loaded (a fraction of the CPU), and
    its tool calls still reach the service through the SDK."""
    first_cpu, first_init, first_tools = start_and_list(tmp_path, service.url)
    assert (tmp_path / "mcp-proxy.cache.json").exists()
    cpu, initialized, tools = start_and_list(tmp_path, service.url)
    assert (initialized, tools) == (first_init, first_tools)
    assert len(tools["tools"]) == 6
    assert cpu <= first_cpu * 0.5, (cpu, first_cpu)


def test_a_bad_setting_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run([*memory_mcp_command(), "proxy"], capture_output=True, text=True,
                          env=service_env(tmp_path, MEMORY_MCP_PROXY_TIMEOUT_S="0"),
                          stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "memory-mcp proxy: MEMORY_MCP_PROXY_TIMEOUT_S must be within 0.1..600, not 0.0"]


# --- a slow service is not a hung one ------------------------------------------------------------


@contextmanager
def slow_route(target: str, slow: bytes, delay: float) -> Iterator[str]:
    """A URL in front of the service at `target` whose answers to the requests starting with
    `slow` (b"GET /api/stats") come `delay` s late, as a 1M-memory store's stats do (2.3 to
    4.3 s); every other request is relayed at once."""
    host, port = target.removeprefix("http://").split(":")
    server = socket.create_server(("127.0.0.1", 0))

    def relay(conn: socket.socket) -> None:
        with conn, socket.create_connection((host, int(port))) as upstream:
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head = data.partition(b"\r\n\r\n")[0]
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(data) < len(head) + 4 + length:
                data += conn.recv(65536)
            upstream.sendall(data)
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
            if data.startswith(slow):
                time.sleep(delay)
            try:
                conn.sendall(answer)
            except OSError:  # the proxy stopped waiting
                pass

    def serve() -> None:
        while True:
            try:
                conn = server.accept()[0]
            except OSError:
                return
            threading.Thread(target=relay, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_a_slow_answer_is_that_calls_error_not_a_back_off(service: Service,
                                                        tmp_path: Path) -> None:
    """memory_stats answered past the proxy's bound is that call's error: the service
    answers the probe after it, so no back-off starts, and the other tools and the next
    prompt's recall hook go on at once (they were off for 30 s)."""
    project = "slow-stats"
    fact = "The heron cluster rotates its TLS certificates every 45 days"
    with service.client() as http:
        assert http.post("/ingest", json={"content": fact, "project": project}
                         ).json()["status"] == "new"

    async def main(url: str) -> None:
        async with proxy_session(tmp_path, url, MEMORY_MCP_PROXY_TIMEOUT_S=str(BOUND_S)
                                 ) as session:
            message = await call_error(session, "memory_stats", {})
            assert "did not answer" in message and "the service is up, only slow" in message
            found = await call(session, "memory_recall", {"query": "heron certificates",
                                                           "project": project})
            assert [item["content"] for item in found["items"]] == [fact]
            assert (await call(session, "memory_list", {"project": project}))["total"] == 1

    with slow_route(service.url, b"GET /api/stats", BOUND_S * 3) as url:
        anyio.run(main, url)
        assert not (tmp_path / "hooks.backoff.json").exists()
        run = run_hook("claude-code", "UserPromptSubmit", {
            "hook_event_name": "UserPromptSubmit", "session_id": "slow-1", "cwd": str(tmp_path),
            "prompt": "how often do the heron certificates rotate?"},
            hook_env(tmp_path, url, MEMORY_PROJECT=project, MEMORY_HOOK_BUDGET_S="10"))
    assert fact in run.stdout, (run, hook_log(tmp_path))
    assert hook_log(tmp_path)[-1]["outcome"] == "injected"


def test_a_store_behind_a_long_writer_is_spooled_without_a_back_off(service: Service,
                                                                    tmp_path: Path) -> None:
    """A write that waits on the store's write lock (a purge or an import holds it) past the
    bound is spooled; the service still answers, so the reads go on, at once."""
    project = "proxy-long-writer"
    fact = "The egret deploys freeze on the last Friday of each quarter"
    with service.client() as http:
        assert http.post("/ingest", json={"content": fact, "project": project}
                         ).json()["status"] == "new"

    async def main() -> None:
        async with proxy_session(tmp_path, service.url, MEMORY_PROJECT=project,
                                 MEMORY_MCP_PROXY_TIMEOUT_S=str(BOUND_S)
                                 ) as session:
            with write_lock_held(service.tmp / "memory.db"):
                stored = await call(session, "memory_store", {
                    "content": "The egret freeze lifts on the first Monday", "project": project})
                assert stored["status"] == "spooled", stored
                assert "the service is up, only slow" in stored["reason"], stored
                found = await call(session, "memory_recall", {"query": "egret deploy freeze",
                                                               "project": project})
                assert [i["content"] for i in found["items"]] == [fact]

    anyio.run(main)
    assert not (tmp_path / "hooks.backoff.json").exists()
    assert len(spooled(tmp_path)) == 1


# --- what the SDK's stdio reader would drop -------------------------------------------------------


def exchange(command: list[str], env: dict[str, str], messages: list[dict[str, Any]]
             ) -> dict[Any, dict[str, Any]]:
    """Write `messages` (raw JSON lines, as an agent would) to a stdio MCP server and read its
    answers until every request has one. A watchdog kills a server that leaves one
    unanswered (the agent would wait for ever), so the test fails rather than hangs."""
    wanted = {m["id"] for m in messages if "id" in m}
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    answers: dict[Any, dict[str, Any]] = {}
    try:
        assert proc.stdin and proc.stdout
        # json.dumps writes a lone surrogate as the escape an agent sends: "\ud800"
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        while not wanted <= answers.keys() and (line := proc.stdout.readline()):
            reply = json.loads(line)
            answers[reply.get("id")] = reply
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    return answers


@pytest.mark.parametrize("server", ["--stdio", "proxy"])
def test_a_lone_surrogate_in_a_call_is_answered(server: str, service: Service,
                                                 tmp_path: Path) -> None:
    """`"x \\ud800 y"` in a tool call's arguments (an emoji cut in half) made the SDK's stdio
    reader drop the message unanswered, so the agent waited for ever (over HTTP it is a
    -32700). It is read as the hooks read their input: U+FFFD in its place."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    project = f"surrogates{server}"

    def tool(id_: int, name: str, **arguments: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                "params": {"name": name, "arguments": {**arguments, "project": project}}}

    answers = exchange([*memory_mcp_command(), server], service_env(
        tmp_path, MEMORY_PLUGIN_URL=service.url, MEMORY_DB_PATH=str(service.tmp / "memory.db"),
        MEMORY_PROJECT=project),
        [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"},
         tool(2, "memory_store", content="half emoji \ud83d here in the heron notes"),
         tool(3, "memory_recall", query="heron \ud800 notes"),
         {"jsonrpc": "2.0", "id": 4, "method": "ping"}])
    assert set(answers) == {1, 2, 3, 4}, answers
    stored = answers[2]["result"]
    assert stored["isError"] is False and stored["structuredContent"]["status"] == "new"
    assert answers[3]["result"]["isError"] is False
    with service.client() as client:
        listed = client.get("/api/memories", params={"project": project}).json()["items"]
    assert [m["content"] for m in listed] == ["half emoji \ufffd here in the heron notes"]


# --- the agent closes stdin right after a call ------------------------------------------------


INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def send_and_close(command: list[str], env: dict[str, str], messages: list[dict[str, Any]],
                   cwd: Path) -> dict[Any, dict[str, Any]]:
    """Write `messages` and close stdin at once, as an agent that ends right after its last
    call does (the proxy's SDK still loading); the answers by id, once the server exited."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    out, _ = proc.communicate(b"".join(json.dumps(m).encode() + b"\n" for m in messages),
                              timeout=120)
    assert proc.returncode == 0
    return {reply.get("id"): reply for reply in map(json.loads, out.splitlines())}


def store_call(id_: int, content: str, project: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {
        "name": "memory_store", "arguments": {"content": content, "project": project}}}


@pytest.mark.parametrize("up", [True, False], ids=["service up", "service down"])
def test_a_store_sent_just_before_stdin_closes_is_not_lost(up: bool, service: Service,
                                                          tmp_path: Path) -> None:
    """The proxy exited at once when the agent closed stdin while its SDK was still loading,
    and a memory_store already forwarded was lost (neither stored nor spooled). It waits for
    the SDK to answer: the write is stored (or spooled once), and answered."""
    project = f"eof-{up}"
    content = f"The kestrel batch job closes its ledger at midnight UTC ({project})"
    url = service.url if up else f"http://127.0.0.1:{closed_port()}"
    answers = send_and_close(
        [*memory_mcp_command(), "proxy"],
        service_env(tmp_path, MEMORY_PLUGIN_URL=url, MEMORY_MCP_PROXY_TIMEOUT_S="30",
                    MEMORY_PROJECT=project),
        [INITIALIZE, INITIALIZED, store_call(1, content, project)], tmp_path)
    status = answers[1]["result"]["structuredContent"]["status"]
    with service.client() as client:
        stored = client.get("/api/memories", params={"project": project}).json()["items"]
    if up:
        assert status == "new" and [m["content"] for m in stored] == [content]
        assert spooled(tmp_path) == []
    else:
        assert status == "spooled" and stored == []
        [record] = spooled(tmp_path)
        assert content in record.read_text()


def test_stdio_answers_what_it_read_before_stdin_closed(tmp_path: Path) -> None:
    """`--stdio` cancelled the calls still running when stdin closed: four stores sent at once
    were all stored, only the first answered. Each is answered now."""
    project = "stdio-eof"
    stores = [store_call(i, f"The osprey queue drains shard {i} first", project)
              for i in range(1, 5)]
    answers = send_and_close([*memory_mcp_command(), "--stdio"],
                             service_env(tmp_path, MEMORY_PROJECT=project),
                             [INITIALIZE, INITIALIZED, *stores], tmp_path)
    assert {i: answers[i]["result"]["structuredContent"]["status"] for i in range(1, 5)} == {
        i: "new" for i in range(1, 5)}


# --- something else answers at the service's URL ------------------------------------------------


#: What another server at the service's URL answers every request: (status, type, body).
FOREIGN = {
    "json of another shape": (200, "application/json", b'{"items": 5, "count": "x", "status": null}'),
    "a JSON list": (200, "application/json", b"[1, 2, 3]"),
    "a plain-text 500": (500, "text/plain", b"Internal Server Error"),
    "another JSON 404": (404, "application/json", b'{"detail": "Not Found"}'),
}


@contextmanager
def foreign_server(status: int, kind: str, body: bytes) -> Iterator[str]:
    """The URL of an HTTP server that is not the memory service (a stale discovery file, a
    port reused): it answers every request `status` with `body`."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(status)
            self.send_header("content-type", kind)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = do_DELETE = do_HEAD = answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("what", list(FOREIGN))
def test_another_server_at_the_url_is_not_the_memory_service(what: str, tmp_path: Path) -> None:
    """The proxy took any JSON object for the service's answer: memory_store reported a
    foreign `{"items": 5, …}` as its result (nothing stored, nothing spooled), the reads
    failed with a bare "Error executing tool" and a 369-line traceback, and error texts quoted
    the raw HTTP answer, headers and all. The write is spooled now, the reads say in one line
    that this is not the memory service, and the log holds no traceback."""
    content = "The plover service pins its TLS roots in the image"

    async def main(url: str) -> None:
        async with proxy_session(tmp_path, url, MEMORY_PROJECT="x") as session:
            stored = await call(session, "memory_store", {"content": content, "project": "x"})
            assert stored["status"] == "spooled", stored
            for name, args in [("memory_recall", {"query": "plover"}), ("memory_list", {}),
                               ("memory_stats", {}), ("memory_forget", {"uid": "abc"}),
                               ("memory_update", {"uid": "abc", "content": "new text"})]:
                message = await call_error(session, name, args)
                assert "the memory service is unavailable" in message, (name, message)
                assert "not the memory service" in message, (name, message)
                assert "HTTP/1" not in message and "\r" not in message and "\n" not in message
                assert "Server:" not in message and "content-type" not in message

    with foreign_server(*FOREIGN[what]) as url:
        anyio.run(main, url)
    [record] = spooled(tmp_path)
    assert content in record.read_text()
    log = (tmp_path / "proxy-stderr.log").read_text()
    assert "Traceback" not in log and "╭" not in log and "raised an" not in log, log
