"""The service's own purge (maintenance, a forget past MEMORY_FORGET_GRACE_DAYS) takes the words
of what it removes out of the SQLite file. It skips the index merge and VACUUM below a tenth of
the rows, and so left the words in the FTS5 index's segments (a delete only adds markers, which
hold the word too), the row's bytes in its page and freed pages as they were. Now the writer
zeroes what it deletes (`secure_delete`), the purge merges each FTS5 index into one segment a
step at a time (SCRUB_STEP_PAGES a transaction, so no write waits for the whole rewrite), and
the WAL is cut."""

from __future__ import annotations

import random
import string
import time
from pathlib import Path

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


def random_notes(n: int, words_each: int) -> list[str]:
    """`n` texts of `words_each` made-up words: a trigram index of many blocks, fast."""
    rng = random.Random(5)
    vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 9)))
                  for _ in range(5000)]
    return [" ".join(rng.choice(vocabulary) for _ in range(words_each)) + f" {i}"
            for i in range(n)]


def test_a_big_index_is_merged_a_step_at_a_time_and_stays_whole(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db"), plugins=PLUGINS,
                                   device="cpu"))
    try:
        notes = random_notes(9000, 36)
        for start in range(0, len(notes), 1000):
            engine.ingest([NewMemory(text, project="web") for text in notes[start:start + 1000]],
                          batch_is_session=False)
        uid = engine.ingest([NewMemory("Customer Zyxwvutsrq Holdings pays late",
                                       project="web")])[0].uid
        assert uid is not None and engine.forget(uid)
        blocks = engine.store.read().execute(
            "SELECT count(*) FROM memories_fts_tri_data").fetchone()[0]
        assert blocks > 2000  # ~8 MB: more than one step rewrites
        report = engine.purge(STARTUP_RECLAIM_SHARE, 0)
        assert report.soft_deleted == 1 and not report.vacuumed and report.warning is None
        with engine.store.write() as conn:
            for table in ("memories_fts", "memories_fts_tri"):
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                # one segment, no delete markers: a merge of every segment finds nothing to do
                # (FTS5 keeps the index's structure in its _data row 10)
                structure = f"SELECT block FROM {table}_data WHERE id = 10"
                before = conn.execute(structure).fetchone()
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('merge', -1)")
                assert conn.execute(structure).fetchone() == before, table
        assert files_holding(tmp_path, WORD) == []
        assert engine.recall(notes[4321], k=1)[0].memory.content == notes[4321]
    finally:
        engine.close()
