"""Random port and agent bootstrap: the MEMORY_MCP_LISTENING line, the discovery file, its
retraction on SIGTERM / SIGINT, and staleness after a hard kill."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from semantic_memory.config import Settings
from semantic_memory.service.discovery import base_url, publish, read_discovery, retract
from test_service_support import Service, http_session, start_service, wait_gone


@pytest.fixture(autouse=True)
def reap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop every service a test started, even when the test failed half-way."""
    started: list[Service] = []
    original = start_service

    def tracked(*args: str, **kwargs: str) -> Service:
        svc = original(*args, **kwargs)  # type: ignore[arg-type]
        started.append(svc)
        return svc

    monkeypatch.setitem(globals(), "start_service", tracked)
    yield
    for svc in started:
        if svc.proc.poll() is None:
            svc.stop(signal.SIGKILL)


def test_port_zero_publishes_line_and_file_then_sigterm_retracts(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    info = svc.info
    assert info["port"] > 0 and info["url"] == f"http://127.0.0.1:{info['port']}"
    assert info["mcp_url"] == info["url"] + "/mcp" and info["pid"] == svc.proc.pid
    path = tmp_path / "memory.db.server.json"
    on_disk = json.loads(path.read_text())
    assert on_disk == info
    assert read_discovery(path)["stale"] is False
    assert httpx2.get(info["url"] + "/health", timeout=10).json()["ok"] is True
    assert svc.stop(signal.SIGTERM) == 0
    assert wait_gone(path)
    assert "Traceback" not in svc.stderr()


def test_sigint_retracts_too(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    path = tmp_path / "memory.db.server.json"
    assert path.exists()
    assert svc.stop(signal.SIGINT) == 0
    assert wait_gone(path)


def test_discovery_file_override_and_off(tmp_path: Path) -> None:
    custom = tmp_path / "run" / "memory.json"
    svc = start_service(tmp_path / "a", MEMORY_DISCOVERY_FILE=str(custom))
    assert json.loads(custom.read_text())["port"] == svc.info["port"]
    assert not (tmp_path / "a" / "memory.db.server.json").exists()
    svc.stop()
    assert wait_gone(custom)

    off = start_service(tmp_path / "b", MEMORY_DISCOVERY_FILE="off")
    assert off.info["port"] > 0  # the stdout line is still printed
    assert not list((tmp_path / "b").glob("*.json"))
    off.stop()


def test_hard_kill_leaves_a_file_recognisably_stale(tmp_path: Path) -> None:
    svc = start_service(tmp_path)
    path = tmp_path / "memory.db.server.json"
    svc.stop(signal.SIGKILL)
    data = read_discovery(path)
    assert data is not None and data["pid"] == svc.info["pid"] and data["stale"] is True
    # a new instance on the same db takes the file over
    again = start_service(tmp_path)
    fresh = read_discovery(path)
    assert fresh["pid"] == again.proc.pid and fresh["stale"] is False
    again.stop()
    assert wait_gone(path)


def test_two_services_on_one_db_the_one_left_serving_is_found_again(tmp_path: Path) -> None:
    """A second service on the same db says so and takes the file over; once it stops (and
    removes the file), the first writes it again, so hooks find it instead of looking at the
    default port and finding it "down" while it serves."""
    import time

    first = start_service(tmp_path)
    second = start_service(tmp_path)
    path = tmp_path / "memory.db.server.json"
    assert read_discovery(path)["pid"] == second.proc.pid
    assert f"another service (pid {first.proc.pid}, {first.url})" in second.stderr()
    assert second.stop() == 0
    waited = 0.0
    while (read_discovery(path) or {}).get("pid") != first.proc.pid and waited < 60:
        time.sleep(0.2)
        waited += 0.2
    back = read_discovery(path)
    assert back is not None and back["pid"] == first.proc.pid and not back["stale"], back
    assert back["url"] == first.url
    assert "written again" in first.stderr()
    assert first.stop() == 0
    assert wait_gone(path)


def test_serve_subcommand_with_options(tmp_path: Path) -> None:
    svc = start_service(tmp_path, "serve", "--port", "0", "--host", "127.0.0.1",
                        MEMORY_PORT="1")  # the option wins over the variable
    assert svc.info["port"] > 1
    assert httpx2.get(svc.url + "/health", timeout=10).status_code == 200
    assert svc.stop() == 0


def test_retract_only_removes_its_own_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    settings = Settings(db_path=str(tmp_path / "m.db"))
    info = {"url": "http://127.0.0.1:1", "port": 1, "pid": os.getpid()}
    path = publish(settings, info)
    line = capsys.readouterr().out
    assert line.startswith("MEMORY_MCP_LISTENING {") and json.loads(line.split(" ", 1)[1]) == info
    assert path == tmp_path / "m.db.server.json"
    assert not retract(path, pid=os.getpid() + 1)  # another instance's: left alone
    assert path.exists() and retract(path) and not path.exists()
    assert not retract(path) and read_discovery(path) is None
    path.write_text("not json")
    assert read_discovery(path) is None and not retract(path)


def test_base_url_for_wildcard_and_ipv6() -> None:
    assert base_url("0.0.0.0", 80) == "http://127.0.0.1:80"
    assert base_url("::", 80) == "http://[::1]:80"
    assert base_url("::1", 9) == "http://[::1]:9"
    assert base_url("localhost", 9) == "http://localhost:9"


def test_sigterm_with_an_mcp_client_connected_ends_its_stream_cleanly(tmp_path: Path) -> None:
    """An MCP client holds its GET event stream open; the stop cancelled the SDK's session
    manager under it and uvicorn logged `ERROR: ASGI callable returned without completing
    response` at every restart of a service an agent was connected to."""
    svc = start_service(tmp_path)
    connected, stopped = threading.Event(), threading.Event()

    async def idle_client() -> None:
        with anyio.move_on_after(60):
            async with http_session(svc.mcp_url) as session:
                await session.list_tools()
                connected.set()
                await anyio.to_thread.run_sync(stopped.wait)

    def run_client() -> None:
        try:
            anyio.run(idle_client)
        except Exception:  # noqa: BLE001 - the service went away under it: expected here
            pass

    client = threading.Thread(target=run_client, daemon=True)
    client.start()
    assert connected.wait(30)
    time.sleep(0.5)  # the client's GET stream is open by now
    try:
        assert svc.stop(signal.SIGTERM) == 0
    finally:
        stopped.set()
        client.join(30)
    log = svc.stderr()
    assert "ASGI callable returned without completing response" not in log, log
    assert "Traceback" not in log and "ERROR" not in log, log
