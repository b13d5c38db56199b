"""Usage errors in one line on stderr (click printed four: the usage, a help hint, a blank
line, the reason, and on stdout when stderr was closed, into a script's JSON file); `--db`
after the command and `--stdio` with one said nothing useful or were dropped; and `list` on an
80-column terminal, whose content column was 8 characters wide."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from test_service_support import memory_mcp_command

TIMEOUT_S = 60  # only so a regression fails instead of hanging the suite


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMORY_") and k not in ("COLUMNS", "LINES")}
    return {**env, "MEMORY_DB_PATH": str(tmp / "memory.db"), "HOME": str(tmp / "home")}


def _run(tmp: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                          env=_env(tmp), timeout=TIMEOUT_S, **kwargs)  # type: ignore[call-overload]


@pytest.mark.parametrize(("args", "reason"), [
    (["list", "--limit", "0"], "Error: Invalid value for '--limit': 0 is not in the range "),
    (["recall", "x", "--since", "1M"], "Error: Invalid value for --since: '1M': M could be "),
    (["list", "--nosuch"], "Error: No such option '--nosuch'"),
    (["purge", "--yes"], "Error: --project, --dry-run and --yes go with --matching TEXT"),
])
def test_a_usage_error_is_one_line_on_stderr(tmp_path: Path, args: list[str],
                                            reason: str) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(reason), done.stderr


def test_purge_matching_without_yes_lists_then_says_why_in_one_line(tmp_path: Path) -> None:
    assert _run(tmp_path, "store", "the blue key opens the shed").returncode == 0
    done = _run(tmp_path, "purge", "--matching", "blue key")
    assert done.returncode == 2 and "the blue key opens the shed" in done.stdout
    assert "Usage:" not in done.stderr and "Try " not in done.stderr
    assert done.stderr.splitlines()[-1] == ("Error: this deletes them for good (no `unforget`); "
                                            "add --yes to confirm")


@pytest.mark.parametrize("args", [["list", "--limit", "0", "--json"], ["forget", "nosuch"]])
def test_with_stderr_closed_an_error_never_goes_to_stdout(tmp_path: Path,
                                                          args: list[str]) -> None:
    done = subprocess.run(["sh", "-c", '"$@" 2>&-', "sh", *memory_mcp_command(), *args],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=TIMEOUT_S)
    assert done.returncode in (1, 2) and done.stdout == ""


def test_db_after_the_command_says_where_it_goes(tmp_path: Path) -> None:
    done = _run(tmp_path, "list", "--db", str(tmp_path / "other.db"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "Error: --db goes before the command: memory-mcp --db FILE list …\n"
    before = _run(tmp_path, "--db", str(tmp_path / "other.db"), "list", "--json")
    assert before.returncode == 0 and before.stdout == "[]\n"


@pytest.mark.parametrize("args", [["--stdio", "list"], ["--stdio", "serve", "--port", "0"]])
def test_stdio_with_a_command_is_refused(tmp_path: Path, args: list[str]) -> None:
    """`--stdio serve --port 5` served HTTP on port 5, `--stdio list` listed."""
    done = _run(tmp_path, *args, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("Error: --stdio serves MCP over stdin/stdout: give it "
                                  "without a command"), done.stderr
    assert len(done.stderr.splitlines()) == 1


def _on_terminal(tmp: Path, columns: int, *args: str) -> str:
    """What `memory-mcp ARGS` shows on a terminal `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    child = subprocess.Popen([*memory_mcp_command(), *args], stdout=follower,
                             stderr=subprocess.PIPE, env={**_env(tmp), "TERM": "xterm"})
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    child.wait(timeout=TIMEOUT_S)
    os.close(leader)
    assert child.returncode == 0
    return shown.decode()


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_list_on_an_80_column_terminal_keeps_each_memory_on_its_line(tmp_path: Path) -> None:
    short = "Deploys go through the staging cluster first, then prod"
    assert _run(tmp_path, "store", short, "--project", "web").returncode == 0
    assert _run(tmp_path, "store", "A very long memory text about deployment pipelines " * 4,
                "--project", "a-rather-long-project-name").returncode == 0
    shown = _on_terminal(tmp_path, 80, "list")
    assert short in shown, shown  # not folded into a column 8 characters wide
    wide = _on_terminal(tmp_path, 200, "list")  # room enough: still a table
    assert short in wide and "content" in wide.splitlines()[0]
