"""Supersession when the clocks and the order of arrival disagree.

- A dated write that arrives late (a "remember" a hook spooled while the service was down,
  replayed after a newer restatement was stored) stayed current beside that newer value, and
  was injected first. It is now history: superseded by the newer memory, its answer says so.
- A live write that brought no time is the newest word: after the clock stepped back (or
  beside a teammate whose clock runs ahead, on a shared PostgreSQL store) it did not supersede
  the restated memory whose `created_at` was later. Undated writes are now placed by arrival.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores

OLD = "The staging database listens on port 6543"
NEW = "The staging database now listens on port 6544"


def current(engine: MemoryEngine) -> list[str]:
    return [m.uid for m in engine.list(RecallFilters(project="web"), limit=100)]


def shift_created(engine: MemoryEngine, uid: str, seconds: float) -> None:
    """Move a memory's times as a writer whose clock was `seconds` off would have set them."""
    with engine.store.write() as conn:
        conn.execute("UPDATE memories SET created_at = created_at + ?, "
                     "updated_at = updated_at + ? WHERE uid = ?".replace(
                         "?", engine.store.placeholder), (seconds, seconds, uid))


# --- a dated write that arrives late ----------------------------------------------------------


def test_a_late_dated_write_is_stored_as_history_of_the_newer_restatement(
        engine: MemoryEngine) -> None:
    made = time.time() - 30  # "remember …" spooled half a minute ago
    newer = engine.store_one(NewMemory(NEW, project="web")).uid
    late = engine.store_one(NewMemory(OLD, project="web", created_at=made))
    assert late.status == "new" and late.uid not in (None, newer)
    assert late.supersedes is None
    assert late.reason is not None and "stored as history" in late.reason
    assert newer in late.reason and f"unsupersede {late.uid}" in late.reason
    assert engine.get(late.uid).superseded_by == newer
    assert engine.get(newer).superseded_by is None
    assert current(engine) == [newer]
    assert [h.memory.uid for h in engine.recall("staging database port",
                                                       filters=RecallFilters(project="web"))] \
        == [newer]
    # the undo the reason names works: the late value is current again
    engine.unsupersede(late.uid)
    assert sorted(current(engine)) == sorted([newer, late.uid])


def test_a_late_write_still_supersedes_what_is_older_than_it(engine: MemoryEngine) -> None:
    """Late is not nothing: it restates the value before it, as it would have in time."""
    t = time.time()
    first = engine.store_one(NewMemory("The release train leaves every Monday at 10:00",
                                       kind="decision", project="web", created_at=t - 300)).uid
    newest = engine.store_one(NewMemory("Deploys are frozen from December 20 to January 3",
                                        kind="decision", project="web")).uid
    late = engine.store_one(NewMemory("The release train now leaves every Monday at 11:00",
                                      kind="decision", project="web", created_at=t - 60))
    assert late.supersedes == [first] and late.reason is None  # nothing newer restates it
    assert sorted(current(engine)) == sorted([newest, late.uid])


def test_a_dated_batch_keeps_its_own_order_and_reports(engine: MemoryEngine) -> None:
    """A hook's body stamps its items with one time: the later item supersedes the earlier,
    said on the later one's answer (not the earlier one made history by a later sibling)."""
    t = time.time() - 5
    results = engine.ingest([NewMemory(OLD, project="web", created_at=t),
                             NewMemory(NEW, project="web", created_at=t)])
    assert [r.status for r in results] == ["new", "new"]
    assert results[0].reason is None and results[0].supersedes is None
    assert results[1].supersedes == [results[0].uid]
    assert current(engine) == [results[1].uid]


def test_an_undated_write_is_never_made_history(engine: MemoryEngine) -> None:
    newer = engine.store_one(NewMemory(NEW, project="web")).uid
    shift_created(engine, newer, 600)  # written by a clock 10 minutes fast
    again = engine.store_one(NewMemory(OLD, project="web"))
    assert again.reason is None and again.supersedes == [newer]
    assert current(engine) == [again.uid]


# --- an undated write after the clock stepped back ---------------------------------------------


def test_an_undated_restatement_supersedes_a_memory_dated_after_it(
        engine: MemoryEngine) -> None:
    old = engine.store_one(NewMemory(OLD, project="web")).uid
    shift_created(engine, old, 600)  # this clock has since stepped back 10 minutes
    new = engine.store_one(NewMemory(NEW, project="web"))
    assert new.supersedes == [old]
    assert engine.get(old).superseded_by == new.uid and current(engine) == [new.uid]


def test_a_dated_write_is_still_placed_by_its_own_time(engine: MemoryEngine) -> None:
    """A write dated before a current memory (a replayed spool record, a `POST /ingest` with
    `created_at`) does not supersede it, though it arrived after: it is that memory's history,
    even where its text reads as the update ("now")."""
    current_one = engine.store_one(NewMemory(OLD, project="web")).uid
    dated = engine.store_one(NewMemory(NEW, project="web", created_at=time.time() - 3600))
    assert dated.supersedes is None and engine.get(current_one).superseded_by is None
    assert engine.get(dated.uid).superseded_by == current_one


# --- the same through real processes ----------------------------------------------------------


def cli_env(settings: Settings, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=settings.db_path, MEMORY_DEVICE="cpu", HOME=str(home), **extra)
    if settings.db_url:
        env["MEMORY_DB_URL"] = settings.db_url
    return env


SKEWED = ("import sys, time; _t = time.time; skew = float(sys.argv.pop(1)); "
          "time.time = lambda: _t() + skew; sys.argv[0] = 'memory-mcp'; "
          "from semantic_memory.entry import main; main()")


def memory_mcp(env: dict[str, str], *args: str, skew: float = 0.0, stdin: str | None = None
               ) -> subprocess.CompletedProcess:
    """`memory-mcp ARGS` in a process whose wall clock is `skew` seconds off."""
    done = subprocess.run([sys.executable, "-c", SKEWED, str(skew), *args], env=env,
                          input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def listed(env: dict[str, str]) -> dict[str, dict]:
    rows = json.loads(memory_mcp(env, "list", "--include-superseded", "--project", "web",
                                 "--json").stdout)
    return {row["content"]: row for row in rows}


def test_two_writers_a_clock_behind_the_later_store_wins(settings: Settings,
                                                          tmp_path: Path) -> None:
    """`store` at the right time, then `store` from a clock 10 minutes slow (a teammate's, on
    a shared PostgreSQL store): the second is the newest word."""
    env = cli_env(settings, tmp_path)
    memory_mcp(env, "store", OLD, "--kind", "fact", "--project", "web")
    second = memory_mcp(env, "store", NEW, "--kind", "fact", "--project", "web", skew=-600)
    assert "supersedes" in second.stdout
    rows = listed(env)
    assert rows[OLD].get("superseded_by") == rows[NEW]["uid"]
    assert "superseded_by" not in rows[NEW]


@pytest.mark.sqlite_only
def test_a_spooled_remember_replayed_after_a_newer_store_is_history(settings: Settings,
                                                                    tmp_path: Path) -> None:
    """The QA repro: the service is down, a hook spools "remember … 6543" (stamped with its
    time); `store … 6544`; `spool replay`. Recall answers 6544 alone."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = cli_env(settings, tmp_path, MEMORY_PORT=port, MEMORY_PROJECT="web")
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "cwd": str(tmp_path),
              "prompt": "remember that the staging database listens on port 6543"}
    hook = memory_mcp(env, "hook", "claude-code", "UserPromptSubmit", stdin=json.dumps(prompt))
    assert "as soon as its service can take it" in hook.stdout
    time.sleep(1.1)  # the spooled write is older than the store below by its stamp
    memory_mcp(env, "store", NEW, "--kind", "fact", "--project", "web")
    assert "replayed 1 write" in memory_mcp(env, "spool", "replay").stdout
    rows = listed(env)
    late = rows["the staging database listens on port 6543"]
    assert late.get("superseded_by") == rows[NEW]["uid"]
    block = memory_mcp(env, "recall", "staging database port", "--project", "web",
                       "--block", "2000").stdout
    assert "6544" in block and "6543" not in block
