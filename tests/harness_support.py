"""Helpers for the harness tests: run `memory-mcp hook …` as the harness would, in a clean
environment pointing at a test service. (No tests here.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from test_service_support import Service, memory_mcp_command

REPO = Path(__file__).resolve().parent.parent
HARNESS_BIN = REPO / "tests" / "harnesses" / "node_modules" / ".bin"


def hook_env(tmp: Path, url: str | None, **extra: str) -> dict[str, str]:
    """No MEMORY_* from the caller; the hook log and discovery file live in `tmp`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "memory.db"), HOME=str(tmp / "home"))
    if url is not None:
        env["MEMORY_PLUGIN_URL"] = url
    env.update(extra)
    return env


@dataclass
class HookRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_hook(harness: str, event: str, payload: dict[str, Any] | bytes | str,
             env: dict[str, str], timeout: float = 30, cwd: Path | None = None,
             preexec_fn: Callable[[], None] | None = None) -> HookRun:
    """`memory-mcp hook HARNESS EVENT` with `payload` on stdin, in `cwd` (the agent's);
    `preexec_fn` runs in the child before exec (a resource limit)."""
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    data = data.encode() if isinstance(data, str) else data
    start = time.monotonic()
    proc = subprocess.run([*memory_mcp_command(), "hook", harness, event], input=data, env=env,
                          capture_output=True, timeout=timeout, cwd=cwd, preexec_fn=preexec_fn)
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(),
                   time.monotonic() - start)


def run_memory_mcp(env: dict[str, str], *args: str) -> str:
    """`memory-mcp ARGS` in `env`; its stdout (a failing command fails the test)."""
    done = subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def hook_log(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "hooks.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def add_turn(transcript: Path, question: str, answer: str) -> None:
    """One Claude Code exchange appended to its transcript, as the agent writes it."""
    with transcript.open("a") as out:
        out.write(json.dumps({"type": "user", "message": {"role": "user", "content": question}})
                  + "\n")
        out.write(json.dumps({"type": "assistant", "message": {
            "role": "assistant", "content": [{"type": "text", "text": answer}]}}) + "\n")


def session_end(tmp: Path, url: str, transcript: Path) -> dict[str, Any]:
    """Claude Code's SessionEnd hook for session `s1` of repository `repo` (in `tmp`); its
    hook-log line."""
    payload = {"session_id": "s1", "cwd": str(tmp / "repo"), "transcript_path": str(transcript),
               "reason": "exit"}
    # 10 s: the first write to a new PostgreSQL database, on a loaded machine
    done = run_hook("claude-code", "SessionEnd", payload,
                    hook_env(tmp, url, MEMORY_HOOK_BUDGET_S="10"), timeout=60)
    assert done.returncode == 0, done.stderr
    return hook_log(tmp)[-1]


def transcript_entry(role: str, text: str, i: int, **extra: Any) -> dict[str, Any]:
    """Line `i` of Claude Code session `cc`'s transcript, written at second `i`."""
    return {"type": role, "uuid": f"u{i}", "sessionId": "cc",
            "timestamp": f"2026-12-07T10:00:{i:02d}Z", "message": {"role": role, "content": text},
            **extra}


def write_transcript(path: Path, lines: list[dict[str, Any]]) -> Path:
    """A transcript file of `lines`, one compact JSON object a line as Claude Code writes it."""
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def claude_hook(tmp: Path, url: str, event: str, transcript: Path, project: str,
                **payload: Any) -> HookRun:
    """Claude Code's `event` hook on `transcript`, in `tmp/ws`, storing to `project` (a 10 s
    budget: a loaded machine); `payload` adds to or overrides what it sends (session `cc`).
    A hook that fails fails the test."""
    ws = tmp / "ws"
    ws.mkdir(exist_ok=True)
    done = run_hook("claude-code", event, {
        "session_id": "cc", "cwd": str(ws), "transcript_path": str(transcript),
        "hook_event_name": event, **payload},
        hook_env(tmp, url, MEMORY_HOOK_BUDGET_S="10", MEMORY_PROJECT=project), cwd=ws)
    assert done.returncode == 0, done.stderr
    return done


def stored_contents(service: Service, project: str) -> list[str]:
    """The contents the service holds for `project`, newest first (100 at most)."""
    with service.client() as client:
        return [m["content"] for m in client.get(
            "/api/memories", params={"project": project, "limit": 100}).json()["items"]]


def closed_port() -> int:
    """A port nothing listens on (bound, then closed): a service that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def hanging_server(accepted: list[socket.socket] | None = None) -> Iterator[str]:
    """The URL of a server that accepts connections and never answers: a hung service.
    `accepted`, when given, collects the connections it took (how many calls reached it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = [] if accepted is None else accepted
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()
