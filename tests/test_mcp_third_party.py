"""A third-party MCP client's view of the service (QA report of the MCP surface), against real
`memory-mcp` processes over real sockets and pipes: a reconnecting GET stream with
`Last-Event-ID`, concurrent `initialize`s at the session cap and the refusal log line, a
write outliving stdin, the `recall` prompt's blank project and kind, `content_chars`,
invisible-only content, and instructions in a repository that turns tools off."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import re
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from semantic_memory.config import Settings
from semantic_memory.errors import InvalidMemory
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.service.mcp_front import CACHE_NAME
from semantic_memory.service.mcp_server import STDIO_EOF_WAIT_S
from test_mcp_proxy_start import wait_filled
from test_service_support import Service, memory_mcp_command, service_env, start_service

ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": PROTOCOL, "capabilities": {},
    "clientInfo": {"name": "third-party", "version": "1"}}}


def open_session(client: httpx2.Client) -> str:
    """A new initialized session's id."""
    answer = client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
    assert answer.status_code == 200, answer.text
    session = answer.headers["mcp-session-id"]
    done = client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                       headers={"accept": ACCEPT, "mcp-session-id": session,
                                "mcp-protocol-version": PROTOCOL})
    assert done.status_code == 202, done.text
    return session


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("third-party"))
    yield svc
    svc.stop()


# --- 1. Last-Event-ID ------------------------------------------------------------------------


def test_a_get_stream_resumed_with_last_event_id_opens_a_new_stream(service: Service) -> None:
    """A client that reconnects its GET stream after a network drop sends `Last-Event-ID`; the
    SDK, without an event store, answered nothing and uvicorn sent its plain-text 500. The
    service keeps no event history: the header is ignored (the spec lets a server), and the
    GET opens a stream as a first one does."""
    with service.client() as client:
        session = open_session(client)
        headers = {"accept": "text/event-stream", "mcp-session-id": session,
                   "mcp-protocol-version": PROTOCOL, "last-event-id": "0"}
        with client.stream("GET", "/mcp", headers=headers, timeout=10) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
        ping = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                           headers={"accept": ACCEPT, "mcp-session-id": session,
                                    "mcp-protocol-version": PROTOCOL})
        assert ping.status_code == 200, ping.text
    assert "ASGI callable returned without" not in service.stderr()


# --- 2. the session cap ----------------------------------------------------------------------


def test_concurrent_initializes_at_the_cap_evict_idle_sessions(tmp_path: Path) -> None:
    """At most 5 requests are in flight, so at most 5 of the 10 sessions can be busy: every
    `initialize` must find an idle one to close. Evicting outside the SDK's admission, two
    crossing `initialize`s saw one idle session between them, and one got `503 Too many
    open sessions` (a few in 400)."""
    svc = start_service(tmp_path, MEMORY_MCP_MAX_SESSIONS="10")
    try:
        with svc.client() as warm:
            open_session(warm)
        local = threading.local()

        def initialize(_: int) -> int:
            if not hasattr(local, "client"):
                local.client = svc.client()
            answer = local.client.post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
            return answer.status_code

        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            statuses = collections.Counter(pool.map(initialize, range(400)))
    finally:
        svc.stop()
    assert statuses == {200: 400}, statuses
    assert "Refusing to open" not in svc.stderr()


def test_a_refusal_at_the_cap_is_one_counted_line(tmp_path: Path) -> None:
    """With every session busy (each holds a GET stream), an `initialize` gets the 503 as
    JSON; the log says it in one line of the service's own, not the SDK's four-line warning
    per refusal."""
    svc = start_service(tmp_path, MEMORY_MCP_MAX_SESSIONS="2")
    streams = []
    try:
        with svc.client() as client:
            for _ in range(2):
                session = open_session(client)
                stream = client.stream("GET", "/mcp", headers={
                    "accept": "text/event-stream", "mcp-session-id": session,
                    "mcp-protocol-version": PROTOCOL})
                assert stream.__enter__().status_code == 200
                streams.append(stream)
            for _ in range(3):
                answer = svc.client().post("/mcp", json=INITIALIZE, headers={"accept": ACCEPT})
                assert answer.status_code == 503
                assert json.loads(answer.text)["error"]["message"] == "Too many open sessions"
            for stream in streams:
                stream.__exit__(None, None, None)
    finally:
        svc.stop()
    log = svc.stderr()
    assert "Refusing to open" not in log
    counts = [int(m[1]) for m in re.finditer(r"refused (\d+) new MCP session", log)]
    assert counts[0] == 1 and sum(counts) == 3, log


# --- 3. a write that outlives its client's stdin ---------------------------------------------


def stdio_server(tmp: Path, cwd: Path | None = None, how: str = "--stdio"
                 ) -> subprocess.Popen[bytes]:
    """`memory-mcp --stdio` (or `proxy`) on raw pipes, initialized; its db in `tmp`."""
    proc = subprocess.Popen([*memory_mcp_command(), how], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=service_env(tmp), cwd=cwd or tmp)
    send(proc, INITIALIZE)
    assert proc.stdout is not None
    proc.initialized = json.loads(proc.stdout.readline())  # type: ignore[attr-defined]
    send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def call(proc: subprocess.Popen[bytes], request_id: int, name: str, **arguments: Any
         ) -> dict[str, Any]:
    send(proc, {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
    assert proc.stdout is not None
    while True:
        answer = json.loads(proc.stdout.readline())
        if answer.get("id") == request_id:
            return answer


def test_a_store_waiting_on_the_lock_at_stdin_eof_is_answered_with_its_result(
        tmp_path: Path) -> None:
    """The agent closes stdin while memory_store waits on SQLite's write lock for longer than
    the 10 s given to answers: it was answered -32000 "Connection closed" though it is
    stored (the process waited for the write anyway). It is answered with what became of it,
    and the process ends right after."""
    proc = stdio_server(tmp_path)
    try:
        assert call(proc, 2, "memory_store", content="warm the store up")["result"]
        lock = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # another writer (an import, a purge)
        send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "memory_store", "arguments": {"content": "stored at the end of input"}}})
        time.sleep(0.5)
        assert proc.stdin is not None
        proc.stdin.close()
        time.sleep(STDIO_EOF_WAIT_S + 2)
        lock.execute("COMMIT")
        released = time.monotonic()
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        proc.wait(30)
        ended = time.monotonic() - released
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    answer = json.loads(out.strip().splitlines()[-1])
    assert answer["id"] == 3 and answer["result"]["structuredContent"]["status"] == "new", out
    assert ended < STDIO_EOF_WAIT_S / 2  # promptly once the write is done
    rows = sqlite3.connect(tmp_path / "memory.db").execute(
        "select count(*) from memories where content = 'stored at the end of input'")
    assert rows.fetchone()[0] == 1


# --- 4-7. prompt, results, content, instructions ---------------------------------------------


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "remote", "add", "origin", "https://github.com/acme/web.git"],
                   cwd=path, check=True)
    return path


def prompt(proc: subprocess.Popen[bytes], request_id: int, **arguments: Any) -> dict[str, Any]:
    send(proc, {"jsonrpc": "2.0", "id": request_id, "method": "prompts/get",
                "params": {"name": "recall", "arguments": arguments}})
    assert proc.stdout is not None
    while True:
        answer = json.loads(proc.stdout.readline())
        if answer.get("id") == request_id:
            return answer


def stop(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(30)


def test_the_recall_prompt_reads_a_blank_project_as_left_out_and_checks_kind(
        tmp_path: Path) -> None:
    """`project: " "` recalled the global memories alone (the docs: blank is left out, the
    repository's project over --stdio); a bad `kind` answered "nothing is relevant" where
    memory_recall refuses it."""
    proc = stdio_server(tmp_path, git_repo(tmp_path / "repo"))
    try:
        assert call(proc, 2, "memory_store",
                    content="Deploys of the web app go through Argo CD")["result"]
        texts = [prompt(proc, 10 + n, task="deploys argo", **given)["result"]["messages"][0]
                 ["content"]["text"] for n, given in enumerate(
                     ({}, {"project": ""}, {"project": "  "}, {"kind": " "}))]
        assert all(text.startswith("Memories recalled") for text in texts), texts
        refused = prompt(proc, 20, task="deploys argo", kind="bad kind!")
        assert refused["error"]["code"] == -32602 and "kind" in refused["error"]["message"]
    finally:
        stop(proc)


def test_content_chars_is_the_memorys_own_length(tmp_path: Path) -> None:
    """A 100,000-character memory holding `</memory>` was reported as 115,789 characters
    (the escaped text's length), over the configured maximum."""
    content = ("see </memory> here " * 6000)[:100_000]
    proc = stdio_server(tmp_path)
    try:
        assert call(proc, 2, "memory_store", content=content)["result"]
        for n, (name, arguments) in enumerate((
                ("memory_recall", {"query": "see here", "budget_chars": 300}),
                ("memory_recall", {"query": "see here"}), ("memory_list", {}))):
            result = call(proc, 3 + n, name, **arguments)["result"]["structuredContent"]
            item = result["items"][0]
            assert item["truncated"] and item["content_chars"] == 100_000, (name, arguments)
    finally:
        stop(proc)


@pytest.mark.parametrize("content", ["\u200b\u2060\u200b", "\u200b \ufeff\u00ad", "\x1b[0m"])
def test_invisible_only_content_is_refused_like_blank_content(content: str,
                                                              tmp_path: Path) -> None:
    """Spaces alone were refused, zero-width characters alone were stored: every injection
    block drops them, so the memory showed up empty and took a recall slot."""
    engine = MemoryEngine(Settings.from_env({"MEMORY_DB_PATH": str(tmp_path / "m.db")}))
    try:
        with pytest.raises(InvalidMemory, match="content: must not be empty"):
            engine.store_one(NewMemory(content))
        uid = engine.store_one(NewMemory("a visible memory")).uid
        with pytest.raises(InvalidMemory, match="content: must not be empty"):
            engine.update(uid, content=content)
    finally:
        engine.close()


@pytest.mark.parametrize("how", ["--stdio", "proxy"])
def test_stdio_instructions_leave_out_the_tools_the_repository_turned_off(
        tmp_path: Path, how: str) -> None:
    """With `[recall]` and `[capture] enabled = false`, the instructions still said to call
    memory_recall at a task's start and memory_store on a decision: each call an error. The
    proxy (what `install` registers) says the same, from its cache or its SDK."""
    repo = git_repo(tmp_path / "repo")
    (repo / ".semantic-memory.toml").write_text(
        "[recall]\nenabled = false\n[capture]\nenabled = false\n")
    if how == "proxy":  # its answer from the cache, as every start after the first
        stop(stdio_server(tmp_path, repo, how))
        wait_filled(tmp_path / CACHE_NAME)
    proc = stdio_server(tmp_path, repo, how)
    try:
        text = proc.initialized["result"]["instructions"]  # type: ignore[attr-defined]
    finally:
        stop(proc)
    assert "Call memory_recall" not in text and "call memory_store" not in text.lower(), text
    assert "turns recall and capture off" in text


def test_an_sdk_without_its_session_table_keeps_its_own_bound(tmp_path: Path) -> None:
    """Making room at the cap reaches into the SDK's session manager (it has no public way):
    on an SDK that renamed those parts, nothing is patched (the SDK's own 503 at the cap
    stays) rather than the MCP endpoint failing to build."""
    import types

    from semantic_memory.service.app import LazyMCP

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter"))
    try:
        lazy = LazyMCP(engine, engine.settings)
        renamed = types.SimpleNamespace(_admit_session=lambda requestor: None)
        with pytest.raises(AttributeError):
            lazy.admit_with_room(renamed)
        assert renamed._admit_session(None) is None  # left as the SDK made it
    finally:
        engine.close()
