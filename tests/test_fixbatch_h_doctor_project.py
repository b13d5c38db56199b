"""`memory-mcp doctor --project DIR` refuses a folder that is not there (exit code 2, one
`Error:` line), as `allow` and `install --project` do: it printed a made-up `project nope`
and went on. Real CLI subprocesses."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness_support import closed_port, hook_env
from test_service_support import memory_mcp_command


def memory_mcp(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_doctor_refuses_a_project_folder_that_is_not_there(tmp_path: Path) -> None:
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()))
    (tmp_path / "home").mkdir()
    missing = tmp_path / "nope"
    done = memory_mcp(env, "doctor", "--project", str(missing), cwd=tmp_path)
    assert done.returncode == 2, done.stdout  # a usage error, as `allow nope` and `install`
    assert done.stdout == "" and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: Invalid value for '--project': Directory '{missing}' does not "
                      "exist."], done.stderr
    allowed = memory_mcp(env, "allow", str(missing), cwd=tmp_path)
    assert allowed.returncode == done.returncode

    # A file is no project folder either; a real one is checked as before (service down: 1).
    (tmp_path / "file.txt").write_text("x")
    assert memory_mcp(env, "doctor", "--project", str(tmp_path / "file.txt"),
                      cwd=tmp_path).returncode == 2
    (tmp_path / "repo").mkdir()
    checked = memory_mcp(env, "doctor", "--project", str(tmp_path / "repo"), cwd=tmp_path)
    assert checked.returncode == 1 and "project   repo" in checked.stdout, checked.stdout
