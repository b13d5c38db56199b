"""`memory-mcp doctor` tells a service that is down from a port something else holds. Before,
a port held by a program that accepts connections and closes them (or answers HTML) got
"NOT REACHABLE — service down … start it with `memory-mcp` (or set MEMORY_PLUGIN_AUTOSTART=1)",
even with autostart set, though a service started there would only fail to bind. Now it names
the port as held and says how to find the holder and move off it; another OS user's listener
gets its own line; autostart is never suggested where it is set. Real CLI subprocesses, real
listeners in processes of their own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harness_support import closed_port, hook_env
from test_other_users import squatter, stop_squatter
from test_service_support import memory_mcp_command

#: A program that is not the service: it listens on a free loopback port, prints it, and
#: answers each connection its way: closes it at once, or sends an HTML page.
HOLDER = """
import socket, sys
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1], flush=True)
while True:
    conn = server.accept()[0]
    if sys.argv[1] == "html":
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 404 Not Found\\r\\nContent-Type: text/html\\r\\n"
                     b"Content-Length: 13\\r\\n\\r\\n<p>nope</p>\\r\\n")
    conn.close()
"""
AUTOSTART_TIP = "set MEMORY_PLUGIN_AUTOSTART=1"


@contextmanager
def holder(answer: str) -> Iterator[int]:
    """The port of a program (a process of its own) that holds it and is not the service."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, answer], stdout=subprocess.PIPE,
                               text=True)
    try:
        yield int(process.stdout.readline())  # type: ignore[union-attr]
    finally:
        process.kill()
        process.wait()


def doctor(tmp_path: Path, port: int, **extra: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp doctor` with the service configured at `port` and no harness configs."""
    (tmp_path / "home").mkdir(exist_ok=True)
    env = hook_env(tmp_path, None, MEMORY_PORT=str(port), CODEX_HOME=str(tmp_path / "codex"),
                   KIMI_CODE_HOME=str(tmp_path / "kimi"), XDG_CONFIG_HOME=str(tmp_path / "xdg"),
                   CLAUDE_CONFIG_DIR="", **extra)
    return subprocess.run([*memory_mcp_command(), "doctor"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def service_lines(done: subprocess.CompletedProcess[str]) -> str:
    """The service's line and its advice (the lines before the hook log's)."""
    return done.stdout.split("hook log")[0]


@pytest.mark.parametrize("answer", ["close", "html"])
@pytest.mark.parametrize("autostart", ["0", "1"])
def test_a_port_another_program_holds_is_named_as_held(tmp_path: Path, answer: str,
                                                       autostart: str) -> None:
    with holder(answer) as port:
        done = doctor(tmp_path, port, MEMORY_PLUGIN_AUTOSTART=autostart)
    said = service_lines(done)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "NOT REACHABLE — another program listens there" in said, said
    assert "service down" not in said and "start it with" not in said
    assert f"port {port} is held by another program, not the memory service" in said
    assert f"`ss -ltnp 'sport = :{port}'` or `lsof -i :{port}`" in said
    assert "MEMORY_PORT=0 memory-mcp" in said and "MEMORY_PLUGIN_URL=" in said
    assert AUTOSTART_TIP not in said and "MEMORY_PLUGIN_AUTOSTART=1 starts" not in said


def test_a_port_pinned_by_the_plugin_url_says_to_move_that_url(tmp_path: Path) -> None:
    with holder("close") as port:
        done = doctor(tmp_path, closed_port(), MEMORY_PLUGIN_URL=f"http://127.0.0.1:{port}")
    said = service_lines(done)
    assert f"port {port} is held by another program" in said, said
    assert "point MEMORY_PLUGIN_URL at a free port N and start `MEMORY_PORT=N memory-mcp`" in said


def test_a_service_that_is_down_gets_autostart_advice_only_when_it_is_off(tmp_path: Path) -> None:
    port = closed_port()
    off = service_lines(doctor(tmp_path, port))
    assert "service down" in off and f"start it with `memory-mcp` (or {AUTOSTART_TIP})" in off
    on = service_lines(doctor(tmp_path, port, MEMORY_PLUGIN_AUTOSTART="1"))
    assert "service down" in on and AUTOSTART_TIP not in on, on
    assert "MEMORY_PLUGIN_AUTOSTART is on here: the next session start starts one" in on


@pytest.mark.parametrize("autostart", ["0", "1"])
def test_another_users_listener_gets_its_own_line(tmp_path: Path, autostart: str) -> None:
    squatting, port = squatter()
    try:
        done = doctor(tmp_path, port, MEMORY_PLUGIN_AUTOSTART=autostart)
    finally:
        sent = stop_squatter(squatting)
    said = service_lines(done)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert sent == 0  # doctor sent it nothing either
    assert "NOT REACHABLE — another user's process listens there (nobody, uid 65534)" in said
    assert (f"port {port} is held by another user's process (nobody, uid 65534): this user's "
            "hooks do not use it; start your own: ") in said, said
    if autostart == "1":
        assert AUTOSTART_TIP not in said and "MEMORY_PLUGIN_AUTOSTART=1 starts" not in said
        assert "MEMORY_PLUGIN_AUTOSTART is on: the next session start starts one on a free port" \
            in said
    else:
        assert "MEMORY_PLUGIN_AUTOSTART=1 starts one on a free port" in said
