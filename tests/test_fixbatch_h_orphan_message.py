"""The error of an uninstall that finds neither the harness's adapter nor its orphaned hooks
names every folder it looked in: those CLAUDE_CONFIG_DIR, CODEX_HOME and KIMI_CODE_HOME name
too (doctor and uninstall look there). Real CLI subprocesses."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness_support import closed_port, hook_env
from test_service_support import memory_mcp_command


def memory_mcp(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_uninstall_of_an_unknown_harness_names_the_moved_config_folders(tmp_path: Path) -> None:
    moved = tmp_path / "claude-config"
    moved.mkdir()
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()), CLAUDE_CONFIG_DIR=str(moved),
                   CODEX_HOME="")
    (tmp_path / "home").mkdir()
    done = memory_mcp(env, "uninstall", "gone-harness", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.endswith(
        f"and no `memory-mcp hook gone-harness` entry in {tmp_path / 'home'}'s config folders or "
        f"the folders CLAUDE_CONFIG_DIR ({moved}), CODEX_HOME (unset) and KIMI_CODE_HOME "
        "(unset) name"), line

    project = tmp_path / "project"
    project.mkdir()
    done = memory_mcp(env, "uninstall", "gone-harness", "--project", str(project), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().endswith(f"entry in {project}'s config folders"), done.stderr
