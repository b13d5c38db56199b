"""One machine, several people: each user's memories stay theirs over loopback.

Before, whatever answered on the service's port was used: a user whose own service was not
running had their hooks store into another user's store (and inject that user's memories),
and a process another user left on the port received the token, the prompts and the spooled
writes in clear, and could inject any text. Now a hook (any `ServiceClient`) sends nothing to
a loopback listener another OS user owns, and the service answers 403 to a connection another
user's process opened (`peer.owner`, the kernel's sock_diag). "Another user" here is uid
65534 (nobody): a child that drops to it after start-up, run as root directly or through
`sudo -n` (what `.ci/run` uses for its packages)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness_support import hook_env, hook_log, run_hook
from semantic_memory import peer
from test_service_support import start_service

NOBODY = 65534
#: The first lines of every child: the modules it needs, then it becomes another user.
BECOME_NOBODY = ("import os, socket\n"
                 "'x'.encode('idna')\n"  # the codec a host name needs, loaded while it can be
                 f"os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})\n")
SQUATTER = Path(__file__).with_name("squatter.py")


def as_nobody(*args: str) -> subprocess.Popen[str]:
    """`python ARGS` run by this interpreter as uid 65534 (the code drops to it after it
    starts: the interpreter's own files need not be readable by that user)."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    return subprocess.Popen([*sudo, sys.executable, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def squatter() -> tuple[subprocess.Popen[str], int]:
    """Another user's process listening on a free port, and the port."""
    process = as_nobody(str(SQUATTER))
    return process, int(process.stdout.readline())  # type: ignore[union-attr]


def stop_squatter(squatting: subprocess.Popen[str]) -> int:
    """Bytes the squatter was sent, all its connections together."""
    out, err = squatting.communicate("stop\n", timeout=30)
    assert squatting.returncode == 0, err
    return int(out.split()[-1])


def test_the_service_refuses_another_users_connection(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        with service.client() as http:
            http.post("/ingest", json={"content": "Alice's bastion host listens on port 2222"})
            assert http.get("/api/memories").json()["items"]  # its own user is served
        port = service.url.rsplit(":", 1)[1]
        other = as_nobody("-c", BECOME_NOBODY + f"""
conn = socket.create_connection(("127.0.0.1", {port}))
conn.sendall(b"GET /api/memories HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
data = b""
while chunk := conn.recv(65536):
    data += chunk
print(data.decode())
""")
        out, err = other.communicate(timeout=30)
        assert other.returncode == 0, err
        assert out.startswith("HTTP/1.1 403"), out
        assert "another user's memories" in out and "bastion" not in out
        assert "refused a connection from another user's process (uid 65534)" in \
            (tmp_path / "stderr.log").read_text()
    finally:
        service.stop()


def test_a_hook_sends_nothing_to_another_users_listener(tmp_path: Path) -> None:
    squatting, port = squatter()
    # The port as MEMORY_PORT (the default port's case: no MEMORY_PLUGIN_URL), a token set.
    env = hook_env(tmp_path, None, MEMORY_PORT=str(port), MEMORY_TOKEN="alice-secret-0123456789",
                   MEMORY_HOOK_BUDGET_S="5")
    try:
        for prompt in ("remember: the staging DB_PASSWORD=Xk9vL2pQ7mZ4 lives in vault",
                       "how do we deploy to staging?"):
            done = run_hook("claude-code", "UserPromptSubmit", {
                "session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
                "prompt": prompt}, env, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            assert "IMPORTANT SYSTEM NOTE" not in done.stdout
        lines = hook_log(tmp_path)
        assert "another user's (" in lines[0]["detail"] and lines[0]["outcome"] == "spooled", \
            lines
        assert [f.name for f in (tmp_path / "spool").glob("*.json")]  # kept for its own service
    finally:
        received = stop_squatter(squatting)
    assert received == 0  # not the token, not the prompt, not the write


def test_autostart_starts_this_users_own_service_beside_another_users(tmp_path: Path) -> None:
    squatting, port = squatter()
    env = hook_env(tmp_path, None, MEMORY_PORT=str(port), MEMORY_PLUGIN_AUTOSTART="1",
                   MEMORY_HOOK_BUDGET_S="20", MEMORY_DEVICE="cpu")
    discovery = tmp_path / "memory.db.server.json"
    try:
        start = run_hook("claude-code", "SessionStart", {
            "session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "SessionStart",
            "source": "startup"}, env, cwd=tmp_path)
        assert start.returncode == 0, start.stderr
        own = json.loads(discovery.read_text())
        assert own["url"] != f"http://127.0.0.1:{port}"  # a free port of its own
        done = run_hook("claude-code", "UserPromptSubmit", {
            "session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
            "prompt": "remember: the release train leaves on thursdays"}, env, cwd=tmp_path)
        assert done.returncode == 0 and hook_log(tmp_path)[-1]["outcome"] == "stored", \
            hook_log(tmp_path)[-1]
    finally:
        received = stop_squatter(squatting)
        if discovery.exists():
            os.kill(json.loads(discovery.read_text())["pid"], signal.SIGTERM)
    assert received == 0


def test_the_owner_of_a_loopback_socket() -> None:
    """The kernel's answer for this user's own connection, another user's, and for what it
    cannot tell (not loopback, no such socket)."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            assert peer.owner(client.getpeername(), client.getsockname()) == os.geteuid()
            assert peer.trusted(os.geteuid())
    squatting, port = squatter()
    try:
        with socket.create_connection(("127.0.0.1", port)) as client:
            uid = peer.owner(client.getpeername(), client.getsockname())
            assert uid == NOBODY and not peer.trusted(uid)
            time.sleep(0.1)
    finally:
        stop_squatter(squatting)
    assert peer.owner(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert peer.owner(("192.0.2.1", 80), ("127.0.0.1", 2)) is None
