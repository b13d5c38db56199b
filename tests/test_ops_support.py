"""Helpers for the operating tests (test_ops_*.py): the real `memory-mcp` CLI and service
started under a limit a user meets (a small `ulimit -v`, a folder this user may not write).

(No tests here; the `test_` prefix only keeps it beside the modules that import it.)
"""

from __future__ import annotations

import json
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lock_support import _without_capabilities
from test_service_support import (
    LISTENING,
    START_TIMEOUT_S,
    Service,
    memory_mcp_command,
    service_env,
)

Preexec = Callable[[], None]

#: Runs in the child before exec: without root's capabilities, so a folder's mode binds a
#: root test run as it binds any user (lock_support's, for the CLI and the service alike).
as_anyone: Preexec = _without_capabilities


def address_space(limit: int) -> Preexec:
    """A child under `ulimit -v` of `limit` bytes (RLIMIT_AS, soft and hard)."""

    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def run_cli(tmp: Path, *args: str, preexec: Preexec | None = None, stdin: str | None = None,
            **env: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` with its db in `tmp` (service_env), `preexec` run in the child."""
    return subprocess.run([*memory_mcp_command(), *args], env=service_env(tmp, **env),
                          input=stdin, text=True, capture_output=True, timeout=120,
                          preexec_fn=preexec)


def start(tmp: Path, *args: str, preexec: Preexec | None = None, **env: str) -> Service:
    """`memory-mcp [args]` as test_service_support's `start_service` starts it, with `preexec`
    run in the child; waits for its MEMORY_MCP_LISTENING line."""
    tmp.mkdir(parents=True, exist_ok=True)
    environment = service_env(tmp, **env)
    with open(tmp / "stderr.log", "w") as stderr:
        proc = subprocess.Popen([*memory_mcp_command(), *args], env=environment, text=True,
                                stdout=subprocess.PIPE, stderr=stderr,
                                stdin=subprocess.DEVNULL, preexec_fn=preexec)
    assert proc.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if not select.select([proc.stdout], [], [], 0.2)[0]:
            continue
        line = proc.stdout.readline()
        if line.startswith(LISTENING):
            return Service(proc, json.loads(line[len(LISTENING):]), tmp,
                           environment.get("MEMORY_TOKEN") or None)
    proc.kill()
    proc.wait()
    raise RuntimeError("memory-mcp did not start: "
                       + (tmp / "stderr.log").read_text(errors="replace")[-2000:])


def wait_for(predicate: Callable[[], object], timeout: float = 30) -> bool:
    """Whether `predicate` held within `timeout` seconds (a bound for a hung test, not a
    measurement)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return bool(predicate())
