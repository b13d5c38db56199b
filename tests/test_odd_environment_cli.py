"""The command line in an odd environment (QA report env2): a current folder deleted under the
shell, stdin or stdout closed, a reader that stops early (`| head -1`), a narrow terminal.
Each is one line on stderr and an exit code, never a traceback; the MCP servers an agent
starts (`proxy`, `--stdio`) still serve. Real subprocesses, a real store, real pipes and
ptys; the odd part is made by the shell (`<&-`, `>&-`, `rmdir "$PWD"`) or the pipe itself."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest
from harness_support import closed_port
from semantic_memory import spool
from test_service_support import memory_mcp_command

GONE = "Error: the current folder no longer exists (deleted?): cd to a project folder"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "odd-env-test", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """No MEMORY_* from the caller; the store in `tmp`, the service down."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "db" / "memory.db"), HOME=str(tmp / "home"),
               MEMORY_PORT=str(closed_port()), NO_COLOR="1", **extra)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    return env


def memory_mcp(env: dict[str, str], *args: str, shell: str = 'exec "$@"',
               cwd: Path | None = None, stdin: str | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` through `sh -c SHELL` (which redirects or deletes what it must)."""
    return subprocess.run(["sh", "-c", shell, "sh", *memory_mcp_command(), *args], env=env,
                          cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def one_line(done: subprocess.CompletedProcess[str], code: int, line: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert (done.returncode, done.stderr.strip().splitlines()[-1:]) == (code, [line]), \
        done.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with two live memories and a forgotten one; its environment (the tests that
    use it change nothing in it)."""
    env = cli_env(tmp_path_factory.mktemp("odd-env-store"))
    for text in ("The web repo uses pnpm as its package manager, not npm",
                 "The api repo deploys with fly.io from the main branch only",
                 "The old billing cron ran at midnight UTC"):
        assert memory_mcp(env, "store", text, "--project", "web").returncode == 0
    uid = json.loads(memory_mcp(env, "list", "--json").stdout)[0]["uid"]
    assert memory_mcp(env, "forget", uid).returncode == 0
    return env


# --- a deleted current folder -------------------------------------------------------------

#: Run in a folder the shell deletes first, as a folder deleted under an open shell.
DELETED = 'mkdir -p "$GONE" && cd "$GONE" && rmdir "$GONE" && exec "$@"'


@pytest.mark.parametrize("args", [("doctor",), ("import", "claude-code", "--dry-run"),
                                  ("allow",), ("--db", "relative.db", "list")])
def test_a_command_in_a_deleted_folder_says_so_in_one_line(tmp_path: Path,
                                                           args: tuple[str, ...]) -> None:
    """`doctor` and `import` printed a FileNotFoundError traceback; `allow` said the
    `.semantic-memory.toml` was unreadable."""
    env = cli_env(tmp_path, GONE=str(tmp_path / "gone"))
    one_line(memory_mcp(env, *args, shell=DELETED), 2, GONE)


def rpc(env: dict[str, str], args: list[str], messages: list[dict[str, object]],
        timeout: float = 90) -> tuple[list[dict[str, object]], str, int]:
    """Send `messages` to an MCP server over stdio started in a deleted folder, close its
    stdin; (its answers, its stderr, its exit code)."""
    data = "".join(json.dumps(m) + "\n" for m in messages)
    done = memory_mcp(env, *args, shell=DELETED, stdin=data, timeout=timeout)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return answers, done.stderr, done.returncode


def test_the_proxy_in_a_deleted_folder_still_serves_and_files_under_its_project(
        tmp_path: Path) -> None:
    """It died on `os.getcwd()`: the agent's MCP server gone. It serves from the nearest
    folder that is left, and a store is filed under the project the hooks give that folder
    (spooled here: the service is down)."""
    env = cli_env(tmp_path, GONE=str(tmp_path / "gone-worktree"),
                  MEMORY_MCP_PROXY_TIMEOUT_S="1")
    store_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "memory_store", "arguments": {"content": "The deploy target is fly.io"}}}
    answers, stderr, code = rpc(env, ["proxy"], [INITIALIZE, INITIALIZED, store_call])
    assert code == 0 and "Traceback" not in stderr, stderr
    by_id = {a.get("id"): a for a in answers}
    assert "gone-worktree" in by_id[1]["result"]["instructions"]  # type: ignore[index]
    assert not by_id[2]["result"].get("isError"), by_id[2]  # type: ignore[union-attr]
    bodies = [r["body"] for _, r in spool.records(tmp_path / "db" / "spool") if r]
    assert [b["project"] for b in bodies] == ["gone-worktree"]
    assert "no longer exists" in stderr


def test_stdio_in_a_deleted_folder_still_serves(tmp_path: Path) -> None:
    env = cli_env(tmp_path, GONE=str(tmp_path / "gone"))
    answers, stderr, code = rpc(env, ["--stdio"], [INITIALIZE])
    assert code == 0 and "Traceback" not in stderr, stderr
    assert answers and answers[0]["id"] == 1 and "result" in answers[0], (answers, stderr)


# --- closed standard streams --------------------------------------------------------------

@pytest.mark.parametrize("args", [("store", "-"), ("import", "-"),
                                  ("update", "UID", "--content", "-")])
def test_reading_a_closed_stdin_is_one_line(store: dict[str, str],
                                            args: tuple[str, ...]) -> None:
    """They printed `AttributeError: 'NoneType' object has no attribute 'buffer'`."""
    uid = json.loads(memory_mcp(store, "list", "--json").stdout)[0]["uid"]
    args = tuple(uid if arg == "UID" else arg for arg in args)
    one_line(memory_mcp(store, *args, shell='exec "$@" <&-'), 1,
             "Error: standard input is closed: nothing to read")


@pytest.mark.parametrize(("args", "line"), [
    (("proxy",), "memory-mcp proxy: standard input is closed: an MCP server over stdio needs "
                 "both (the agent starts it with pipes)"),
    (("--stdio",), "Error: standard input is closed: an MCP server over stdio needs both (the "
                   "agent starts it with pipes)")])
def test_an_mcp_server_with_stdin_closed_is_one_line(tmp_path: Path, args: tuple[str, ...],
                                                     line: str) -> None:
    """The proxy printed an `OSError: [Errno 9] Bad file descriptor` traceback."""
    one_line(memory_mcp(cli_env(tmp_path), *args, shell='exec "$@" <&-'), 2, line)


def test_export_with_stdout_closed_is_one_line(store: dict[str, str]) -> None:
    one_line(memory_mcp(store, "export", shell='exec "$@" >&-'), 1,
             "Error: standard output is closed: write to a file with -o FILE")


# --- a reader that stops early ------------------------------------------------------------

@pytest.mark.parametrize("args", [("export",), ("list",), ("list", "--json"),
                                  ("recall", "repo"), ("forgotten",), ("stats",),
                                  ("plugins",), ("spool", "list")])
def test_a_reader_gone_ends_every_command_quietly(store: dict[str, str],
                                                  args: tuple[str, ...]) -> None:
    """`| head -1`, its reader gone before the first write: export said `cannot write
    standard output: Broken pipe`, exit code 1; stats and plugins exited 1 without a word.
    Now every command stops there: exit code 0, nothing on stderr about it."""
    read, write = os.pipe()
    os.close(read)  # every write fails with EPIPE, whatever its size
    try:
        done = subprocess.run([*memory_mcp_command(), *args], env=store, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write)
    assert done.returncode == 0, done.stderr
    for noise in ("Traceback", "Broken pipe", "BrokenPipe", "Exception ignored"):
        assert noise not in done.stderr, done.stderr


# --- narrow terminals ---------------------------------------------------------------------

def on_terminal(env: dict[str, str], columns: int, *args: str) -> str:
    """What `memory-mcp ARGS` shows on a terminal `columns` wide (a pty), escapes removed."""
    main, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([*memory_mcp_command(), *args], env=env, stdout=secondary,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    os.close(secondary)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the child is gone and the pty drained
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            elif proc.poll() is not None:
                break
    finally:
        os.close(main)
        proc.wait(timeout=30)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.fixture(scope="module")
def whole_values(store: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(command, the uids and times it must show whole)."""
    live = json.loads(memory_mcp(store, "list", "--json").stdout)
    gone = json.loads(memory_mcp(store, "forgotten", "--json").stdout)
    return [("list", [v for m in live for v in (m["uid"], m["updated_at"])]),
            ("recall repo", [m["uid"] for m in live]),
            ("forgotten", [v for m in gone for v in (m["uid"], m["forgotten_at"],
                                                     m["purged_after"] or "")])]


@pytest.mark.parametrize("columns", [30, 80])
def test_a_narrow_terminal_never_cuts_a_uid_or_a_time(
        store: dict[str, str], whole_values: list[tuple[str, list[str]]],
        columns: int) -> None:
    """At 30 columns every cell but the uid was `…`; at 80 `updated` was cut to
    `2026-12-07T03:32…`. Below 60 columns (or too narrow for a table's uids and times and
    some room), each row is one line, as when piped."""
    for command, values in whole_values:
        shown = on_terminal(store, columns, *command.split())
        for value in filter(None, values):
            assert value in shown, (command, value, shown)
        assert "…" not in shown, (command, shown)
        if columns < 60:  # one line per row (the terminal wraps it), its content whole
            assert any(line.startswith(" uid ") or line.startswith(" score ")
                       for line in shown.splitlines()), shown
            assert len(shown.strip().splitlines()) == 1 + len(values) // max(
                1, {"list": 2, "recall repo": 1, "forgotten": 3}[command]), shown
