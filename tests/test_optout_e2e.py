"""Control what is remembered, inside the real Claude Code binary (offline, against the
scripted model server and a real service): a session in a repository whose committed
`.semantic-memory.toml` turns capture off stores nothing (its "remember", its tool output and
its SessionEnd flush are all skipped) while recall still works; `<private>` text typed in a
session never reaches the store; the agent's own memory_store, through the MCP proxy, obeys
the file too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness_support import hook_log
from model_mock import ModelMock
from test_harness_e2e import FACT, QUESTION, World, binaries, block_in, claude, world

pytestmark = pytest.mark.slow
__all__ = ["binaries", "world"]  # the fixtures, used by name

SECRET = "hunter2-swordfish"


def git_init(folder: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True, capture_output=True, timeout=30)


def test_claude_code_in_an_opted_out_repository_stores_nothing(world: World) -> None:
    git_init(world.project)
    (world.project / ".semantic-memory.toml").write_text("[capture]\nenabled = false\n")
    world.memory_mcp("install", "claude-code", "--project", str(world.project))
    uid = world.store(FACT)
    with ModelMock() as mock:
        mock.script({"tool": {"name": "Bash", "input": {"command": "echo pool=20"}}},
                    {"text": "Port 5433."})
        claude(world, mock, QUESTION)
        block = block_in(mock.bodies()[0])
        assert FACT in block and uid in block  # recall stays on
        mock.script({"text": "Noted."})
        claude(world, mock, "remember that the opted-out cache lives in /var/cache/optout",
               "--continue")
    with world.service.client() as http:  # type: ignore[union-attr]
        items = http.get("/api/memories", params={"limit": 100}).json()["items"]
    assert [m["uid"] for m in items] == [uid], items  # only what the test stored itself
    log = hook_log(world.tmp / "svc")
    skipped = {e["event"]: e for e in log if e["outcome"] == "skipped"
               and "[capture] enabled = false" in e.get("detail", "")}
    assert {"PostToolUse", "UserPromptSubmit", "SessionEnd"} <= set(skipped), log
    assert all(str(world.project / ".semantic-memory.toml") in e["detail"]
               for e in skipped.values())
    assert "injected" in world.outcomes("UserPromptSubmit")


def test_claude_codes_mcp_store_in_an_opted_out_repository_is_refused(world: World) -> None:
    """The agent's own memory_store goes through the MCP server `install` registered
    (`memory-mcp proxy`, which Claude Code starts in the repository): it was stored, as a
    global memory, in a repository whose file turns capture off. The tool answers an error
    naming the file, and nothing is stored; without the file the same call is stored under
    the repository's project."""
    git_init(world.project)
    config = world.project / ".semantic-memory.toml"
    config.write_text("[capture]\nenabled = false\n")
    world.memory_mcp("install", "claude-code", "--project", str(world.project))
    store = {"tool": {"name": "mcp__memory__memory_store",
                      "input": {"content": "The opted-out cache lives in /var/cache/optout"}}}
    with ModelMock() as mock:
        mock.script(store, {"text": "Not stored."})
        claude(world, mock, "remember where the cache lives")
        assert f"capture is off for this repository ({config}: [capture] enabled = false)" \
            in mock.bodies()[-1]
        config.unlink()
        mock.script(store, {"text": "Stored."})
        claude(world, mock, "remember where the cache lives", "--continue")
    with world.service.client() as http:  # type: ignore[union-attr]
        items = http.get("/api/memories", params={"limit": 100}).json()["items"]
    stored = [m for m in items if m["source"] == "chat" and "optout" in m["content"]]
    assert [(m["content"], m["project"]) for m in stored] == [
        ("The opted-out cache lives in /var/cache/optout", world.project.name)], items


def test_claude_code_private_text_is_never_stored(world: World) -> None:
    world.memory_mcp("install", "claude-code", "--project", str(world.project))
    with ModelMock() as mock:
        mock.script({"text": "Noted."})
        claude(world, mock, f"remember that the vault opens at nine <private>{SECRET}</private>")
        mock.script({"text": "The staging account is the one to use."})
        claude(world, mock, f"how do I log in to staging? <private>my password is {SECRET}"
                            "</private>", "--continue")  # SessionEnd flushes the session
    with world.service.client() as http:  # type: ignore[union-attr]
        items = http.get("/api/memories", params={"limit": 100}).json()["items"]
    contents = [m["content"] for m in items]
    assert "the vault opens at nine" in contents, contents
    assert any("how do I log in to staging?" in c for c in contents), contents
    assert not [c for c in contents if SECRET in c or "private>" in c], contents
    assert SECRET not in (world.tmp / "svc" / "hooks.jsonl").read_text()
