"""`memory-mcp list | cat`: piped, rich drew every table 80 columns wide, cutting the time to
`2026-12-06T21…` and a long project name mid-word, and wrapping `stats` lines. Output that is
no terminal keeps whole values; a terminal's tables still fit its width (the uid whole)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

PROJECT = "github.com/acme/a-rather-long-repository-name-for-the-web-frontend"
CONTENT = "Use pnpm, not npm, in the web repo: the lockfile is pnpm-lock.yaml"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def env_for(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEMORY_") and k not in ("COLUMNS", "LINES")}
    return {**env, "MEMORY_DB_PATH": str(db)}


def piped(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env_for(db),
                          capture_output=True, text=True, timeout=60)


def on_terminal(db: Path, columns: int, *args: str) -> str:
    """What `memory-mcp ARGS` prints on a pseudo-terminal `columns` wide, colours left out."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "semantic_memory", *args],
                            env={**env_for(db), "TERM": "xterm"}, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return ANSI.sub("", out.decode("utf-8", "replace")).replace("\r\n", "\n")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    db = tmp_path / "a-data-folder-with-a-long-name-to-make-the-path-wide" / "memory.db"
    db.parent.mkdir()
    stored = piped(db, "store", CONTENT, "--project", PROJECT, "--json")
    assert stored.returncode == 0, stored.stderr
    return db


def test_piped_tables_keep_whole_values(db: Path) -> None:
    memory = json.loads(piped(db, "list", "--json").stdout)[0]
    listed = piped(db, "list").stdout.splitlines()
    assert len(listed) == 2, listed  # a header and one row: nothing wrapped
    for value in (memory["uid"], memory["updated_at"], PROJECT, CONTENT):
        assert value in listed[1], (value, listed)
    recalled = piped(db, "recall", "pnpm lockfile").stdout.splitlines()
    assert len(recalled) == 2 and PROJECT in recalled[1] and CONTENT in recalled[1], recalled
    stats = piped(db, "stats").stdout.splitlines()
    assert any(str(db) in line for line in stats), stats  # the path on one line


def test_a_terminal_table_still_fits_the_terminal(db: Path) -> None:
    uid = json.loads(piped(db, "list", "--json").stdout)[0]["uid"]
    # 130 columns: a table whose content wraps (the uid and the time are kept whole; below
    # about 120-130 columns, with this long project name, the content column would get fewer
    # than 30 and `list` prints one row per line, as piped: test_odd_environment_cli.py)
    shown = on_terminal(db, 130, "list")
    lines = [line for line in shown.splitlines() if line.strip()]
    assert uid in shown and len(lines) > 2, shown  # squeezed: the content wraps
    assert max(len(line.rstrip()) for line in lines) <= 130, shown
