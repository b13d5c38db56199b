"""A test kit for plugin authors (and this project's own tests): an engine with chosen plugins
on a real SQLite file, a live service on a random port, and a hook run as a harness runs it.

Installed as a pytest plugin (`pytest11` entry point), so a plugin's own repository gets the
fixtures `memory_engine`, `memory_service` and `memory_hook` with no conftest. The helpers
also work without pytest. Nothing is imported until a fixture is used.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .pipeline import MemoryEngine

#: The line a service prints once it answers (service/runner.py).
LISTENING = "MEMORY_MCP_LISTENING "


def engine_with(db_dir: Path, *plugins: Any, **settings: Any) -> MemoryEngine:
    """A `MemoryEngine` on `db_dir/memory.db` with `plugins` (modules or objects with
    `@hookimpl` methods) registered beside the installed ones; `settings` are `Settings`
    fields (e.g. `plugins="bm25_porter"` to load only that installed plugin). A plugin that is
    also installed (`pip install -e .`) is not registered twice."""
    from .config import Settings
    from .pipeline import MemoryEngine

    db_dir.mkdir(parents=True, exist_ok=True)
    chosen = {"db_path": str(db_dir / "memory.db"), **settings}
    return MemoryEngine(Settings(**chosen), plugins=list(plugins))


def memory_mcp() -> list[str]:
    """The `memory-mcp` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("memory-mcp")
    if script.exists():
        return [str(script)]
    found = shutil.which("memory-mcp")
    return [found] if found else [sys.executable, "-m", "semantic_memory"]


def clean_env(db_dir: Path, **env: str) -> dict[str, str]:
    """The caller's environment without its MEMORY_* settings, the db in `db_dir`, port 0."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    out.update(MEMORY_DB_PATH=str(db_dir / "memory.db"), MEMORY_PORT="0",
               PYTHONUNBUFFERED="1", **env)
    return out


@dataclass
class LiveService:
    """A `memory-mcp` service process listening on 127.0.0.1 at a random port."""

    proc: subprocess.Popen[str]
    url: str
    env: dict[str, str]

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30
                ) -> tuple[int, Any]:
        """(status, decoded JSON body) of one REST call."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - 127.0.0.1
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def stop(self, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode


def start_service(db_dir: Path, timeout: float = 60, **env: str) -> LiveService:
    """Start `memory-mcp` (MCP + REST) on a random port with `env` (MEMORY_* settings) and
    wait until it answers; raises RuntimeError with its stderr when it does not start."""
    db_dir.mkdir(parents=True, exist_ok=True)
    environment = clean_env(db_dir, **env)
    log = db_dir / "service.stderr"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(memory_mcp(), env=environment, text=True, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=stderr)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
        line = proc.stdout.readline() if ready else ""
        if line.startswith(LISTENING):
            info = json.loads(line[len(LISTENING):])
            environment["MEMORY_PLUGIN_URL"] = info["url"]
            return LiveService(proc, info["url"], environment)
    proc.kill()
    proc.wait()
    raise RuntimeError("memory-mcp did not start: " + log.read_text(errors="replace")[-2000:])


def run_hook(harness: str, event: str, payload: dict[str, Any], env: dict[str, str],
             timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`memory-mcp hook HARNESS EVENT` with `payload` as its JSON stdin, as the harness runs
    it; `env` usually is `LiveService.env` (it points the hook at that service)."""
    return subprocess.run([*memory_mcp(), "hook", harness, event], input=json.dumps(payload),
                          env=env, text=True, capture_output=True, timeout=timeout)


# --- pytest fixtures (entry point `pytest11`) ------------------------------------------------

@pytest.fixture
def memory_engine(tmp_path: Path) -> Iterator[Callable[..., MemoryEngine]]:
    """A factory: `memory_engine(*plugins, **settings)` → an engine on a fresh SQLite file in
    `tmp_path`, closed after the test."""
    opened: list[MemoryEngine] = []

    def make(*plugins: Any, **settings: Any) -> MemoryEngine:
        engine = engine_with(tmp_path / f"engine{len(opened)}", *plugins, **settings)
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()


@pytest.fixture
def memory_service(tmp_path: Path) -> Iterator[Callable[..., LiveService]]:
    """A factory: `memory_service(**MEMORY_env)` → a live service on a random port (stopped
    after the test); `.request(method, path, body)` talks to its REST API."""
    started: list[LiveService] = []

    def make(**env: str) -> LiveService:
        service = start_service(tmp_path / f"service{len(started)}", **env)
        started.append(service)
        return service

    yield make
    for service in started:
        service.stop()


@pytest.fixture
def memory_hook() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`memory_hook(harness, event, payload, service.env)` runs one hook process."""
    return run_hook
