"""`install` / `uninstall claude-code --project P` over what an older release installed: its
server in the project's own `.mcp.json`. Our entry moves to ~/.claude.json; the `.mcp.json`
it leaves empty goes (install created it), and the project folder always stays.

The older release is real: the packages of older_release.OLD_REV, run from a worktree.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import older_release
import pytest
from test_service_support import memory_mcp_command


@pytest.fixture(scope="module")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The PYTHONPATH that runs the older release."""
    with older_release.worktree(tmp_path_factory.mktemp("old-release") / "tree") as path:
        yield path


def memory_mcp(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def envs(tmp: Path, old_release: str) -> tuple[dict[str, str], dict[str, str]]:
    """(this release's environment, the older one's): HOME and the db in `tmp`."""
    (tmp / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.pop("PYTHONPATH", None)
    env.update(HOME=str(tmp / "home"), MEMORY_DB_PATH=str(tmp / "memory.db"))
    return env, {**env, "PYTHONPATH": old_release}


def old_project_install(old: dict[str, str], project: Path) -> Path:
    """The older release's `install claude-code --project`; its `.mcp.json`."""
    project.mkdir()
    memory_mcp(old, "install", "claude-code", "--project", str(project))
    shared = project / ".mcp.json"
    assert "memory-mcp" in json.loads(shared.read_text())["mcpServers"]["memory"]["command"]
    return shared


def test_install_over_an_old_project_install_removes_the_mcp_json_it_empties(
        tmp_path: Path, old_release: str) -> None:
    env, old = envs(tmp_path, old_release)
    project = tmp_path / "project"
    shared = old_project_install(old, project)
    memory_mcp(env, "install", "claude-code", "--project", str(project))
    assert not shared.exists()  # not "{}"
    assert list(project.glob(".mcp.json*")) == []  # nor a backup of it
    local = json.loads((tmp_path / "home/.claude.json").read_text())
    assert "memory-mcp" in local["projects"][str(project)]["mcpServers"]["memory"]["command"]
    memory_mcp(env, "uninstall", "claude-code", "--project", str(project))
    assert project.is_dir() and list(project.iterdir()) == []


def test_install_keeps_an_mcp_json_that_holds_another_server(
        tmp_path: Path, old_release: str) -> None:
    env, old = envs(tmp_path, old_release)
    project = tmp_path / "project"
    shared = old_project_install(old, project)
    doc = json.loads(shared.read_text())
    doc["mcpServers"]["github"] = {"type": "http", "url": "https://api.example/mcp"}
    shared.write_text(json.dumps(doc, indent=2) + "\n")
    memory_mcp(env, "install", "claude-code", "--project", str(project))
    assert json.loads(shared.read_text()) == {
        "mcpServers": {"github": {"type": "http", "url": "https://api.example/mcp"}}}


def test_uninstall_over_an_old_project_install_keeps_the_project_folder(
        tmp_path: Path, old_release: str) -> None:
    """Uninstall removes the `.mcp.json` the older install created, and `.claude/` it leaves
    empty, but never the project folder, even when nothing else is in it."""
    env, old = envs(tmp_path, old_release)
    project = tmp_path / "project"
    shared = old_project_install(old, project)
    memory_mcp(env, "uninstall", "claude-code", "--project", str(project))
    assert not shared.exists()
    assert project.is_dir() and list(project.iterdir()) == []
