"""A spool folder the service's user may not write (made by a `sudo` run, say): its writes were
taken for another replayer's and waited unseen. The service says why in one line, once;
`memory-mcp spool replay` and `doctor` name the reason; once the folder is writable again the
writes are stored."""

from __future__ import annotations

import time
from pathlib import Path

from test_ops_support import as_anyone, run_cli, start, wait_for

from semantic_memory import spool
from semantic_memory.service.spool_replay import SCAN_S

FACT = "the staging database listens on port 6543"
STUCK = "the user that replays the spool must be able to write it and read its files"


def replay_failures(log: str) -> list[str]:
    return [line for line in log.splitlines() if "spool: replay failed" in line]


def test_a_spool_the_service_may_not_write_is_reported_then_replayed(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spooled = spool.append(folder, "/ingest", {"content": FACT, "project": "p"})
    folder.chmod(0o555)
    service = start(tmp_path, "serve", preexec=as_anyone)
    try:
        assert wait_for(lambda: replay_failures(service.stderr()))
        time.sleep(2 * SCAN_S + 1)  # it looks again meanwhile
        failures = replay_failures(service.stderr())
        assert failures == [
            f"memory-mcp: spool: replay failed (cannot take a write from the spool {folder} to "
            f"replay it (Permission denied): {STUCK} (a `sudo` run may have made them root's)); "
            f"the writes stay queued and are tried again every {SCAN_S:g} s"], failures
        assert spool.pending(folder) == [spooled]  # not claimed, not rejected

        replayed = run_cli(tmp_path, "spool", "replay", preexec=as_anyone)
        assert replayed.returncode == 1 and "Traceback" not in replayed.stderr
        assert replayed.stderr.strip().splitlines() == [
            f"Error: cannot take a write from the spool {folder} to replay it (Permission "
            f"denied): {STUCK} (a `sudo` run may have made them root's); 1 write(s) still "
            "waiting"]

        doctor = run_cli(tmp_path, "doctor", preexec=as_anyone,
                         MEMORY_PLUGIN_URL=service.url)
        assert f"NOT REPLAYED: 1 write(s) wait in {folder}, which this user may not write: " \
               f"{STUCK}" in doctor.stdout, doctor.stdout

        folder.chmod(0o700)
        assert wait_for(lambda: not spool.pending(folder))
        with service.client() as client:
            items = client.get("/api/memories", params={"project": "p"}).json()["items"]
        assert [item["content"] for item in items] == [FACT]
        assert "NOT REPLAYED" not in run_cli(tmp_path, "doctor", preexec=as_anyone,
                                             MEMORY_PLUGIN_URL=service.url).stdout
    finally:
        folder.chmod(0o700)
        service.stop()


def test_spool_replay_without_a_service_names_the_reason(tmp_path: Path) -> None:
    """Into the store directly (no service answers): the same line, nothing taken."""
    folder = tmp_path / "spool"
    spooled = spool.append(folder, "/ingest", {"content": FACT})
    folder.chmod(0o555)
    try:
        replayed = run_cli(tmp_path, "spool", "replay", preexec=as_anyone,
                           MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    finally:
        folder.chmod(0o700)
    assert replayed.returncode == 1 and "Traceback" not in replayed.stderr
    assert replayed.stderr.strip().splitlines() == [
        f"Error: cannot take a write from the spool {folder} to replay it (Permission denied): "
        f"{STUCK} (a `sudo` run may have made them root's); 1 write(s) still waiting"]
    assert spool.pending(folder) == [spooled]
    assert run_cli(tmp_path, "spool", "replay", MEMORY_PLUGIN_URL="http://127.0.0.1:9"
                   ).returncode == 0
    assert not spool.pending(folder)


def test_spool_replay_says_why_the_service_did_not_take_the_writes(tmp_path: Path) -> None:
    """A service that answers, and refuses for now (a token this user lacks): `spool replay`
    named no reason; it names the service's answer."""
    service = start(tmp_path / "svc", "serve", MEMORY_TOKEN="the-services-token-0123456789")
    try:
        spooled = spool.append(tmp_path / "spool", "/ingest", {"content": FACT})
        replayed = run_cli(tmp_path, "spool", "replay", MEMORY_PLUGIN_URL=service.url)
        assert replayed.returncode == 1 and "Traceback" not in replayed.stderr
        assert replayed.stdout.strip() == (
            f"replayed 0 write(s) into the service at {service.url}; 1 still waiting (HTTP "
            "401: a valid Bearer token is required)"), replayed.stdout
        assert spool.pending(tmp_path / "spool") == [spooled]
    finally:
        service.stop()


def test_a_spool_this_user_may_not_list_is_said_not_taken_for_empty(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"content": FACT})
    folder.chmod(0o300)  # writable, not readable: its writes cannot be found
    service = start(tmp_path, "serve", preexec=as_anyone)
    try:
        assert wait_for(lambda: replay_failures(service.stderr()))
        assert replay_failures(service.stderr()) == [
            f"memory-mcp: spool: replay failed (cannot list the spool {folder} (Permission "
            f"denied): {STUCK} (a `sudo` run may have made them root's)); the writes stay "
            f"queued and are tried again every {SCAN_S:g} s"]
        doctor = run_cli(tmp_path, "doctor", preexec=as_anyone, MEMORY_PLUGIN_URL=service.url)
        assert f"NOT REPLAYED: cannot list the spool {folder}" in doctor.stdout, doctor.stdout
    finally:
        folder.chmod(0o700)
        service.stop()


def test_doctor_says_when_a_write_could_not_be_spooled(tmp_path: Path) -> None:
    """An empty spool folder this user may not write (a `sudo` run made it root's): doctor
    said `spool empty` while every hook write that met a stopped service was lost (the model
    told `could NOT store this`). It says so before a hook meets it."""
    folder = tmp_path / "spool"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        doctor = run_cli(tmp_path, "doctor", preexec=as_anyone,
                         MEMORY_PLUGIN_URL="http://127.0.0.1:9")
        assert f"CANNOT SPOOL: this user may not write {folder}: a write the service cannot " \
               f"take now is not kept" in doctor.stdout, doctor.stdout
    finally:
        folder.chmod(0o700)
    doctor = run_cli(tmp_path, "doctor", preexec=as_anyone, MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    assert "CANNOT SPOOL" not in doctor.stdout and "spool     empty" in doctor.stdout
