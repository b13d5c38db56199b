"""The autostarted service's log (`service.log` beside the db) is rotated as a session start
spawns a service: a real hook, a real detached service."""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness_support import closed_port, hook_env, hook_log, run_hook
from semantic_memory.harness.autostart import LOG_MAX_BYTES


def test_autostart_rotates_a_service_log_grown_past_its_limit(tmp_path: Path) -> None:
    log, older = tmp_path / "service.log", tmp_path / "service.log.1"
    grown = b"an old service's line\n" * (LOG_MAX_BYTES // 22 + 1)
    log.write_bytes(grown)
    older.write_bytes(b"the copy before that\n")
    # MEMORY_PLUGIN_URL: the spawned service listens there (never the default port, where a
    # developer's own service may run).
    env = hook_env(tmp_path, f"http://127.0.0.1:{closed_port()}", MEMORY_PLUGIN_AUTOSTART="1",
                   MEMORY_HOOK_BUDGET_S="20", MEMORY_DEVICE="cpu")
    run = run_hook("example", "session-start", {"session": "s", "cwd": str(tmp_path)}, env)
    discovery = json.loads((tmp_path / "memory.db.server.json").read_text())
    try:
        assert run.returncode == 0
        assert hook_log(tmp_path)[-1]["outcome"] == "skipped", hook_log(tmp_path)[-1]
        assert older.read_bytes() == grown  # one old copy, the one before it gone
        assert grown[:21] not in log.read_bytes() and log.stat().st_size < LOG_MAX_BYTES
    finally:
        os.kill(discovery["pid"], signal.SIGTERM)


def test_autostart_appends_to_a_service_log_under_its_limit(tmp_path: Path) -> None:
    log = tmp_path / "service.log"
    log.write_bytes(b"an earlier start's line\n")
    env = hook_env(tmp_path, f"http://127.0.0.1:{closed_port()}", MEMORY_PLUGIN_AUTOSTART="1",
                   MEMORY_HOOK_BUDGET_S="20", MEMORY_DEVICE="cpu")
    run = run_hook("example", "session-start", {"session": "s", "cwd": str(tmp_path)}, env)
    discovery = json.loads((tmp_path / "memory.db.server.json").read_text())
    try:
        assert run.returncode == 0
        assert log.read_bytes().startswith(b"an earlier start's line\n")
        assert not (tmp_path / "service.log.1").exists()
    finally:
        os.kill(discovery["pid"], signal.SIGTERM)


def test_autostart_starts_its_own_service_beside_another_programs_server(tmp_path: Path) -> None:
    """Another program's HTTP server on the service's port (a dev server on 8765): the hook
    found no memory service there and started none; now one starts on a free port."""
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = b"<html>a dev server</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = hook_env(tmp_path, None, MEMORY_PORT=str(server.server_address[1]),
                   MEMORY_PLUGIN_AUTOSTART="1", MEMORY_HOOK_BUDGET_S="20", MEMORY_DEVICE="cpu")
    discovery = tmp_path / "memory.db.server.json"
    try:
        run = run_hook("example", "session-start", {"session": "s", "cwd": str(tmp_path)}, env)
        assert run.returncode == 0, run.stderr
        own = json.loads(discovery.read_text())
        assert own["url"] != f"http://127.0.0.1:{server.server_address[1]}"
        assert hook_log(tmp_path)[-1]["outcome"] == "skipped", hook_log(tmp_path)[-1]
    finally:
        server.shutdown()
        if discovery.exists():
            os.kill(json.loads(discovery.read_text())["pid"], signal.SIGTERM)
