"""`memory-mcp doctor` flags every program and plugin module a harness config names that is
gone, not only a hook's: the MCP server's command (a venv deleted since install), opencode's
plugin file and command, and a script whose venv lost its Python. Real CLI subprocesses in
real environments (tests/test_core_cli.py `venv_like_this`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from harness_support import closed_port, hook_env
from test_core_cli import venv_like_this
from test_service_support import memory_mcp_command

from semantic_memory_opencode import plugin_path

HARNESSES = ("claude-code", "codex", "kimi-code", "opencode")
FIX = "again from a lasting install (docs/cli.md#install)"


def memory_mcp(program: list[str], env: dict[str, str], *args: str,
               cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*program, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def setup(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()),
                    CODEX_HOME=str(tmp_path / "codex"), KIMI_CODE_HOME=str(tmp_path / "kimi"),
                    XDG_CONFIG_HOME=str(tmp_path / "xdg"), CLAUDE_CONFIG_DIR="")


def test_doctor_flags_mcp_commands_and_plugin_modules_that_are_gone(tmp_path: Path) -> None:
    env = setup(tmp_path)
    scratch = str(venv_like_this(tmp_path / "scratch"))  # a venv deleted later
    for harness in HARNESSES:
        done = memory_mcp([scratch], env, "install", harness, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    # opencode's plugin as an install from another place wrote it (a checkout moved since)
    old_plugin = tmp_path / "old-checkout" / plugin_path().name
    old_plugin.parent.mkdir()
    shutil.copy(plugin_path(), old_plugin)
    opencode = tmp_path / "xdg" / "opencode" / "opencode.json"
    config = json.loads(opencode.read_text())
    config["plugin"][0][0] = old_plugin.as_uri()
    opencode.write_text(json.dumps(config, indent=2))
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=tmp_path).stdout
    assert "MISSING" not in doctor and "plugin: yes" in doctor, doctor

    shutil.rmtree(tmp_path / "scratch")
    shutil.rmtree(old_plugin.parent)
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=tmp_path).stdout
    home = tmp_path / "home"
    for program, what, harness in [
            (scratch, f"which the hooks in {home / '.claude' / 'settings.json'} run: each "
                      "fails (exit 127)", "claude-code"),
            (scratch, f"a command in {home / '.claude.json'}: the harness cannot start it",
             "claude-code"),
            (scratch, f"a command in {tmp_path / 'codex' / 'config.toml'}: the harness "
                      "cannot start it", "codex"),
            (scratch, f"a command in {tmp_path / 'kimi' / 'mcp.json'}: the harness cannot "
                      "start it", "kimi-code"),
            (scratch, f"a command in {opencode}: the harness cannot start it", "opencode"),
            (str(old_plugin), f"the plugin {opencode} loads: the harness cannot load it",
             "opencode")]:
        line = f"  MISSING  {program}, {what}; run `memory-mcp install {harness}` {FIX}"
        assert line in doctor.splitlines(), (line, doctor)
    assert doctor.count("MISSING") == 8  # and the hooks of Codex and Kimi Code

    for harness in HARNESSES:  # the fix the lines name
        done = memory_mcp(memory_mcp_command(), env, "install", harness, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=tmp_path).stdout
    assert "MISSING" not in doctor and "plugin: yes" in doctor, doctor


def test_doctor_flags_a_script_whose_python_is_gone(tmp_path: Path) -> None:
    """A venv's scripts outlive the interpreter they name (a uv-managed Python removed)."""
    env = setup(tmp_path)
    scratch = venv_like_this(tmp_path / "scratch")
    done = memory_mcp([str(scratch)], env, "install", "claude-code", "--mcp", "none",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for python in scratch.parent.glob("python*"):
        python.unlink()
    settings = tmp_path / "home" / ".claude" / "settings.json"
    command = json.loads(settings.read_text())["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    ran = subprocess.run(command["command"], shell=True, input="{}", capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode in (126, 127), ran  # "bad interpreter"
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=tmp_path).stdout
    assert (f"  MISSING  {scratch}, which the hooks in {settings} run: each fails (exit 127); "
            f"run `memory-mcp install claude-code` {FIX}") in doctor.splitlines(), doctor
