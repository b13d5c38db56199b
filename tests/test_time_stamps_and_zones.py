"""Times as the user meant them and reads them: a `memory_store` the MCP proxy spools keeps the
time it was made; the injected block's `updated` is the local time with its offset; `--since`
refuses a unit that reads two ways (`1M`) or none (months, years) and an empty value; `doctor`
prints UTC ISO like every other command, whatever the zone.

Real processes throughout: `memory-mcp proxy` through the SDK's stdio client, the CLI as a
subprocess on a real SQLite file, a real service for REST. Zones are POSIX TZ strings
(`JST-9` is UTC+9), which need no zone database on the test machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness_support import closed_port, hook_env, run_hook, run_memory_mcp
from test_service_mcp import call
from test_service_mcp_proxy import proxy_session
from test_service_support import memory_mcp_command, service_env, start_service

UTC_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00")


def memory_mcp(env: dict[str, str], *args: str, stdin: str | None = None
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def listed(env: dict[str, str], project: str) -> dict[str, dict[str, Any]]:
    """content -> memory, every memory of `project`, superseded ones too."""
    out = run_memory_mcp(env, "list", "--project", project, "--include-superseded", "--json")
    return {m["content"]: m for m in json.loads(out)}


# --- (1) a spooled proxy store is dated by its call ------------------------------------------


def test_a_proxy_store_spooled_while_down_keeps_the_time_it_was_made(tmp_path: Path) -> None:
    """The agent stores 6544 through the proxy while the service is down (spooled); the user
    then stores the newer 6545; the spool is replayed. The replayed memory is dated by the
    agent's call, not by the replay, so it does not count as newer than 6545: 6545 stays
    current. (Undated, it was stamped at replay and superseded 6545.)"""
    down = f"http://127.0.0.1:{closed_port()}"
    env = service_env(tmp_path, MEMORY_PLUGIN_URL=down, MEMORY_PORT=down.rsplit(":", 1)[1])
    old, new = "The staging database port is 6544", "The staging database port is now 6545"

    async def store_while_down() -> dict[str, Any]:
        async with proxy_session(tmp_path, down, MEMORY_PROJECT="repo") as session:
            return await call(session, "memory_store",
                              {"content": old, "kind": "fact", "project": "repo"})

    before = time.time()
    assert anyio.run(store_while_down)["status"] == "spooled"
    after = time.time()
    [record] = (tmp_path / "spool").glob("*.json")
    assert before <= json.loads(record.read_text())["body"]["created_at"] <= after

    run_memory_mcp(env, "store", new, "--kind", "fact", "--project", "repo")
    run_memory_mcp(env, "spool", "replay")
    memories = listed(env, "repo")
    assert memories[new].get("superseded_by") is None, memories
    made = datetime.fromisoformat(memories[old]["created_at"]).timestamp()
    assert int(before) <= made <= after  # whole seconds as `list` prints them
    assert made <= datetime.fromisoformat(memories[new]["created_at"]).timestamp()


# --- (5) the block's `updated`: local time, to the minute, with its offset --------------------


@pytest.mark.parametrize(("zone", "shown"), [
    ("JST-9", "2025-12-07T08:30+09:00"),  # Tokyo: the next morning, the user's day
    ("EST5", "2025-12-06T18:30-05:00"),  # New York
    ("NPT-5:45", "2025-12-07T05:15+05:45"),  # Kathmandu: an offset of 45 minutes
    ("UTC0", "2025-12-06T23:30+00:00")])
def test_the_block_shows_when_a_memory_changed_in_local_time(tmp_path: Path, zone: str,
                                                              shown: str) -> None:
    env = service_env(tmp_path, TZ=zone)
    decision = "We decided to ship the billing service behind a feature flag"
    record = {"content": decision, "kind": "decision", "project": "web",
              "created_at": "2025-12-06T23:30:00Z"}
    memory_mcp(env, "import", "-", stdin=json.dumps(record) + "\n").check_returncode()
    block = run_memory_mcp(env, "recall", "billing service feature flag", "--project", "web",
                           "--block", "2000")
    [tag] = re.findall(r"<memory [^>]*>", block)
    assert tag.endswith(f' updated="{shown}">'), block
    # `list` is unchanged: UTC, whatever the zone.
    assert listed(env, "web")[decision]["updated_at"] == "2025-12-06T23:30:00+00:00"


# --- (6) --since: no unit that reads two ways, no empty value ---------------------------------


@pytest.fixture
def ten_minutes_old(tmp_path: Path) -> dict[str, str]:
    """An environment whose store holds one memory updated 10 minutes ago."""
    env = service_env(tmp_path)
    record = {"content": "Billing service moved to the payments cluster", "kind": "fact",
              "project": "web", "created_at": "10m"}
    memory_mcp(env, "import", "-", stdin=json.dumps(record) + "\n").check_returncode()
    return env


def found(env: dict[str, str], since: str) -> bool:
    done = memory_mcp(env, "recall", "billing service", "--project", "web", "--json",
                      "--since", since)
    assert done.returncode == 0, done.stderr
    return bool(json.loads(done.stdout) if done.stdout.strip() else [])


def test_since_reads_the_units_it_names(ten_minutes_old: dict[str, str]) -> None:
    assert found(ten_minutes_old, "30d") and found(ten_minutes_old, "1h")
    assert found(ten_minutes_old, "7D") and found(ten_minutes_old, "2W")  # one reading each
    assert not found(ten_minutes_old, "1m")  # minutes


@pytest.mark.parametrize(("since", "reason"), [
    ("1M", "'1M': M could be months or minutes: write m for minutes "
           "(months are not a unit: use 30d)"),
    ("3mo", "'3mo': months are not a unit: use 30d"),
    ("1y", "'1y': years are not a unit: use 365d"),
    ("", "empty; give a time, or leave --since out for no time filter")])
def test_since_refuses_an_unclear_unit_or_nothing_with_the_reason(
        ten_minutes_old: dict[str, str], since: str, reason: str) -> None:
    """`1M` was one minute (units were read in any case), so a user meaning a month got
    "No memory matched"; `--since ''` was no filter at all, where REST and MCP refuse it."""
    done = memory_mcp(ten_minutes_old, "recall", "billing service", "--since", since)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == f"Error: Invalid value for --since: {reason}"
    assert "Traceback" not in done.stderr


def test_rest_refuses_the_same_since(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        with service.client() as http:
            for since in ("1M", "3mo", "1y", ""):
                answer = http.get("/api/memories", params={"since": since})
                assert answer.status_code == 422, (since, answer.text)
            # the reason, as the CLI gives it (it was "expected ISO 8601, …, got '1M'")
            assert "M could be months or minutes" in http.get(
                "/api/memories", params={"since": "1M"}).json()["error"]
            assert http.get("/api/memories", params={"since": "1m"}).status_code == 200
    finally:
        service.stop()


# --- (7) doctor: UTC ISO, as every other command -----------------------------------------------


def test_doctor_prints_times_in_utc_whatever_the_zone(tmp_path: Path) -> None:
    """A hook with the service down leaves a hook-log entry, a spooled write and a back-off,
    each with a time in `doctor`; they read the same in Tokyo and in UTC, with +00:00."""
    down = f"http://127.0.0.1:{closed_port()}"
    env = hook_env(tmp_path, down)
    prompt = {"session_id": "s", "hook_event_name": "UserPromptSubmit",
              "prompt": "remember that we deploy with Argo CD", "cwd": str(tmp_path)}
    assert run_hook("claude-code", "UserPromptSubmit", prompt, env).returncode == 0

    def timed_lines(zone: str) -> list[str]:
        done = memory_mcp({**env, "TZ": zone}, "doctor")
        assert done.returncode == 1, done.stderr  # the service is down
        return [line for line in done.stdout.splitlines() if re.search(r"\d\d:\d\d", line)]

    tokyo = timed_lines("JST-9")
    assert tokyo == timed_lines("UTC0")
    for start in ("spool ", "back-off ", "  last failure UserPromptSubmit: "):
        [line] = [line for line in tokyo if line.startswith(start)]
        assert UTC_ISO.search(line), line
