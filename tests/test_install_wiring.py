"""Hook wiring that outlives what it points at: an adapter uninstalled after `install`. Real
CLI subprocesses in real environments (tests/test_core_cli.py `venv_like_this`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness_support import closed_port, hook_env, hook_log
from test_core_cli import venv_like_this
from test_service_support import memory_mcp_command

PROMPT = {"hook_event_name": "UserPromptSubmit", "prompt": "which package manager?",
          "session_id": "s1"}


def memory_mcp(program: list[str], env: dict[str, str], *args: str, cwd: Path | None = None,
               stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*program, *args], env=env, cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=60)


def setup(tmp_path: Path) -> tuple[dict[str, str], Path]:
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()))
    (tmp_path / "home").mkdir()
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    return env, repo


def test_the_hooks_of_an_uninstalled_adapter_are_reported_and_taken_out(tmp_path: Path) -> None:
    env, repo = setup(tmp_path)
    settings = repo / ".claude" / "settings.local.json"
    own = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo done"}]}]}}
    settings.write_text(json.dumps(own, indent=2) + "\n")
    installed = memory_mcp(memory_mcp_command(), env, "install", "claude-code", "--project",
                           str(repo), "--mcp", "none")
    assert installed.returncode == 0, installed.stderr
    assert "memory-mcp hook claude-code UserPromptSubmit" in settings.read_text()

    # semantic-memory-claude-code uninstalled: its hooks fail on every prompt
    without = [str(venv_like_this(tmp_path / "venv", ("claude_code",)))]
    hooked = memory_mcp(without, env, "hook", "claude-code", "UserPromptSubmit", cwd=repo,
                        stdin=json.dumps(PROMPT))
    assert hooked.returncode == 0  # fail-open, but every prompt logs the failure
    assert "no harness adapter named 'claude-code'" in hook_log(tmp_path)[-1]["detail"]

    doctor = memory_mcp(without, env, "doctor", cwd=repo).stdout
    assert "claude-code  (NO ADAPTER INSTALLED: its hooks fail on every prompt)" in doctor
    assert f"  project  hooks wired in {settings}" in doctor
    assert (f"  fix: `memory-mcp uninstall claude-code --project {repo}` takes them out, or "
            "install its adapter again (semantic-memory-claude-code)") in doctor
    assert "last failure UserPromptSubmit" in doctor

    removed = memory_mcp(without, env, "uninstall", "claude-code", "--project", str(repo))
    assert removed.returncode == 0, removed.stderr
    assert "taking out its `memory-mcp hook claude-code` entries only" in removed.stderr
    assert json.loads(settings.read_text()) == own  # the user's own hook stays
    again = memory_mcp(without, env, "uninstall", "claude-code", "--project", str(repo))
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert "and no `memory-mcp hook claude-code` entry in" in again.stderr
    doctor = memory_mcp(without, env, "doctor", cwd=repo).stdout
    assert "hooks wired in" not in doctor  # still named: the hook log saw it fail
    assert "`memory-mcp uninstall claude-code --project DIR` in the project whose hooks" in doctor
