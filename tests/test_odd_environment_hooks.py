"""Hooks in an odd environment (QA report env2): a locale that is not UTF-8 with a non-ASCII
project folder, a working folder deleted under the agent, stdin closed or a terminal or never
written, stderr closed with MEMORY_PLUGIN_DEBUG on. Each hook exits 0, and a "remember" is
stored or spooled under the project a UTF-8 locale gives it, never dropped.

The service is down in every test (a closed port): a write goes to the spool, where its body
shows the project it was filed under. The hooks run as a harness runs them: `memory-mcp hook`
as a subprocess, real folders, a real spool; the odd part is made by the shell (`<&-`,
`2>&-`), a pty, or the locale variables."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness_support import add_turn, closed_port, hook_env, hook_log, run_hook
from semantic_memory import spool
from test_service_support import memory_mcp_command

REMOTE = "github.com/acme/app"
#: Python with the C locale, neither coerced to UTF-8 nor in UTF-8 mode: its file system
#: encoding is ASCII, on every Linux (no locale has to be installed for it).
ASCII_LOCALE = {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}


def down_env(tmp: Path, **extra: str) -> dict[str, str]:
    return hook_env(tmp, f"http://127.0.0.1:{closed_port()}", **extra)


def spooled(tmp: Path) -> list[dict[str, Any]]:
    """The memories waiting in the spool, oldest first."""
    bodies = [record["body"] for _, record in spool.records(tmp / "spool") if record]
    return [item for body in bodies for item in body.get("items", [body])]


def fs_encoding(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                          env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def latin1_locale(tmp: Path) -> dict[str, str]:
    """LC_ALL=en_US.ISO-8859-1 from a locale compiled into `tmp` (`localedef`, from libc-bin;
    its sources from Debian's `locales`, which .ci/run installs)."""
    assert shutil.which("localedef"), "no localedef to build an ISO-8859-1 locale"
    folder = tmp / "locales"
    folder.mkdir()
    done = subprocess.run(["localedef", "-i", "en_US", "-f", "ISO-8859-1",
                           str(folder / "en_US.ISO-8859-1")], capture_output=True)
    assert (folder / "en_US.ISO-8859-1").exists(), done.stderr
    return {"LOCPATH": str(folder), "LC_ALL": "en_US.ISO-8859-1"}


def repository(folder: Path, remote: str | None = f"https://{REMOTE}.git") -> Path:
    """A checkout as `.git/config` shows one (no `git` needed)."""
    (folder / ".git").mkdir(parents=True)
    config = f'[remote "origin"]\n\turl = {remote}\n' if remote else "[core]\n"
    (folder / ".git" / "config").write_text(config, encoding="utf-8")
    return folder


@pytest.fixture(params=["ascii", "latin-1"])
def odd_locale(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    locale = ASCII_LOCALE if request.param == "ascii" else latin1_locale(tmp_path)
    encoding = fs_encoding({**os.environ, **locale})
    assert encoding in ("ascii", "iso8859-1"), encoding
    return locale


@pytest.mark.parametrize(("name", "with_remote", "project"), [
    ("项目", True, REMOTE),  # not encodable in the locale: it was lost, UnicodeEncodeError
    ("caf é", True, REMOTE),  # encodable as other bytes: it was filed under "caf é"
    ("plain é", False, "plain é"),  # no remote: the folder's name, as a UTF-8 locale reads it
])
def test_a_remember_in_a_non_ascii_folder_keeps_its_project_in_any_locale(
        tmp_path: Path, odd_locale: dict[str, str], name: str, with_remote: bool,
        project: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    if with_remote:
        repository(folder)
    payload = {"session_id": "s1", "cwd": str(folder),
               "prompt": "remember the app uses pnpm 9 for its workspaces"}
    done = run_hook("claude-code", "UserPromptSubmit", payload,
                    down_env(tmp_path, **odd_locale), cwd=folder)
    assert done.returncode == 0, done.stderr
    line = hook_log(tmp_path)[-1]
    assert line["outcome"] == "spooled", line
    assert line["project"] == project
    assert [m["project"] for m in spooled(tmp_path)] == [project]
    assert "will store this" in done.json()["hookSpecificOutput"]["additionalContext"]


def test_a_compaction_reads_a_transcript_in_a_non_ascii_folder(tmp_path: Path) -> None:
    """`transcript_path` is UTF-8 text too: under an ASCII locale the file was not found, and
    the flush stored nothing ("no conversation to flush")."""
    folder = repository(tmp_path / "项目")
    transcript = folder / "会话.jsonl"
    add_turn(transcript, "Which port does the billing service use?",
             "The billing service listens on port 8443 behind the gateway.")
    payload = {"session_id": "s1", "cwd": str(folder), "transcript_path": str(transcript)}
    done = run_hook("claude-code", "PreCompact", payload, down_env(tmp_path, **ASCII_LOCALE),
                    cwd=folder)
    assert done.returncode == 0, done.stderr
    line = hook_log(tmp_path)[-1]
    assert line["outcome"] == "spooled", line
    assert [m["project"] for m in spooled(tmp_path)] == [REMOTE]


def test_a_kimi_compaction_finds_its_session_in_a_non_ascii_folder(tmp_path: Path) -> None:
    """Kimi Code names a session's folder in `session_index.jsonl`, UTF-8 text like any path
    a harness writes: under an ASCII locale the wire file was not found, and the flush stored
    nothing."""
    folder = repository(tmp_path / "项目")
    session_dir = tmp_path / "会话" / "s1"
    wire = session_dir / "agents" / "main" / "wire.jsonl"
    wire.parent.mkdir(parents=True)
    lines = [
        {"type": "context.append_message", "time": 1796117668004, "message": {
            "role": "user", "origin": {"kind": "user"},
            "content": [{"type": "text", "text": "Which port does the billing service use?"}]}},
        {"type": "context.append_loop_event", "time": 1796117668006, "event": {
            "type": "content.part", "part": {"type": "text", "text":
                                             "The billing service listens on port 8443."}}}]
    wire.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    home = tmp_path / "kimi"
    home.mkdir()
    (home / "session_index.jsonl").write_text(json.dumps(
        {"sessionId": "s1", "sessionDir": str(session_dir)}, ensure_ascii=False) + "\n",
        encoding="utf-8")
    payload = {"session_id": "s1", "cwd": str(folder), "hook_event_name": "PreCompact"}
    done = run_hook("kimi-code", "PreCompact", payload,
                    down_env(tmp_path, KIMI_CODE_HOME=str(home), **ASCII_LOCALE), cwd=folder)
    assert done.returncode == 0, done.stderr
    line = hook_log(tmp_path)[-1]
    assert line["outcome"] == "spooled", line
    assert ["port 8443" in json.dumps(m) for m in spooled(tmp_path)] == [True], spooled(tmp_path)


def in_deleted_folder(folder: Path, command: list[str]) -> list[str]:
    """`command` run from `folder`, deleted just before it starts (as a shell left in it)."""
    return ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(folder),
            *command]


def test_a_remember_without_cwd_in_a_deleted_folder_is_spooled_under_its_name(
        tmp_path: Path) -> None:
    """No `cwd` in the input and the folder gone: the remember was dropped as `capture off by
    .semantic-memory.toml: unreadable`, a file that does not exist."""
    gone = tmp_path / "gone-worktree"
    gone.mkdir()
    payload = json.dumps({"session_id": "g1", "prompt": "remember the deploy uses fly.io"})
    done = subprocess.run(in_deleted_folder(gone, [*memory_mcp_command(), "hook", "claude-code",
                                                   "UserPromptSubmit"]),
                          input=payload, env=down_env(tmp_path), capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    line = hook_log(tmp_path)[-1]
    assert line["outcome"] == "spooled", line
    assert "warning" not in line
    assert [m["project"] for m in spooled(tmp_path)] == ["gone-worktree"]


@pytest.mark.parametrize("event", ["PreCompact", "UserPromptSubmit", "SessionStart"])
def test_a_hook_with_stdin_closed_is_skipped_for_no_input(tmp_path: Path, event: str) -> None:
    """It logged `error — AttributeError: 'NoneType' object has no attribute 'buffer'`, which
    `doctor` showed as the last failure."""
    done = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *memory_mcp_command(), "hook",
                           "claude-code", event], env=down_env(tmp_path),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    line = hook_log(tmp_path)[-1]
    assert (line["outcome"], line["detail"]) == ("skipped", "no hook input (stdin is closed)")


def test_a_prompt_hook_on_a_terminal_does_not_wait_for_input(tmp_path: Path) -> None:
    """A person ran it by hand: it waited out the budget and its grace, then logged a timeout
    `before the write was made (remember)` for a remember that never existed."""
    main, secondary = pty.openpty()
    try:
        done = subprocess.run([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                              stdin=secondary, env=down_env(tmp_path, MEMORY_HOOK_BUDGET_S="20"),
                              capture_output=True, text=True, timeout=60)
    finally:
        os.close(main)
        os.close(secondary)
    assert done.returncode == 0, done.stderr
    line = hook_log(tmp_path)[-1]
    assert (line["outcome"], line["detail"]) == ("skipped", "no hook input (stdin is a terminal)")
    assert line["ms"] < 20_000  # not the budget: it never waited


def test_input_that_never_comes_is_no_input_not_a_lost_remember(tmp_path: Path) -> None:
    """stdin open and never written (a harness that does not close it): the run times out at
    the budget, without the write grace a remember gets, and says no input came, not that a
    remember was not made."""
    proc = subprocess.Popen([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=down_env(tmp_path,
                                                                 MEMORY_HOOK_BUDGET_S="1"))
    try:
        proc.wait(timeout=30)  # stdin stays open (and empty) until the hook has exited
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0, err
    assert out == b""
    line = hook_log(tmp_path)[-1]
    assert line["outcome"] == "timeout", line
    assert line["detail"].endswith("waiting for the hook input (none came)"), line
    assert "remember" not in line["detail"]


def test_debug_with_stderr_closed_still_spools_and_exits_0(tmp_path: Path) -> None:
    """MEMORY_PLUGIN_DEBUG's writer raised outside the fail-open try: exit code 1, no spool
    file, no log line, the remember lost."""
    payload = json.dumps({"session_id": "d1", "cwd": str(tmp_path),
                          "prompt": "remember the cache ttl is 300 seconds"})
    done = subprocess.run(["sh", "-c", 'exec "$@" 2>&-', "sh", *memory_mcp_command(), "hook",
                           "claude-code", "UserPromptSubmit"], input=payload,
                          env=down_env(tmp_path, MEMORY_PLUGIN_DEBUG="1"),
                          stdout=subprocess.PIPE, text=True, timeout=30)
    assert done.returncode == 0
    assert hook_log(tmp_path)[-1]["outcome"] == "spooled"
    assert [m["content"] for m in spooled(tmp_path)] == ["the cache ttl is 300 seconds"]
