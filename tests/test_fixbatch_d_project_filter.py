"""A project given as its remote's address (`https://github.com/acme/app.git`,
`git@github.com:acme/app.git`, `github.com/acme/app/`, an SSH alias) names the repository's
project, as the hooks name its clones: every filter (CLI list/recall, REST `project=`, the MCP
tools) finds its memories, where each matched nothing and said nothing; MEMORY_PROJECT set to a
remote's address files a hook's memories there; and names an earlier release stored in such
spellings are renamed on upgrade (both stores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from harness_support import hook_env, hook_log, run_hook
from old_schemas import as_written_at
from test_service_support import Service, http_session, start_service

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

PROJECT = "github.com/acme/app"
#: Ways a user types that repository: each matched nothing before.
TYPED = ["https://github.com/acme/app.git", "git@github.com:acme/app.git", "github.com/acme/app/",
         "ssh://git@github.com/Acme/App", "GitHub.com/Acme/App.git",
         "git@github.com-work:Acme/App.git", "https://user@github.com/acme/app/"]
TEXT = "the app's canary deploy runs at noon on weekdays"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("filter"))
    with running.client() as client:
        for project, text in ((PROJECT, TEXT), ("github.com/acme/other", "other canary")):
            assert client.post("/ingest", json={"content": text, "project": project}
                               ).json()["status"] == "new"
    yield running
    running.stop()


@pytest.mark.parametrize("typed", TYPED)
def test_rest_filters_take_a_remotes_address(service: Service, typed: str) -> None:
    with service.client() as client:
        listed = client.get("/api/memories", params={"project": typed}).json()["items"]
        found = client.get("/api/search", params={"q": "canary deploy", "project": typed}).json()
        recalled = client.post("/recall", json={"query": "canary deploy", "project": typed,
                                                "with_global": False}).json()
    assert [m["content"] for m in listed] == [TEXT]
    assert TEXT in json.dumps(found) and "other canary" not in json.dumps(found)
    assert [h["content"] for h in recalled["items"]] == [TEXT]


def test_mcp_tools_take_a_remotes_address(service: Service) -> None:
    async def main() -> None:
        async with http_session(service.mcp_url) as session:
            for typed in TYPED[:3]:
                for tool, arguments in (("memory_list", {"project": typed}),
                                        ("memory_recall", {"query": "canary deploy",
                                                           "project": typed})):
                    result = await session.call_tool(tool, arguments)
                    assert not result.is_error, result.content
                    text = json.dumps([c.model_dump() for c in result.content])
                    assert "noon on weekdays" in text and "other canary" not in text, tool

    anyio.run(main)


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["MEMORY_DB_PATH"] = str(db)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_filters_and_store_take_a_remotes_address(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    stored = cli(db, "store", TEXT, "--project", "git@github.com:Acme/App.git", "--json")
    assert stored.returncode == 0, stored.stderr
    listed = json.loads(cli(db, "list", "--json").stdout)
    assert [m["project"] for m in listed] == [PROJECT]
    for typed in TYPED:
        listed = json.loads(cli(db, "list", "--project", typed, "--json").stdout)
        assert [m["content"] for m in listed] == [TEXT], typed
    recalled = cli(db, "recall", "canary deploy", "--project", TYPED[0], "--no-global", "--json")
    assert recalled.returncode == 0, recalled.stderr
    assert TEXT in recalled.stdout


def test_memory_project_set_to_a_remotes_address_files_under_the_repository(
        service: Service, tmp_path: Path) -> None:
    """MEMORY_PROJECT=https://github.com/Acme/App.git: a hook remembers under
    github.com/acme/app (before: a project of that spelling no clone ever recalled)."""
    env = hook_env(tmp_path, service.url, MEMORY_PROJECT="https://github.com/Acme/App.git",
                   MEMORY_HOOK_BUDGET_S="5")
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "s-url", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
        "prompt": "remember: the app's release train leaves on thursdays"}, env, cwd=tmp_path)
    assert done.returncode == 0 and hook_log(tmp_path)[-1]["outcome"] == "stored"
    with service.client() as client:
        listed = client.get("/api/memories", params={"project": PROJECT}).json()["items"]
    assert "the app's release train leaves on thursdays" in [m["content"] for m in listed]


#: name as an earlier release stored it -> as it is stored now
STORED = {"https://github.com/Acme/App.git": PROJECT, "github.com-work/Acme/App": PROJECT,
          "ssh.github.com/acme/app": PROJECT, "notes/": "notes", "/work/ /": "/work/ /",
          "dev.azure.com/Org/Proj/_git/Repo": "dev.azure.com/org/proj/repo",
          "git.corp/Acme/App": "git.corp/Acme/App", "tools.git": "tools"}


@pytest.mark.both_stores
def test_names_stored_in_a_remotes_spelling_are_renamed_on_upgrade(settings: Settings) -> None:
    """A memory stored under "https://github.com/Acme/App.git" or an SSH alias's name is the
    repository's on upgrade; one that then repeats a memory of it word for word is forgotten;
    other names stay."""
    engine = MemoryEngine(settings)
    kept = engine.store_one(NewMemory(TEXT, project=PROJECT)).uid
    uids = {old: engine.store_one(NewMemory(f"memory of {old!r}", project="x")).uid
            for old in STORED}
    twin = engine.store_one(NewMemory(TEXT, project="x")).uid
    engine.close()
    as_written_at(settings, [
        ("UPDATE memories SET project = ? WHERE uid = ?", (old, uid)) for old, uid in uids.items()
    ] + [("UPDATE memories SET project = ? WHERE uid = ?", ("github.com-work/Acme/App", twin))],
        sqlite_version=11, pg_version=12)
    engine = MemoryEngine(settings)
    try:
        assert {old: engine.get(uid).project for old, uid in uids.items()} == STORED
        assert engine.get(twin).deleted and not engine.get(kept).deleted
        found = engine.list(RecallFilters(project="git@github.com:acme/app.git"), limit=50)
        assert len(found) == 1 + sum(new == PROJECT for new in STORED.values())
    finally:
        engine.close()
