"""Helpers for the harness tests: run `memory-mcp hook …` as the harness would, in a clean
environment pointing at a test service. (No tests here.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from test_service_support import memory_mcp_command

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
             env: dict[str, str], timeout: float = 30) -> HookRun:
    data = payload if isinstance(payload, (bytes, str)) else json.dumps(payload)
    data = data.encode() if isinstance(data, str) else data
    start = time.monotonic()
    proc = subprocess.run([*memory_mcp_command(), "hook", harness, event], input=data, env=env,
                          capture_output=True, timeout=timeout)
    return HookRun(proc.returncode, proc.stdout.decode(), proc.stderr.decode(),
                   time.monotonic() - start)


def hook_log(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "hooks.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
