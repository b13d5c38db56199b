"""A full disk after the work is done: a purge or an import whose closing index merge (and
VACUUM) finds no room reports what it did, with a warning, instead of only an error that
hides it. SQLite's own "database or disk is full" stands in for the disk (`max_page_count`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:  # SQLite only: the page cap is SQLite's
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db")))
    yield engine
    engine.close()


def _fill_then_cap(engine: MemoryEngine, spare_pages: int) -> list[str]:
    """1,000 memories, the first 100 forgotten; then the db file may grow by `spare_pages`
    only (`max_page_count`: SQLite's own "database or disk is full", as a full disk gives)."""
    uids = [r.uid for r in engine.ingest([NewMemory(
        f"memory {i} about the deploy of service {i} on host web-{i:04d} with words "
        + " ".join(f"w{i * 7 + j}" for j in range(30))) for i in range(1000)])]
    for uid in uids[:100]:
        assert uid is not None and engine.forget(uid)
    writer = engine.store._writer  # the store's one write connection
    pages = writer.execute("PRAGMA page_count").fetchone()[0]
    writer.execute(f"PRAGMA max_page_count = {pages + spare_pages}")
    return [u for u in uids if u is not None]


def test_a_purge_whose_index_merge_meets_a_full_disk_reports_what_it_removed(
        engine: MemoryEngine) -> None:
    """The purge commits, then the index merge and VACUUM need room the disk has not: the
    purge answered only "Error: no space left", and the user took the forgotten memories,
    gone for good, for still there."""
    _fill_then_cap(engine, spare_pages=10)
    report = engine.purge().to_dict()
    assert report["soft_deleted"] == 100 and report["vacuumed"] is False
    assert report["warning"].startswith("the index merge and VACUUM were skipped: ")
    assert "no space left" in report["warning"]
    assert engine.counts()["forgotten"] == 0


def test_an_import_whose_index_merge_meets_a_full_disk_keeps_its_lines_and_says_so(
        engine: MemoryEngine, caplog: pytest.LogCaptureFixture) -> None:
    uids = _fill_then_cap(engine, spare_pages=10)
    with caplog.at_level(logging.WARNING, logger="semantic_memory"):
        assert engine.merge_after_import(len(uids), batch=500) is False
    assert engine.count() == 900
    assert any("the full-text index merge was skipped" in r.getMessage()
               and "no space left" in r.getMessage() for r in caplog.records)

