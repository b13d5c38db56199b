"""`purge --matching` interrupted while it scrubs the write spool (a QA kill -9 and a Ctrl-C):
the write it held was left as `<name>.claim-<pid>`, which a re-run and its `--dry-run` did not
see, and the next replay stored the purged text again. A real process is stopped at the exact
moment (from inside the `holds` callback, or right after a rename), then the real CLI is run
as the user would: `purge --matching` again, `spool replay`, and the store is counted.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from test_ops_support import run_cli

from semantic_memory import spool

WORD = "PURGEME"
WRITES = 12
#: The scrubbing child: spools nothing itself, scrubs argv[1] and stops itself as argv[2] says.
SCRUBBER = """
import os, signal, sys
from pathlib import Path
from semantic_memory import spool

folder, how, at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
matches = 0

def holds(item):
    global matches
    found = "PURGEME" in str(item)
    matches += found
    if found and how != "rename" and matches == at:  # the write it holds is claimed now
        os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGINT)
    return found

if how == "rename":  # killed right after scrubbed text first lands under a queue name
    replace = os.replace
    def dying_replace(src, dst):
        replace(src, dst)
        name = os.path.basename(dst)
        if name.endswith(".json") and not name.startswith(".") and spool.CLAIM not in name:
            os.kill(os.getpid(), signal.SIGKILL)
    os.replace = dying_replace
spool.scrub(folder, holds)
"""


def spool_writes(folder: Path) -> list[Path]:
    """WRITES flushes as a PreCompact hook spools them: each an exchange holding the word and
    one that does not."""
    return [spool.append(folder, "/ingest", {"items": [
        {"exchange": {"user": f"question {i} about the deploy?",
                      "reply": f"Our team mascot is named {WORD}{i} since spring"},
         "session": "s1", "kind": "note", "project": "web"},
        {"exchange": {"user": f"other question {i} on caching?",
                      "reply": f"Caching uses redis number {i} with a ttl"},
         "session": "s1", "kind": "note", "project": "web"}]},
        harness="claude-code", event="PreCompact") for i in range(WRITES)]


def scrub_until_stopped(folder: Path, how: str, at: int = 3) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRUBBER, str(folder), how, str(at)],
                          capture_output=True, text=True, timeout=120)


def holding(folder: Path) -> list[str]:
    """Every file in the spool (claims, rejected/ and hidden ones included) holding the word."""
    return sorted(f.name for f in folder.rglob("*") if f.is_file() and WORD in f.read_text())


def stored(db: Path) -> tuple[int, int]:
    """(memories holding the word, memories in all) in the store."""
    with sqlite3.connect(db) as conn:
        return (conn.execute("SELECT count(*) FROM memories WHERE content LIKE ?",
                             (f"%{WORD}%",)).fetchone()[0],
                conn.execute("SELECT count(*) FROM memories").fetchone()[0])


def dry_run_count(tmp_path: Path) -> str:
    found = run_cli(tmp_path, "purge", "--matching", WORD, "--dry-run")
    assert found.returncode == 0, found.stderr
    return found.stderr.strip().splitlines()[-1]


def test_a_purge_killed_while_it_holds_a_write_is_finished_by_running_it_again(
        tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool_writes(folder)
    stopped = scrub_until_stopped(folder, "kill")
    assert stopped.returncode == -signal.SIGKILL, stopped.stderr
    claims = [f.name for f in folder.iterdir() if spool.CLAIM in f.name]
    assert len(claims) == 1, claims  # the third write, held when it died
    # Two writes were scrubbed before it died; the re-run's dry run sees the held one too.
    assert dry_run_count(tmp_path).endswith(f"and {WRITES - 2} spooled memories hold '{WORD}'")

    again = run_cli(tmp_path, "purge", "--matching", WORD, "--yes")
    assert again.returncode == 0, again.stderr
    assert f'"spooled": {WRITES - 2}' in again.stdout, again.stdout
    assert holding(folder) == []
    replayed = run_cli(tmp_path, "spool", "replay", MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    assert replayed.returncode == 0, replayed.stderr
    assert stored(tmp_path / "memory.db") == (0, WRITES)  # the other exchanges, each once


def test_a_purge_interrupted_by_ctrl_c_puts_the_write_it_held_back(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool_writes(folder)
    stopped = scrub_until_stopped(folder, "interrupt")
    assert "KeyboardInterrupt" in stopped.stderr, stopped.stderr
    assert [f.name for f in folder.iterdir() if spool.CLAIM in f.name] == []
    assert len(spool.pending(folder)) == WRITES  # two scrubbed, the held one back whole
    assert dry_run_count(tmp_path).endswith(f"and {WRITES - 2} spooled memories hold '{WORD}'")


def test_a_scrub_killed_between_its_renames_never_puts_the_old_text_back(
        tmp_path: Path) -> None:
    """Killed once the scrubbed copy of the first write is in place: whatever the claim then
    holds goes back over it, so it must not be the old text."""
    folder = tmp_path / "spool"
    first = spool_writes(folder)[0]
    stopped = scrub_until_stopped(folder, "rename")
    assert stopped.returncode == -signal.SIGKILL, stopped.stderr
    spool.release_stale(folder)  # what the service's next look does
    assert WORD not in first.read_text()
    assert "redis number 0" in first.read_text()
    assert [f.name for f in folder.iterdir() if spool.CLAIM in f.name or
            f.name.startswith(".")] == []
    assert len(holding(folder)) == WRITES - 1
