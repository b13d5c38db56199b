"""`memory-mcp proxy` start-up as a one-shot agent meets it: `codex exec` waits ~1.5 s for its
MCP server, then runs its turn without it and ends the proxy (SIGTERM). The proxy answers what
an agent asks at start (initialize for any protocol version, the four listings) from its
cache without the SDK, and that cache is filled by a process the agent's end does not end; the
front reaches its first read without importlib.metadata."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from test_service_support import memory_mcp_command, service_env

from semantic_memory.service.mcp_front import CACHE_NAME, LISTS

#: A loaded 2-core machine may take this long to import the SDK in the fill process.
FILL_WAIT_S = 90.0


def start(db_dir: Path, sdk_blocked: bool = False) -> subprocess.Popen[bytes]:
    """The proxy; `sdk_blocked`: its SDK import never ends (a `mcp` package that sleeps first
    on the path), so whatever it answers comes from the cache."""
    env = service_env(db_dir, MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    if sdk_blocked:
        blocked = db_dir.parent / "sdk-blocked"
        (blocked / "mcp").mkdir(parents=True, exist_ok=True)
        (blocked / "mcp" / "__init__.py").write_text("import time\ntime.sleep(3600)\n")
        env["PYTHONPATH"] = str(blocked)
    return subprocess.Popen([*memory_mcp_command(), "proxy"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                            cwd=db_dir)


def send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the proxy closed stdout"
    return json.loads(line)


def initialize(version: str, request_id: int = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "codex-mcp-client", "version": "0.171.0"}}}


def start_up(db_dir: Path, version: str, sdk_blocked: bool = False
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(initialize's answer, the listings' answers by method)."""
    proc = start(db_dir, sdk_blocked)
    try:
        send(proc, initialize(version))
        initialized = answer(proc)
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = {}
        for n, method in enumerate(LISTS, start=1):
            send(proc, {"jsonrpc": "2.0", "id": n, "method": method})
            reply = answer(proc)
            assert reply["id"] == n, reply
            listed[method] = reply
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(30)
    return initialized, listed


def wait_filled(cache: Path) -> dict[str, Any]:
    deadline = time.monotonic() + FILL_WAIT_S
    while time.monotonic() < deadline:
        try:
            data = json.loads(cache.read_text())
        except (OSError, ValueError):
            data = {}
        if "handshake" in data and not (cache.parent / f".{CACHE_NAME}.filling").exists():
            return data
        time.sleep(0.2)
    raise AssertionError(f"{cache} was not filled within {FILL_WAIT_S} s")


def test_a_proxy_ended_at_once_still_leaves_every_start_up_answer_cached(tmp_path: Path
                                                                         ) -> None:
    """As `codex exec` does when the SDK loads slower than it waits: initialize sent, no
    answer yet, SIGTERM. The next start answers initialize (every protocol version, an unknown
    one as the SDK does) and the four listings from the cache, the same as the SDK answers
    them, before the SDK has loaded."""
    db_dir = tmp_path / "db"
    db_dir.mkdir()
    proc = start(db_dir)
    send(proc, initialize("2025-06-18"))
    time.sleep(1.5)  # as long as `codex exec` waits; the SDK is still loading by then
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    cached = wait_filled(db_dir / CACHE_NAME)
    assert {"2025-06-18", "2025-11-25"} <= set(cached["handshake"])

    for version in ("2025-06-18", "2025-11-25", "2099-01-01"):
        initialized, listed = start_up(db_dir, version, sdk_blocked=True)
        agreed = version if version in cached["handshake"] else cached["latest"]
        assert initialized["result"]["protocolVersion"] == agreed
        assert len(listed["tools/list"]["result"]["tools"]) == 6

        # What the SDK itself answers (the cache moved aside): the same, field for field.
        (db_dir / CACHE_NAME).rename(db_dir / "kept.json")
        try:
            by_sdk, sdk_listed = start_up(db_dir, version)
        finally:
            (db_dir / CACHE_NAME).unlink(missing_ok=True)
            wait_filled_or_gone = db_dir / f".{CACHE_NAME}.filling"
            deadline = time.monotonic() + FILL_WAIT_S
            while wait_filled_or_gone.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            (db_dir / "kept.json").replace(db_dir / CACHE_NAME)
        assert initialized["result"] == by_sdk["result"]
        assert {m: r["result"] for m, r in listed.items()} == \
            {m: r["result"] for m, r in sdk_listed.items()}


def test_the_front_reads_the_agent_without_importing_importlib_metadata(tmp_path: Path
                                                                        ) -> None:
    """importlib.metadata (and the email package it pulls in) cost the front ~40 ms of CPU
    before its first answer: the versions in the cache key come from the dist-info names."""
    probe = ("import sys\n"
             "from semantic_memory.config import Settings\n"
             "from semantic_memory.service import mcp_front\n"
             "settings = Settings.from_env()\n"
             "mcp_front.cache_key(settings)\n"
             "mcp_front.workspace_instructions(settings)\n"
             "print(sorted(m for m in sys.modules if m.startswith(('importlib.metadata', "
             "'email', 'mcp'))))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=service_env(tmp_path), cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_cache_key_names_the_installed_versions(tmp_path: Path) -> None:
    from importlib.metadata import version

    from semantic_memory.service.mcp_front import installed_version

    for name in ("semantic-memory-core", "mcp"):
        assert installed_version(name) == version(name)
    assert installed_version("no-such-distribution-here") == "?"
    assert os.path.isdir(tmp_path)


def test_an_install_fills_the_cache_for_the_first_proxy(tmp_path: Path) -> None:
    """`memory-mcp install` with no service run since: it starts the detached fill, so the
    first proxy the agent starts answers every start-up request at once (its SDK import
    blocked here), as after a service ran."""
    db_dir = tmp_path / "db"
    env = service_env(db_dir, HOME=str(tmp_path / "home"))
    done = subprocess.run([*memory_mcp_command(), "install", "codex"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    cached = wait_filled(db_dir / CACHE_NAME)
    assert "2025-06-18" in cached["handshake"]
    initialized, listed = start_up(db_dir, "2025-06-18", sdk_blocked=True)
    assert initialized["result"]["protocolVersion"] == "2025-06-18"
    assert len(listed["tools/list"]["result"]["tools"]) == 6
