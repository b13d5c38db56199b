"""A hook killed while it spools a write (a harness kills a hook that runs past its timeout)
left `.<name>.tmp` holding the whole write, unredacted: no `spool list`, replay or `purge
--matching` saw it, and nothing ever removed it. Now a whole one of a dead writer joins the
queue (the write is not lost, and replays once) and a half-written one is removed.

The real hook is killed at the exact moment: a `sitecustomize` on its PYTHONPATH SIGKILLs it
right before it renames its spool file into place (the file written and fsync'd).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_ops_support import run_cli
from test_service_support import memory_mcp_command, service_env

from semantic_memory import spool

TEXT = "the deploy mascot of the billing team is zebra7 mango"
DEAD_URL = "http://127.0.0.1:9"  # nothing answers: the hook spools
#: Kills the process when it renames a file of the spool into place.
DIES_BEFORE_RENAME = """
import os, signal
_replace = os.replace
def replace(src, dst, *args, **kwargs):
    if str(src).endswith(".tmp") and os.path.basename(os.path.dirname(str(src))) == "spool":
        os.kill(os.getpid(), signal.SIGKILL)
    return _replace(src, dst, *args, **kwargs)
os.replace = replace
"""
#: Writes half of its spool file, then dies (the rest never reached the file).
DIES_HALF_WRITTEN = """
import os, signal, sys
from semantic_memory import spool
_write = os.write
def write(fd, data):
    _write(fd, bytes(data)[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)
os.write = write
spool.append(sys.argv[1], "/ingest", {"content": "half of a write"})
"""


def killed_remember(tmp_path: Path) -> Path:
    """Run the real UserPromptSubmit hook on "remember …" with the service down, killed as it
    renames its spool file; the temporary file it left."""
    patch = tmp_path / "killer"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(DIES_BEFORE_RENAME)
    (tmp_path / "proj").mkdir()
    env = service_env(tmp_path, MEMORY_PLUGIN_URL=DEAD_URL, MEMORY_PROJECT="crashproj",
                      HOME=str(tmp_path / "home"), PYTHONPATH=str(patch))
    prompt = {"session_id": "s1", "transcript_path": "", "cwd": str(tmp_path / "proj"),
              "hook_event_name": "UserPromptSubmit", "prompt": f"remember {TEXT}"}
    hook = subprocess.run([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                          input=json.dumps(prompt), env=env, cwd=tmp_path / "proj",
                          capture_output=True, text=True, timeout=120)
    assert hook.returncode == -signal.SIGKILL, (hook.returncode, hook.stderr)
    left = [f for f in (tmp_path / "spool").iterdir() if f.name.endswith(".tmp")]
    assert len(left) == 1 and TEXT in left[0].read_text(), left
    assert spool.pending(tmp_path / "spool") == []  # as a queue, it holds nothing
    return left[0]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_cli(tmp_path, *args, MEMORY_PLUGIN_URL=DEAD_URL, HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    return done


def stored(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT content FROM memories")]


def holding(folder: Path, word: str) -> list[str]:
    """Every file under the spool (hidden, claimed and refused ones included) holding `word`."""
    return [f.name for f in folder.rglob("*") if f.is_file() and word in f.read_text()]


def test_a_whole_write_a_killed_hook_left_is_listed_and_replayed_once(tmp_path: Path) -> None:
    left = killed_remember(tmp_path)
    listed = cli(tmp_path, "spool", "list")
    assert "1 write(s) waiting" in listed.stdout, listed.stdout
    assert not left.exists()  # it joined the queue under the name its hook was giving it
    assert [f.name for f in spool.pending(tmp_path / "spool")] == [left.name[1:-4] + ".json"]
    cli(tmp_path, "spool", "replay")
    cli(tmp_path, "spool", "replay")
    assert stored(tmp_path / "memory.db") == [TEXT]
    assert list((tmp_path / "spool").iterdir()) == []


def test_purge_matching_scrubs_the_write_a_killed_hook_left(tmp_path: Path) -> None:
    killed_remember(tmp_path)
    dry = cli(tmp_path, "purge", "--matching", "zebra7", "--dry-run")
    assert dry.stderr.strip().endswith("and 1 spooled memories hold 'zebra7'"), dry.stderr
    purged = cli(tmp_path, "purge", "--matching", "zebra7", "--yes")
    assert '"spooled": 1' in purged.stdout, purged.stdout
    assert holding(tmp_path / "spool", "zebra7") == []
    cli(tmp_path, "spool", "replay")
    assert not any("zebra7" in text for text in stored(tmp_path / "memory.db"))


def test_a_half_written_file_of_a_dead_writer_is_removed_a_live_ones_kept(
        tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    half = subprocess.run([sys.executable, "-c", DIES_HALF_WRITTEN, str(folder)],
                          capture_output=True, text=True, timeout=60)
    assert half.returncode == -signal.SIGKILL, half.stderr
    (dead,) = [f for f in folder.iterdir() if f.name.endswith(".tmp")]
    # Another writer at work (this process: alive), its file half written so far.
    live = folder / f".{time.time_ns():020d}-{os.getpid()}-0badcafe.tmp"
    live.write_text('{"v": 1, "ts"')
    assert spool.release_stale(folder) == 0
    assert not dead.exists() and live.exists()
    assert spool.pending(folder) == []
    # The age rule frees a file whatever its pid (the pid may live on in another process).
    assert spool.release_stale(folder, now=time.time() + spool.CLAIM_STALE_S + 1) == 0
    assert not live.exists()


@pytest.mark.parametrize("old_name", [".{}.json.tmp", ".{}.json.4242.tmp"])
def test_a_copy_a_scrub_or_refusal_was_writing_is_removed_never_queued(
        tmp_path: Path, old_name: str) -> None:
    """The copy of a write whose original is still in its claim (or in the queue): removed,
    or the write would be queued twice. An earlier release's names carry no pid: age only."""
    folder = tmp_path / "spool"
    queued = spool.append(folder, "/ingest", {"content": "kept once"})
    copy = folder / old_name.format(queued.stem)
    copy.write_text(queued.read_text())
    spool.release_stale(folder, now=time.time() + spool.CLAIM_STALE_S + 1)
    assert not copy.exists() and spool.pending(folder) == [queued]
