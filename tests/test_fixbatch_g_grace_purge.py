"""The service's own purge (maintenance, a forget past MEMORY_FORGET_GRACE_DAYS) takes the words
of what it removes out of the SQLite file. It skips the index merge and VACUUM below a tenth of
the rows, and so left the words in the FTS5 index's segments (a delete only adds markers, which
hold the word too), the row's bytes in its page and freed pages as they were. Now the writer
zeroes what it deletes (`secure_delete`), the purge rewrites each FTS5 index of at most
SCRUB_INDEX_BLOCKS (bigger ones keep the words, unsearchable, until `memory-mcp purge`), and the
WAL is cut."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import semantic_memory.stores.sqlite as sqlite_store
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import STARTUP_RECLAIM_SHARE, MemoryEngine
from test_service_support import start_service

WORD = b"zyxwvutsrq"
PLUGINS = "bm25_porter,bm25_trigram"


def files_holding(folder: Path, word: bytes) -> list[str]:
    """The store's files whose bytes hold `word`, letter case aside."""
    return sorted(f.name for f in folder.glob("memory.db*")
                  if f.is_file() and word in f.read_bytes().lower())


def fillers(n: int) -> list[dict[str, str]]:
    return [{"content": f"filler memory {i} about build tooling and the pnpm cache {i}",
             "project": "web"} for i in range(n)]


def test_the_services_grace_purge_leaves_no_word_of_it_in_the_file(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS=PLUGINS, MEMORY_FORGET_GRACE_DAYS="0",
                            MEMORY_MAINTENANCE_INTERVAL_S="1")
    try:
        with service.client() as http:
            http.post("/ingest", json={"items": fillers(40)})
            uid = http.post("/ingest", json={
                "content": "Customer Zyxwvutsrq Holdings is behind on its payments",
                "project": "web"}).json()["uid"]
            # an edit: the version it replaced is kept as a revision, purged with the memory
            assert http.patch(f"/api/memories/{uid}", json={
                "content": "Customer Zyxwvutsrq Holdings is far behind on its payments"
            }).status_code == 200
            assert files_holding(tmp_path, WORD)
            assert http.delete(f"/api/memories/{uid}").status_code == 200
        deadline = time.monotonic() + 30
        while "'soft_deleted': 1" not in service.stderr():
            assert time.monotonic() < deadline, service.stderr()
            time.sleep(0.1)
        line = next(x for x in service.stderr().splitlines() if "'soft_deleted': 1" in x)
        assert "'vacuumed': False" in line and "warning" not in line  # the grace purge's way
        assert files_holding(tmp_path, WORD) == []  # db and WAL, while the service serves
    finally:
        service.stop()
    assert files_holding(tmp_path, WORD) == []


def test_an_index_over_the_bound_keeps_the_words_until_a_purge_by_hand(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db"), plugins=PLUGINS,
                                   device="cpu"))
    try:
        engine.ingest([NewMemory(f["content"], project="web") for f in fillers(40)])
        uid = engine.ingest([NewMemory("Customer Zyxwvutsrq Holdings pays late",
                                       project="web")])[0].uid
        assert uid is not None and engine.forget(uid)
        monkeypatch.setattr(sqlite_store, "SCRUB_INDEX_BLOCKS", 0)  # every index is "big"
        report = engine.purge(STARTUP_RECLAIM_SHARE, 0)
        assert report.soft_deleted == 1 and not report.vacuumed
        # what the docs say: the word stays in the porter index's blocks, found by nothing
        blocks = engine.store.read().execute(
            "SELECT count(*) FROM memories_fts_data WHERE instr(lower(CAST(block AS TEXT)), "
            "'zyxwvutsrq') > 0").fetchone()[0]
        assert blocks > 0 and engine.recall("Zyxwvutsrq") == []
        engine.ingest([NewMemory("one more to forget", project="web")])
        engine.forget(engine.list(limit=1)[0].uid)
        assert engine.purge().vacuumed  # `memory-mcp purge`: merged and VACUUMed
    finally:
        engine.close()
    assert files_holding(tmp_path, WORD) == []
