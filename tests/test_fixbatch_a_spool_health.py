"""A spool the service cannot replay (a folder or file another user made) was said once in
the service's log and nowhere else: /health, /api/stats and `memory-mcp stats` counted
nothing wrong. They now say how many writes wait and, while stuck, why (`blocked`), from the
replay loop's last look (/health lists nothing itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_ops_support import as_anyone, run_cli, start, wait_for
from test_service_support import Service, start_service

from semantic_memory import spool

FACT = "the staging database listens on port 6543"
TOKEN = "spool-health-token"


def health_spool(service: Service) -> dict[str, Any]:
    with service.client() as http:
        return http.get("/health").json()["spool"]


def stats_spool(service: Service) -> dict[str, Any]:
    with service.client() as http:
        return http.get("/api/stats").json()["spool"]


def readable(file: Path) -> bool:
    """Make `file` readable again; False while the replay loop holds it claimed (renamed)."""
    try:
        file.chmod(0o600)
    except FileNotFoundError:
        return False
    return True


def test_a_healthy_spool_is_said_too_and_only_with_the_token(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_TOKEN=TOKEN)
    try:
        assert health_spool(service) == {"pending": 0, "blocked": None}
        assert stats_spool(service)["blocked"] is None
        with service.client(token=None) as anonymous:  # liveness only: no path, no reason
            assert "spool" not in anonymous.get("/health").json()
    finally:
        service.stop()


def test_an_unreadable_spooled_write_is_counted_and_its_reason_said(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spooled = spool.append(folder, "/ingest", {"content": FACT, "project": "p"})
    spooled.chmod(0o000)  # as another user's 0600 file is to the service's user
    service = start(tmp_path, "serve", preexec=as_anyone)
    try:
        assert wait_for(lambda: health_spool(service)["blocked"])
        stuck = health_spool(service)
        assert stuck["pending"] == 1, stuck
        assert stuck["blocked"].startswith(f"cannot read {spooled} (Permission denied): "
                                           "the user that replays the spool"), stuck
        assert stats_spool(service)["blocked"] == stuck["blocked"]
        assert stats_spool(service)["pending"] == 1

        assert wait_for(lambda: readable(spooled))
        assert wait_for(lambda: health_spool(service) == {"pending": 0, "blocked": None})
        assert stats_spool(service)["blocked"] is None
        with service.client() as http:
            items = http.get("/api/memories", params={"project": "p"}).json()["items"]
        assert [item["content"] for item in items] == [FACT]
    finally:  # (this root test process removes the file whatever its mode)
        service.stop()


def test_a_spool_folder_the_service_may_not_list_is_said_everywhere(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"content": FACT})
    folder.chmod(0o300)  # writable, not readable: its writes cannot be found
    service = start(tmp_path, "serve", preexec=as_anyone)
    try:
        assert wait_for(lambda: health_spool(service)["blocked"])
        stuck = health_spool(service)
        assert stuck["pending"] is None, stuck  # unknown: the folder cannot be listed
        assert stuck["blocked"].startswith(f"cannot list the spool {folder} (Permission "
                                           "denied)"), stuck
        assert stats_spool(service)["blocked"] == stuck["blocked"]

        # `memory-mcp stats` (the store read directly) says it as this user finds it
        shown = run_cli(tmp_path, "stats", preexec=as_anyone)
        assert shown.returncode == 0, shown.stderr
        line = next(line for line in shown.stdout.splitlines() if line.startswith("spool: "))
        assert f"NOT REPLAYED: cannot list the spool {folder}" in line, shown.stdout
        as_json = json.loads(run_cli(tmp_path, "stats", "--json", preexec=as_anyone).stdout)
        assert as_json["spool"]["blocked"].startswith(f"cannot list the spool {folder}")

        folder.chmod(0o700)
        assert wait_for(lambda: health_spool(service) == {"pending": 0, "blocked": None})
        assert run_cli(tmp_path, "stats").stdout.count("spool: empty") == 1
    finally:
        folder.chmod(0o700)
        service.stop()
