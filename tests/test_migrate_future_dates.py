"""A store's own memories dated ahead of this machine's clock go across a migrate and an
export/import round trip. The store took them when its clock ran fast; `migrate` then failed
whole ("the copy failed (InvalidMemory: created_at: … more than a day ahead …); nothing was
written"), and `import` of the export dropped them as bad lines. A restored memory (it has a
uid) keeps its times; a fresh write dated more than a day ahead is still refused. And one
memory today's checks refuse is listed under `refused`, never failing the copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.errors import InvalidMemory
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import DAY, MemoryEngine

pytestmark = pytest.mark.both_stores

AHEAD = "The release branch is cut on Thursdays"
TODAY = "CI runs on GitHub Actions"


def cli(settings: Settings, home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=settings.db_path, MEMORY_DEVICE="cpu", HOME=str(home), **extra)
    if settings.db_url:
        env["MEMORY_DB_URL"] = settings.db_url
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def store_written_three_days_fast(settings: Settings) -> dict[str, float]:
    """A store holding one memory its writer's clock dated 3 days ahead (and its forgotten
    twin), and one of today; the created_at of each live one by text."""
    engine = MemoryEngine(settings)
    try:
        ahead = engine.store_one(NewMemory(AHEAD, kind="decision", project="web")).uid
        gone = engine.store_one(NewMemory(AHEAD + " (draft)", project="web")).uid
        engine.store_one(NewMemory(TODAY, project="web"))
        with engine.store.write() as conn:
            conn.execute("UPDATE memories SET created_at = created_at + ?, updated_at = "
                         "updated_at + ? WHERE uid IN (?, ?)".replace(
                             "?", engine.store.placeholder), (3 * DAY, 3 * DAY, ahead, gone))
        assert engine.forget(gone)
        return {m.content: m.created_at for m in engine.list(RecallFilters(), limit=10)}
    finally:
        engine.close()


def times_in(db: Path) -> dict[str, float]:
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu"))
    try:
        assert engine.counts()["forgotten"] == 1
        return {m.content: m.created_at for m in engine.list(RecallFilters(), limit=10)}
    finally:
        engine.close()


def test_migrate_copies_a_memory_dated_days_ahead(settings: Settings, tmp_path: Path) -> None:
    before = store_written_three_days_fast(settings)
    assert before[AHEAD] > time.time() + 2 * DAY
    target = tmp_path / "moved.db"
    done = cli(settings, tmp_path, "migrate", "--to", str(target))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["verified"] and "refused" not in summary
    assert summary["copied"]["memories"] == 2 and summary["copied"]["forgotten"] == 1
    assert times_in(target) == pytest.approx(before, abs=1e-5)


def test_its_export_imports_whole(settings: Settings, tmp_path: Path) -> None:
    before = store_written_three_days_fast(settings)
    backup = tmp_path / "backup.jsonl"
    exported = cli(settings, tmp_path, "export", "--include-deleted", "-o", str(backup))
    assert exported.returncode == 0, exported.stderr
    restored = Settings(db_path=str(tmp_path / "restored.db"), device="cpu")
    done = cli(restored, tmp_path, "import", str(backup))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"new": 3, "duplicate": 0, "rejected": 0, "bad": 0}
    assert times_in(tmp_path / "restored.db") == pytest.approx(before, abs=1e-5)


def test_a_fresh_write_days_ahead_is_still_refused(engine: MemoryEngine) -> None:
    with pytest.raises(InvalidMemory, match="more than a day ahead"):
        engine.store_one(NewMemory(TODAY, created_at=time.time() + 2 * DAY))


def test_a_memory_today_s_checks_refuse_is_listed_not_fatal(settings: Settings,
                                                            tmp_path: Path) -> None:
    """Written under a larger MEMORY_MAX_CONTENT_CHARS, copied under a smaller one: that
    memory is `refused`, the rest arrives and is verified."""
    engine = MemoryEngine(replace(settings, max_content_chars=5_000))
    try:
        long = engine.store_one(NewMemory("Build log: " + "step ok; " * 300, kind="note",
                                          project="web")).uid
        engine.store_one(NewMemory(TODAY, project="web"))
    finally:
        engine.close()
    done = cli(settings, tmp_path, "migrate", "--to", str(tmp_path / "moved.db"),
               MEMORY_MAX_CONTENT_CHARS="1000")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["verified"] and summary["copied"]["memories"] == 1
    assert summary["refused"]["count"] == 1
    assert summary["refused"]["first"][0].startswith(f"{long}: content: ")


def test_what_a_refused_memory_had_replaced_arrives_current(settings: Settings,
                                                           tmp_path: Path) -> None:
    """The memory a refused one superseded stayed hidden in the target behind a uid nothing
    held, until the target's maintenance ran: now current at once, the copy still verified."""
    engine = MemoryEngine(replace(settings, max_content_chars=5_000))
    try:
        old = engine.store_one(NewMemory("The deploy runs from the ops laptop", project="web"))
        new = engine.store_one(NewMemory("The deploy runs from CI: " + "step ok; " * 300,
                                         project="web"))
        with engine.store.write() as conn:
            engine.store.supersede(conn, [engine.get(old.uid).id], new.uid)
        assert engine.get(old.uid).superseded_by == new.uid
    finally:
        engine.close()
    moved = tmp_path / "moved.db"
    done = cli(settings, tmp_path, "migrate", "--to", str(moved), MEMORY_MAX_CONTENT_CHARS="1000")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["verified"] and summary["refused"]["count"] == 1
    target = MemoryEngine(Settings(db_path=str(moved), device="cpu"))
    try:
        assert target.get(old.uid).superseded_by is None
        assert [h.memory.uid for h in target.recall("deploy ops laptop")] == [old.uid]
    finally:
        target.close()
