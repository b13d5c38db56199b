"""Helpers for the service tests: start a real `memory-mcp` process on 127.0.0.1, port 0.

(No tests here; the `test_` prefix only keeps it beside the modules that import it.)
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession, LoggingFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

LISTENING = "MEMORY_MCP_LISTENING "
START_TIMEOUT_S = 30.0


def memory_mcp_command() -> list[str]:
    script = Path(sys.executable).with_name("memory-mcp")
    if script.exists():
        return [str(script)]
    found = shutil.which("memory-mcp")
    if found:
        return [found]
    return [sys.executable, "-c", "from semantic_memory.cli import main; main()"]


def service_env(tmp: Path, **overrides: str) -> dict[str, str]:
    """A clean environment: no MEMORY_* from the caller's shell, db in `tmp`, port 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "memory.db"), MEMORY_PORT="0", MEMORY_DEVICE="cpu",
               PYTHONUNBUFFERED="1")
    env.update(overrides)
    return env


@dataclass
class Service:
    proc: subprocess.Popen[str]
    info: dict[str, Any]
    tmp: Path
    token: str | None = None
    stdout_rest: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.info["url"]

    @property
    def mcp_url(self) -> str:
        return self.info["mcp_url"]

    def client(self, token: str | None | bool = True, **kwargs: Any) -> httpx2.Client:
        """An HTTP client; token=True uses the service's own token (if any)."""
        token = self.token if token is True else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.stdout_rest.extend(self.proc.stdout.read().splitlines())
            self.proc.stdout.close()
        return self.proc.returncode

    def stderr(self) -> str:
        return (self.tmp / "stderr.log").read_text(errors="replace")


def start_service(tmp: Path, *args: str, fd_limit: int | None = None, **env: str) -> Service:
    """Spawn `memory-mcp [args]` and wait for its MEMORY_MCP_LISTENING line; `fd_limit` caps
    its open files (soft and hard), as a small `ulimit -n` would."""
    tmp.mkdir(parents=True, exist_ok=True)
    environment = service_env(tmp, **env)
    stderr = open(tmp / "stderr.log", "w")

    def limit_fds() -> None:
        import resource

        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    proc = subprocess.Popen([*memory_mcp_command(), *args], env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=stderr, stdin=subprocess.DEVNULL,
                            preexec_fn=limit_fds if fd_limit is not None else None)
    stderr.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    assert proc.stdout is not None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            proc.kill()
            proc.wait()
            raise RuntimeError("memory-mcp did not start: "
                               + (tmp / "stderr.log").read_text(errors="replace")[-2000:])
        ready, _, _ = select.select([proc.stdout], [], [], remaining)
        if not ready:
            continue
        line = proc.stdout.readline()
        if line.startswith(LISTENING):
            info = json.loads(line[len(LISTENING):])
            return Service(proc, info, tmp, environment.get("MEMORY_TOKEN") or None)
        if not line and proc.poll() is not None:
            continue


def stored(service: Service, content: str, **fields: object) -> str:
    """The uid of a new memory stored through the service's /ingest."""
    with service.client() as http:
        response = http.post("/ingest", json={"content": content, **fields})
        assert response.json()["status"] == "new", response.text
        return response.json()["uid"]


def wait_gone(path: Path, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not path.exists():
            return True
        time.sleep(0.05)
    return not path.exists()


@asynccontextmanager
async def http_session(url: str, token: str | None = None,
                       logging_callback: LoggingFnT | None = None
                       ) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1],
                                 logging_callback=logging_callback) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def stdio_session(tmp: Path, logging_callback: LoggingFnT | None = None,
                        cwd: Path | None = None, **env: str) -> AsyncIterator[ClientSession]:
    """A client of `memory-mcp --stdio` with its db in `tmp`, started in `cwd` (the agent's
    working folder, whose .semantic-memory.toml binds the tools; default `tmp`)."""
    command = memory_mcp_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--stdio"],
                                   env=service_env(tmp, **env), cwd=cwd or tmp)
    with open(tmp / "stdio-stderr.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:
            async with ClientSession(streams[0], streams[1],
                                     logging_callback=logging_callback) as session:
                await session.initialize()
                yield session


class Writer(threading.Thread):
    """Posts /ingest to `service`, one memory at a time (`text(n)`, n counting from `start`,
    project "qa"), until stopped: writes going on while a test's command runs."""

    def __init__(self, service: Service, start: int, text: Callable[[int], str]) -> None:
        super().__init__(daemon=True)
        self.service, self.next, self.text = service, start, text
        self.stopping = threading.Event()

    def run(self) -> None:
        with self.service.client() as http:
            while not self.stopping.is_set():
                answer = http.post("/ingest", json={"content": self.text(self.next),
                                                    "project": "qa"})
                assert answer.json()["status"] == "new", answer.text
                self.next += 1

    def wait_for(self, writes: int) -> None:
        """Until `writes` more memories were stored (the writer is under way)."""
        goal = self.next + writes
        while self.next < goal and self.is_alive():
            time.sleep(0.01)
