"""A discovery file whose pid the system has given to another program since its service died
(a hard kill, a reboot) is stale: real services, a real foreign process holding the pid."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from semantic_memory.harness.client import resolve_address
from semantic_memory.harness.settings import HookSettings
from semantic_memory.service.discovery import proc_start, read_discovery
from test_service_support import Service, start_service


@contextmanager
def service_and_other_program(tmp_path: Path) -> Iterator[tuple[Service,
                                                                 subprocess.Popen[bytes]]]:
    """A service, then a live process that is no memory-mcp service, started after it (as a
    reused pid's is): what the pid of a dead service's file now belongs to."""
    svc = start_service(tmp_path)
    try:
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        try:
            yield svc, other
        finally:
            other.kill()
            other.wait()
    finally:
        svc.stop(signal.SIGKILL)


def test_a_pid_given_to_another_program_is_stale(tmp_path: Path) -> None:
    with service_and_other_program(tmp_path) as (svc, other):
        assert read_discovery(tmp_path / "memory.db.server.json")["stale"] is False
        assert svc.info["proc_start"] == proc_start(svc.proc.pid)
        # The file of a service killed hard, whose pid now belongs to another program.
        reused = tmp_path / "reused.server.json"
        reused.write_text(json.dumps({**svc.info, "pid": other.pid}))
        assert read_discovery(reused)["stale"] is True
        # An older release wrote no start time: only whether the pid lives can be known.
        older = {k: v for k, v in svc.info.items() if k != "proc_start"}
        reused.write_text(json.dumps({**older, "pid": other.pid}))
        assert read_discovery(reused)["stale"] is False


def test_a_service_takes_its_file_back_from_a_reused_pid(tmp_path: Path) -> None:
    """Two services on one db, the newer killed hard and its pid reused: the older one writes
    the file again (its look every few seconds), so the hooks find it."""
    with service_and_other_program(tmp_path) as (svc, other):
        path = tmp_path / "memory.db.server.json"
        dead = {**svc.info, "pid": other.pid, "port": 1, "url": "http://127.0.0.1:1"}
        path.write_text(json.dumps(dead))
        deadline = time.monotonic() + 60
        while json.loads(path.read_text())["pid"] != svc.proc.pid:
            assert time.monotonic() < deadline, path.read_text()
            time.sleep(0.1)
        assert read_discovery(path)["url"] == svc.url


def test_the_hooks_take_a_reused_pid_for_no_service(tmp_path: Path) -> None:
    """The hooks read the discovery file with the service's own rule: they checked only that
    the pid lived, and sent every prompt of a dead service's file to whatever held its port."""
    with service_and_other_program(tmp_path) as (svc, other):
        db = tmp_path / "memory.db"
        settings = HookSettings.from_env({"MEMORY_DB_PATH": str(db), "MEMORY_PORT": "1"})
        assert resolve_address(settings).url == svc.url
        path = tmp_path / "memory.db.server.json"
        path.write_text(json.dumps({**svc.info, "pid": other.pid}))
        assert resolve_address(settings)[:2] == ("http://127.0.0.1:1", "MEMORY_PORT")
