"""Hook wiring that outlives what it points at: an adapter uninstalled after `install`, and a
`memory-mcp` run from a place that empties (`uvx`'s cache, the temp folder). Real CLI
subprocesses in real environments (tests/test_core_cli.py `venv_like_this`)."""

from __future__ import annotations

import json
import shutil
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


def test_install_refuses_to_point_hooks_into_a_cache(tmp_path: Path) -> None:
    """`uvx --from … memory-mcp install` runs from uv's cache: `uv cache clean` would leave
    every hook failing (exit 127)."""
    env, repo = setup(tmp_path)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    cached = [str(venv_like_this(tmp_path / "cache" / "uv" / "archive-v0" / "Xy12"))]
    for dry in ((), ("--dry-run",)):
        refused = memory_mcp(cached, env, "install", "claude-code", "--project", str(repo), *dry)
        assert refused.returncode == 1, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"Error: memory-mcp runs from a cache ({cached[0]}: uvx"), lines
        assert "`uv tool install semantic-memory-core --with semantic-memory-sidecar`" in lines[0]
        assert lines[0].endswith("nothing was changed") and not refused.stdout
    assert not list((repo / ".claude").iterdir())
    # uninstall is the way out, from anywhere
    assert memory_mcp(cached, env, "uninstall", "claude-code", "--project",
                      str(repo)).returncode == 0


def test_doctor_flags_a_hook_whose_program_is_gone(tmp_path: Path) -> None:
    env, repo = setup(tmp_path)
    scratch = [str(venv_like_this(tmp_path / "scratch"))]  # in the temp folder
    installed = memory_mcp(scratch, env, "install", "claude-code", "--project", str(repo))
    assert installed.returncode == 0, installed.stderr
    assert installed.stderr.startswith("warning: memory-mcp runs from the temp folder ")
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert command.startswith(scratch[0])
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=repo).stdout
    assert "MISSING" not in doctor

    shutil.rmtree(tmp_path / "scratch")  # a reboot, a `uv cache clean`
    ran = subprocess.run(command, shell=True, input=json.dumps(PROMPT), capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 127
    doctor = memory_mcp(memory_mcp_command(), env, "doctor", cwd=repo).stdout
    assert (f"  MISSING  {scratch[0]}, which the hooks in {repo / '.claude'}/"
            "settings.local.json run: each fails (exit 127); run `memory-mcp install "
            f"claude-code --project {repo}` again from a lasting install") in doctor, doctor
