"""`memory-mcp import FILE` of JSON lines read as a stream: a pipe or a FIFO read once, a huge
line skipped in bounded memory, json's messages worded once, Ctrl-C summed up, and a harness
transcript refused in one line. Real subprocesses against real SQLite files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "harness_golden"
HANG_GUARD_S = 120  # only so a regression fails instead of hanging the suite


def _env(db: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    return {**env, "MEMORY_DB_PATH": str(db), "MEMORY_DEVICE": "cpu", **extra}


def _cli(db: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], input=stdin,
                          capture_output=True, text=True, env=_env(db), timeout=HANG_GUARD_S)


def _facts(count: int, word: str = "fact") -> str:
    return "".join(json.dumps({"content": f"{word} number {i}"}) + "\n" for i in range(count))


def _stored(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


@pytest.mark.skipif(sys.platform == "win32", reason="process substitution and FIFOs")
def test_process_substitution_is_read_once(tmp_path: Path) -> None:
    source = tmp_path / "facts.jsonl"
    source.write_text(_facts(50))
    db = tmp_path / "m.db"
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m semantic_memory import <(cat "{source}")'],
        capture_output=True, text=True, env=_env(db), timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new"] == 50
    assert _stored(db) == 50


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
def test_named_fifo_is_read_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as handle:  # blocks until the import opens it
            handle.write(_facts(30))

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    done = _cli(tmp_path / "m.db", "import", str(fifo))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["new"] == 30


def test_an_oversized_line_is_skipped_in_chunks() -> None:
    import io

    from semantic_memory.cli import _json_lines

    data = b'{"content": "a"}\n' + b"x" * 5000 + b"\n" + b"y" * 300 + b'{"content": "b"}\n'
    lines = list(_json_lines(io.BytesIO(data), cap=100))
    assert lines == [b'{"content": "a"}\n', None, None]
    # a line of exactly the cap (its newline aside) is whole, a last line without one too
    assert list(_json_lines(io.BytesIO(b"z" * 100 + b"\n" + b"w" * 100), cap=100)) == \
        [b"z" * 100 + b"\n", b"w" * 100]


def _peak_rss_kb(db: Path, file: Path) -> tuple[int, subprocess.CompletedProcess[str]]:
    """The import's peak RSS (KiB), measured by a fresh parent that runs only it."""
    probe = ("import resource, subprocess, sys; "
             "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stderr.write(done.stderr); print(done.returncode); print(done.stdout.strip()); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "semantic_memory",
                           "import", str(file)], capture_output=True, text=True,
                          env=_env(db), timeout=HANG_GUARD_S)
    code, summary, peak = done.stdout.splitlines()
    return int(peak), subprocess.CompletedProcess([], int(code), summary, done.stderr)


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB")
def test_a_huge_line_is_not_held_whole(tmp_path: Path) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text(_facts(3))
    huge = tmp_path / "huge.jsonl"
    line_mb = 64
    with open(huge, "w") as handle:
        handle.write(json.dumps({"content": "y" * (line_mb << 20)}) + "\n")
        handle.write(json.dumps({"content": "after the huge line"}) + "\n")
    base_kb, _ = _peak_rss_kb(tmp_path / "a.db", small)
    peak_kb, done = _peak_rss_kb(tmp_path / "b.db", huge)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"new": 1, "duplicate": 0, "rejected": 0, "bad": 1}
    assert "line 1: longer than" in done.stderr and "100000 characters" in done.stderr
    # the old import held the line ~3 times over (bytes, text, parsed): ~190 MB here
    assert peak_kb - base_kb < (line_mb // 2) << 10, (base_kb, peak_kb)


def test_json_messages_say_at_column_once(tmp_path: Path) -> None:
    lines = ['{"content": "a\tb"}', '{"content": "x\\q"}',
             '{"content": "\\u12"}', '{"content" "x"}', '{"content": "x",}', '{"content": }',
             '{"content": "x"} trailing', "[1, 2", "{'content': 'x'}",
             '{"content": "truncated']  # the last, with no newline: a cut-off file
    done = _cli(tmp_path / "m.db", "import", "-", stdin="\n".join(lines))
    assert done.returncode == 1
    assert done.stderr.count("malformed JSON") == len(lines), done.stderr
    assert " at at " not in done.stderr
    assert "line 10: malformed JSON (Unterminated string starting at column 13)" in done.stderr
    assert "line 1: malformed JSON (Invalid control character at column 15)" in done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child")
def test_ctrl_c_prints_what_was_stored_and_exits_130(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    lines = _facts(2500)
    child = subprocess.Popen([sys.executable, "-m", "semantic_memory", "import", "-"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=_env(db))
    try:
        assert child.stdin is not None
        child.stdin.write(lines)  # one batch of 2,000 is stored, 500 wait for more input
        child.stdin.flush()
        deadline = time.monotonic() + HANG_GUARD_S
        while not (db.exists() and _stored_or_zero(db) >= 2000):
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.2)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=HANG_GUARD_S)
    finally:
        child.kill()
    assert child.returncode == 130, err
    assert json.loads(out) == {"new": 2000, "duplicate": 0, "rejected": 0, "bad": 0,
                               "interrupted_at_line": 2001}
    assert "importing the same file again" in err and "Aborted" not in err
    again = _cli(db, "import", "-", stdin=lines)
    assert json.loads(again.stdout) == {"new": 500, "duplicate": 2000, "rejected": 0, "bad": 0}


def _stored_or_zero(db: Path) -> int:
    try:
        return _stored(db)
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0


@pytest.mark.parametrize(("golden", "harness"), [("claude-code.jsonl", "Claude Code"),
                                                 ("codex-rollout.jsonl", "Codex"),
                                                 ("kimi-code-wire.jsonl", "Kimi Code")])
def test_a_transcript_is_refused_in_one_line(tmp_path: Path, golden: str, harness: str) -> None:
    db = tmp_path / "m.db"
    done = _cli(db, "import", str(GOLDEN / golden))
    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{harness} session transcript" in done.stderr
    assert "the hooks store each session as it ends" in done.stderr
    assert not db.exists() or _stored_or_zero(db) == 0


def test_a_type_field_alone_is_a_bad_line_not_a_transcript(tmp_path: Path) -> None:
    text = json.dumps({"content": "use pnpm", "type": "fact"}) + "\n" + _facts(1)
    done = _cli(tmp_path / "m.db", "import", "-", stdin=text)
    assert done.returncode == 1
    assert "line 1: unknown field(s): type" in done.stderr
    assert json.loads(done.stdout)["new"] == 1
