"""`install` / `uninstall claude-code --project P` over what an older release installed: its
server in the project's own `.mcp.json`. Our entry moves to ~/.claude.json; the `.mcp.json`
it leaves empty goes (install created it), and the project folder always stays.

What the older release (472fb81) wrote is written here as it wrote it: `LEGACY_FILES`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from test_service_support import memory_mcp_command

#: `memory-mcp install claude-code --project P` of release 472fb81 wrote these two files in P,
#: byte for byte, MEMORY_MCP standing for its `memory-mcp` script's absolute path (the
#: hooks and the MCP server ran it). Tool capture was off, so no PostToolUse hook.
LEGACY_FILES = {
    ".mcp.json": """\
{
  "mcpServers": {
    "memory": {
      "type": "stdio",
      "command": "MEMORY_MCP",
      "args": [
        "proxy"
      ]
    }
  }
}
""",
    ".claude/settings.local.json": """\
{
  "hooks": {
    "SessionStart": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "MEMORY_MCP hook claude-code SessionStart",
            "timeout": 3
          }
        ]
      }
    ],
    "UserPromptSubmit": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "MEMORY_MCP hook claude-code UserPromptSubmit",
            "timeout": 3
          }
        ]
      }
    ],
    "PreCompact": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "MEMORY_MCP hook claude-code PreCompact",
            "timeout": 3
          }
        ]
      }
    ],
    "SessionEnd": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "MEMORY_MCP hook claude-code SessionEnd",
            "timeout": 3
          }
        ]
      }
    ]
  },
  "permissions": {
    "allow": [
      "mcp__memory"
    ]
  }
}
""",
}


def memory_mcp(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def this_release(tmp: Path) -> dict[str, str]:
    """This release's environment: HOME and the db in `tmp`."""
    (tmp / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(HOME=str(tmp / "home"), MEMORY_DB_PATH=str(tmp / "memory.db"))
    return env


def old_project_install(project: Path) -> Path:
    """What the older release's `install claude-code --project` left in `project`; its
    `.mcp.json`."""
    project.mkdir()
    script = str(Path(memory_mcp_command()[0]).resolve())
    for name, text in LEGACY_FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text.replace("MEMORY_MCP", script), encoding="utf-8")
    return project / ".mcp.json"


def test_install_over_an_old_project_install_removes_the_mcp_json_it_empties(
        tmp_path: Path) -> None:
    env = this_release(tmp_path)
    project = tmp_path / "project"
    shared = old_project_install(project)
    memory_mcp(env, "install", "claude-code", "--project", str(project))
    assert not shared.exists()  # not "{}"
    assert list(project.glob(".mcp.json*")) == []  # nor a backup of it
    local = json.loads((tmp_path / "home/.claude.json").read_text())
    assert "memory-mcp" in local["projects"][str(project)]["mcpServers"]["memory"]["command"]
    memory_mcp(env, "uninstall", "claude-code", "--project", str(project))
    assert project.is_dir() and list(project.iterdir()) == []


def test_install_keeps_an_mcp_json_that_holds_another_server(tmp_path: Path) -> None:
    env = this_release(tmp_path)
    project = tmp_path / "project"
    shared = old_project_install(project)
    doc = json.loads(shared.read_text())
    doc["mcpServers"]["github"] = {"type": "http", "url": "https://api.example/mcp"}
    shared.write_text(json.dumps(doc, indent=2) + "\n")
    memory_mcp(env, "install", "claude-code", "--project", str(project))
    assert json.loads(shared.read_text()) == {
        "mcpServers": {"github": {"type": "http", "url": "https://api.example/mcp"}}}


def test_uninstall_over_an_old_project_install_keeps_the_project_folder(
        tmp_path: Path) -> None:
    """Uninstall removes the `.mcp.json` the older install created, and `.claude/` it leaves
    empty, but never the project folder, even when nothing else is in it."""
    env = this_release(tmp_path)
    project = tmp_path / "project"
    shared = old_project_install(project)
    memory_mcp(env, "uninstall", "claude-code", "--project", str(project))
    assert not shared.exists()
    assert project.is_dir() and list(project.iterdir()) == []
