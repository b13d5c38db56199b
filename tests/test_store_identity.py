"""Hooks that name their store (MEMORY_DB_PATH / MEMORY_DB_URL) and find no live discovery
file fall back to the port: a memory service of another db listening there took their
"remember"s and answered their recalls (QA F2). They now send X-Memory-Store there, the
service answers 421 when it serves another store, and the hooks treat that as no service:
the write is spooled for their own service, the recall injects nothing."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from test_service_support import Service, memory_mcp_command, start_service, stored

from semantic_memory import lite
from semantic_memory.harness.client import (
    ServiceAddress,
    ServiceClient,
    ServiceMisdirected,
    resolve_address,
)
from semantic_memory.harness.settings import HookSettings

PLUGINS = "bm25_porter,bm25_trigram"


def test_store_identity_names_a_store_alike_on_both_sides(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    db = str(real / "memory.db")  # not made yet: named by its folder's real path
    assert lite.store_identity("", str(tmp_path / "link" / "memory.db")) == db
    assert lite.store_identity(f"sqlite:///{db}", "ignored") == db
    assert lite.store_identity("", "~/x.db") == os.path.join(os.path.expanduser("~"), "x.db")
    bare = lite.store_identity("postgresql://me@db.example:5432/mem", "")
    assert lite.store_identity("postgres+psycopg://me:s3cr%40t@db.example:5432/mem", "") == bare
    assert "s3cr" not in lite.store_identity("postgresql://me@h/m?sslpassword=pw&x=1", "")
    assert lite.store_identity("postgresql://me@h/other", "") != bare
    assert len(lite.store_tag(bare)) == 16


def _prompt(tmp: Path, env: dict[str, str], prompt: str, session: str = "s1") -> str:
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": session, "cwd": str(tmp), "hook_event_name": "UserPromptSubmit",
        "prompt": prompt}, env, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _contents(service: Service) -> list[str]:
    with service.client() as http:
        return [m["content"] for m in http.get("/api/memories").json()["items"]]


def test_hooks_do_not_use_a_service_of_another_db_found_by_the_port(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    other = start_service(b, MEMORY_PLUGINS=PLUGINS)  # db B, on a random port
    try:
        stored(other, "the blue widget ships on mondays")
        port = str(other.info["port"])
        env = hook_env(a, None, MEMORY_PORT=port, MEMORY_HOOK_BUDGET_S="5")
        assert not (a / "memory.db.server.json").exists()  # A's service is down

        # Recall first (a write starts the back-off): nothing of B's is injected.
        assert "blue widget" not in _prompt(tmp_path, env, "when does the blue widget ship?")
        entry = hook_log(a)[-1]
        assert entry["outcome"] == "service down", entry
        assert "serves" in entry["detail"] and str(b / "memory.db") in entry["detail"], entry

        _prompt(tmp_path, env, "remember: the green gadget ships on fridays")
        assert hook_log(a)[-1]["outcome"] == "spooled", hook_log(a)[-1]
        assert list((a / "spool").glob("*.json"))
        assert not any("green gadget" in c for c in _contents(other))

        # Unchanged: hooks that leave the db to the default, and hooks naming B's own db
        # (through `~` and a symlink), use the service at the port.
        plain = {k: v for k, v in env.items() if k != "MEMORY_DB_PATH"}
        assert "blue widget" in _prompt(tmp_path, plain, "when does the blue widget ship?", "s2")
        home = Path(env["HOME"])
        home.mkdir(parents=True, exist_ok=True)
        (home / "b-link").symlink_to(b)
        # No discovery file: found by the port, it names the store (X-Memory-Store) and matches.
        named = {**env, "MEMORY_DB_PATH": "~/b-link/memory.db", "MEMORY_DISCOVERY_FILE": "off"}
        assert "blue widget" in _prompt(tmp_path, named, "when does the blue widget ship?", "s3")

        doctor = subprocess.run([*memory_mcp_command(), "doctor"], env=env, text=True,
                                capture_output=True, timeout=60)
        assert "serves another db" in doctor.stdout, doctor.stdout
    finally:
        other.stop()

    own = start_service(a, MEMORY_PLUGINS=PLUGINS)  # A's own: replays A's spool
    try:
        deadline = time.monotonic() + 30
        while not any("green gadget" in c for c in _contents(own)):
            assert time.monotonic() < deadline, "A's spool was not replayed into A"
            time.sleep(0.2)
        time.sleep(0.5)
        assert sum("green gadget" in c for c in _contents(own)) == 1
        assert not list((a / "spool").glob("*.json"))
    finally:
        own.stop()


def test_the_expected_store_travels_with_the_address_not_a_map_per_url(tmp_path: Path) -> None:
    """`resolve_address` hands the store its settings name to the client that is built from
    it: a module map per URL forgot it as soon as another settings object of the same process
    resolved the same URL naming no store (the default db), and a client built for a URL that
    this process had not resolved sent no X-Memory-Store at all."""
    other = start_service(tmp_path / "b", MEMORY_PLUGINS=PLUGINS)  # db B, on a random port
    try:
        port = str(other.info["port"])
        mine = str(tmp_path / "a" / "memory.db")
        named = HookSettings.from_env({"MEMORY_DB_PATH": mine, "MEMORY_PORT": port})
        plain = HookSettings.from_env({"MEMORY_PORT": port, "MEMORY_DISCOVERY_FILE": "off"})
        address = resolve_address(named)
        identity = lite.store_identity("", mine)
        assert address == ServiceAddress(f"http://127.0.0.1:{port}", "MEMORY_PORT",
                                         (lite.store_tag(identity), identity))
        default = resolve_address(plain)  # same URL, no store named: no header, B answers
        assert (default.url, default.store) == (address.url, None)
        ServiceClient(default.url, time.monotonic() + 10, store=default.store).get("/health")

        # Resolved before `plain` was, and built after: still sends A's tag; B refuses it.
        with pytest.raises(ServiceMisdirected, match="MEMORY_DB_PATH/MEMORY_DB_URL here name"):
            ServiceClient(address.url, time.monotonic() + 10,
                          store=address.store).post("/ingest", {"content": "not for B"})
        assert not any("not for B" in c for c in _contents(other))

        # A service found through the discovery file or MEMORY_PLUGIN_URL is this db's own,
        # or the user's choice: nothing to check there.
        pinned = HookSettings.from_env({"MEMORY_DB_PATH": mine, "MEMORY_PLUGIN_URL": other.url})
        assert resolve_address(pinned) == ServiceAddress(other.url, "MEMORY_PLUGIN_URL")
        found = HookSettings.from_env({"MEMORY_DB_PATH": str(tmp_path / "b" / "memory.db"),
                                       "MEMORY_PORT": "1"})
        assert resolve_address(found).store is None
        assert resolve_address(found).origin.startswith("discovery file")
    finally:
        other.stop()
