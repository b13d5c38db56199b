"""The hooks of an uninstalled adapter are found where install wrote them when CLAUDE_CONFIG_DIR,
CODEX_HOME or KIMI_CODE_HOME move the harness's config out of the home folder: `doctor`
names them and `uninstall` takes them out. Real CLI subprocesses in real environments."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness_support import closed_port, hook_env
from test_core_cli import venv_like_this
from test_service_support import memory_mcp_command

HARNESSES = ("claude-code", "codex", "kimi-code")


def memory_mcp(program: list[str], env: dict[str, str], *args: str,
               cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*program, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def test_hooks_wired_in_moved_config_folders_are_found_and_taken_out(tmp_path: Path) -> None:
    homes = {"claude-code": tmp_path / "claude-config", "codex": tmp_path / "codex-home",
             "kimi-code": tmp_path / "kimi-home"}
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()),
                   CLAUDE_CONFIG_DIR=str(homes["claude-code"]), CODEX_HOME=str(homes["codex"]),
                   KIMI_CODE_HOME=str(homes["kimi-code"]))
    (tmp_path / "home").mkdir()
    for harness in HARNESSES:
        done = memory_mcp(memory_mcp_command(), env, "install", harness, "--mcp", "none",
                          cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    hooks = {"claude-code": homes["claude-code"] / "settings.json",
             "codex": homes["codex"] / "hooks.json",
             "kimi-code": homes["kimi-code"] / "config.toml"}
    assert all("memory-mcp" in hooks[h].read_text() for h in HARNESSES)
    assert not list((tmp_path / "home").iterdir())  # nothing in the home folder itself

    # Their adapters uninstalled: every one of their hooks fails.
    without = [str(venv_like_this(tmp_path / "venv", ("claude_code", "codex", "kimi_code")))]
    doctor = memory_mcp(without, env, "doctor", cwd=tmp_path).stdout
    for harness in HARNESSES:
        assert f"{harness}  (NO ADAPTER INSTALLED: its hooks fail on every prompt)" in doctor
        assert f"  user     hooks wired in {hooks[harness]}" in doctor, doctor
        assert f"  fix: `memory-mcp uninstall {harness}` takes them out" in doctor

    for harness in HARNESSES:
        removed = memory_mcp(without, env, "uninstall", harness, cwd=tmp_path)
        assert removed.returncode == 0, removed.stderr
        assert f"taking out its `memory-mcp hook {harness}` entries only" in removed.stderr
    assert not any(path.exists() and "memory-mcp" in path.read_text()
                   for path in hooks.values())
    doctor = memory_mcp(without, env, "doctor", cwd=tmp_path).stdout
    assert "hooks wired in" not in doctor and "NO ADAPTER INSTALLED" not in doctor
