"""`import` of a file that is no JSON lines: a `backup` (a SQLite store) or a compressed file
is refused in one line that says what to do with it; any other junk names its first bad lines
and counts the rest (a 52 MB backup gave 310,140 lines on stderr)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

from test_service_support import memory_mcp_command

TIMEOUT_S = 120  # only so a regression fails instead of hanging the suite


def _run(db: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(db), HOME=str(db.parent / "home"))
    return subprocess.run([*memory_mcp_command(), *args], capture_output=True, env=env,
                          timeout=TIMEOUT_S,
                          **{"text": True, **kwargs})  # type: ignore[call-overload]


def _notes(path: Path, count: int = 3000) -> Path:
    path.write_text("".join(json.dumps({"content": f"note {i} about caching and deploy "
                                                   "pipelines"}) + "\n" for i in range(count)))
    return path


def _stored(db: Path) -> int:
    done = _run(db, "stats", "--json")
    return json.loads(done.stdout)["memories"]


def test_a_backup_is_refused_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "source" / "memory.db"
    source.parent.mkdir()
    assert _run(source, "import", str(_notes(tmp_path / "notes.jsonl"))).returncode == 0
    backup = tmp_path / "memory.bak.db"
    assert _run(source, "backup", str(backup)).returncode == 0
    db = tmp_path / "memory.db"
    done = _run(db, "import", str(backup))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"Error: {backup} is a SQLite store (a `memory-mcp backup`?), not "
                           f"JSON lines: put it back with `memory-mcp restore {backup}`; nothing "
                           "was stored\n")
    assert _stored(db) == 0


def test_a_gzip_file_is_refused_in_one_line_also_on_stdin(tmp_path: Path) -> None:
    packed = tmp_path / "notes.jsonl.gz"
    packed.write_bytes(gzip.compress(_notes(tmp_path / "notes.jsonl").read_bytes()))
    db = tmp_path / "memory.db"
    done = _run(db, "import", str(packed))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"Error: {packed} is gzip-compressed, not JSON lines: decompress it "
                           f"first (`memory-mcp import <(zcat {packed})`); nothing was stored\n")
    with packed.open("rb") as stdin:
        piped = _run(db, "import", "-", stdin=stdin, text=False)
    assert piped.returncode == 1 and piped.stderr.decode().startswith(
        "Error: standard input is gzip-compressed")
    assert _stored(db) == 0


def test_other_junk_names_its_first_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"".join(bytes([0x80 + i % 100, 0x00, 0xff]) * 20 + b"\n"
                              for i in range(500)))
    db = tmp_path / "memory.db"
    done = _run(db, "import", str(junk))
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"new": 0, "duplicate": 0, "rejected": 0, "bad": 500}
    lines = done.stderr.splitlines()
    assert lines[:2] == ["line 1: not UTF-8 text", "line 2: not UTF-8 text"]
    assert len(lines) == 21 and lines[-1] == "… and 480 more bad lines, not shown", lines
