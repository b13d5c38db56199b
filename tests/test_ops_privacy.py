"""What other local users may read under the usual umask 022: the data folder this project
creates is its owner's only (0700), and so is a new export file (0600)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_ops_support import run_cli, start


def umask_022() -> None:
    os.umask(0o022)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def data_folder(tmp: Path) -> Path:
    """The default place under a home of the test's own (never the real one)."""
    return tmp / "home" / ".local" / "share" / "memory-mcp"


@pytest.mark.parametrize("first", ["store", "serve", "hook", "recall hook"])
def test_the_data_folder_this_project_creates_is_its_owners_only(tmp_path: Path, first: str
                                                                   ) -> None:
    folder = data_folder(tmp_path)
    env = {"HOME": str(tmp_path / "home"), "MEMORY_DB_PATH": str(folder / "memory.db")}
    if first == "store":
        done = run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh",
                       preexec=umask_022, **env)
        assert done.returncode == 0, done.stderr
    elif first == "serve":
        start(tmp_path, "serve", preexec=umask_022, **env).stop()
    elif first == "recall hook":  # no service: the hook log and the back-off make it
        prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": "/tmp",
                  "prompt": "where does the deploy script live?"}
        run_cli(tmp_path, "hook", "claude-code", "UserPromptSubmit", preexec=umask_022,
                stdin=json.dumps(prompt), MEMORY_PLUGIN_URL="http://127.0.0.1:9", **env)
        assert (folder / "hooks.backoff.json").exists()
    else:  # a hook that finds no service spools the write: the spool makes the folder
        prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": "/tmp",
                  "prompt": "remember that the deploy script lives in ops/deploy.sh"}
        run_cli(tmp_path, "hook", "claude-code", "UserPromptSubmit", preexec=umask_022,
                stdin=json.dumps(prompt), MEMORY_PLUGIN_URL="http://127.0.0.1:9", **env)
        assert (folder / "spool").is_dir()
    assert mode(folder) == 0o700
    assert mode(folder.parent) == 0o755  # ~/.local/share is everyone's usual folder


def test_an_existing_data_folder_keeps_its_mode(tmp_path: Path) -> None:
    folder = data_folder(tmp_path)
    folder.mkdir(parents=True)
    folder.chmod(0o750)  # the user's own choice (a group that backs it up)
    done = run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh",
                   preexec=umask_022, HOME=str(tmp_path / "home"),
                   MEMORY_DB_PATH=str(folder / "memory.db"))
    assert done.returncode == 0, done.stderr
    assert mode(folder) == 0o750


def test_a_new_export_file_is_its_owners_only(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh").returncode == 0
    target = tmp_path / "backup.jsonl"
    done = run_cli(tmp_path, "export", "-o", str(target), preexec=umask_022)
    assert done.returncode == 0, done.stderr
    assert mode(target) == 0o600
    assert "ops/deploy.sh" in target.read_text()


@pytest.mark.parametrize("first", ["store", "serve"])
def test_a_new_db_and_its_wal_are_their_owners_only(tmp_path: Path, first: str) -> None:
    """SQLite makes the db file with the umask's mode (0644) and gives its -wal and -shm the
    same: a db placed outside the data folder (MEMORY_DB_PATH in a shared folder) was
    readable by every local user."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    db = shared / "memory.db"
    env = {"HOME": str(tmp_path / "home"), "MEMORY_DB_PATH": str(db)}
    if first == "store":
        done = run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh",
                       preexec=umask_022, **env)
        assert done.returncode == 0, done.stderr
        assert mode(db) == 0o600
    else:
        service = start(tmp_path, "serve", preexec=umask_022, **env)
        try:
            # and the discovery file beside it, which names the service's port and pid
            files = [db, shared / "memory.db-wal", shared / "memory.db-shm",
                     shared / "memory.db.server.json"]
            assert all(f.exists() for f in files)
            assert [mode(f) for f in files] == [0o600] * 4
        finally:
            service.stop()


def test_a_db_path_that_is_a_symlink_makes_its_target_its_owners_only(tmp_path: Path) -> None:
    """`memory.db -> data/memory.db` (dotfiles, or the data on another disk) before the target
    exists: SQLite follows the link and made the target (and so its -wal, -shm) with the
    umask's mode, every memory readable by every local user; a missing target folder was
    `unable to open database file`. The target is made 0600, its folder with it."""
    link = tmp_path / "shared" / "memory.db"
    link.parent.mkdir(mode=0o755)
    link.symlink_to(Path("data") / "sub" / "memory.db")
    done = run_cli(tmp_path, "store", "the deploy script lives in ops/deploy.sh",
                   preexec=umask_022, HOME=str(tmp_path / "home"), MEMORY_DB_PATH=str(link))
    assert done.returncode == 0, done.stderr
    target = tmp_path / "shared" / "data" / "sub" / "memory.db"
    assert link.is_symlink() and mode(target) == 0o600


def test_the_caches_beside_the_db_are_their_owners_only(tmp_path: Path) -> None:
    """The MCP proxies' start-up cache (its instructions name the last workspace's project)
    and the hooks' adapter cache, written under umask 022 in a folder the user made."""
    folder = tmp_path / "db"
    folder.mkdir(mode=0o755)
    env = {"HOME": str(tmp_path / "home"), "MEMORY_DB_PATH": str(folder / "memory.db")}
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s1", "cwd": "/tmp",
              "prompt": "where does the deploy script live?"}
    run_cli(tmp_path, "hook", "claude-code", "UserPromptSubmit", preexec=umask_022,
            stdin=json.dumps(prompt), MEMORY_PLUGIN_URL="http://127.0.0.1:9", **env)
    fill = [sys.executable, "-m", "semantic_memory.service.mcp_front", "--fill-cache"]
    done = subprocess.run(fill, env={**os.environ, **env}, preexec_fn=umask_022,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    caches = [folder / "hooks.adapters.json", folder / "mcp-proxy.cache.json"]
    assert [mode(f) for f in caches] == [0o600, 0o600]


def test_a_refused_spooled_write_kept_for_review_is_its_owners_only(tmp_path: Path) -> None:
    """A spooled write the service refused on replay is kept under rejected/ with the reason,
    its memory's text in it: as every other file beside the db, 0600 under umask 022."""
    from semantic_memory import spool

    folder = tmp_path / "spool"
    body = {"content": "the staging hostname is db-7.internal", "project": "p"}
    spool.append(folder, "/remember", body, harness="claude-code")

    def refuse(path: str, sent: dict[str, object]) -> None:
        raise spool.Refused("project name not accepted")

    old = os.umask(0o022)
    try:
        done = spool.replay(folder, refuse)
    finally:
        os.umask(old)
    assert done.rejected == 1
    [kept] = list((folder / spool.REJECTED).iterdir())
    assert "db-7.internal" in kept.read_text(encoding="utf-8")
    assert mode(kept) == 0o600


def test_answers_holding_memories_are_not_kept_by_a_browser(tmp_path: Path) -> None:
    """Every answer of the service (the browse page's `/api/*`, REST, MCP) says
    `Cache-Control: no-store`, so a browser that showed a memory keeps no copy of it on disk;
    the page's own files, which hold no data, keep their `no-cache`."""
    from test_service_support import start_service

    service = start_service(tmp_path / "svc")
    try:
        with service.client() as http:
            stored = http.post("/ingest", json={"content": "the NAS admin is Rosalind"})
            uid = stored.json()["uid"]
            answers = [stored, http.get("/api/memories"), http.get(f"/api/memories/{uid}"),
                       http.get("/api/search", params={"q": "NAS"}),
                       http.post("/recall", json={"query": "NAS admin"}),
                       http.get("/api/memories/nosuchuid"), http.get("/health")]
            page = http.get("/")
    finally:
        service.stop()
    assert [a.headers.get("cache-control") for a in answers] == ["no-store"] * len(answers)
    assert page.headers["cache-control"] == "no-cache"
