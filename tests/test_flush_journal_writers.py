"""The WAL cut after a purge (`SQLiteStore.flush_journal`) lets writes through while a long
reader (an export, a migrate) keeps it waiting: it used to wait inside the write lock, and
every write of the service waited with it, up to FLUSH_JOURNAL_WAIT_S."""
from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine


def test_writes_go_on_while_a_long_reader_holds_off_the_wal_cut(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), plugins="bm25_porter", device="cpu"))
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        engine.ingest([NewMemory(f"note {i} about the build cache", project="web")
                       for i in range(50)])
        reader.execute("BEGIN")  # a snapshot older than the writes below: no cut until it ends
        reader.execute("SELECT count(*) FROM memories").fetchone()
        engine.ingest([NewMemory("a write after the reader's snapshot", project="web")])

        waits: list[float] = []
        cutting = threading.Event()

        def write_while_cutting() -> None:
            cutting.wait()
            for i in range(5):
                start = time.monotonic()
                engine.ingest([NewMemory(f"written during the cut {i}", project="web")])
                waits.append(time.monotonic() - start)
                time.sleep(0.2)

        writer = threading.Thread(target=write_while_cutting)
        writer.start()
        start = time.monotonic()
        cutting.set()
        warning = engine.store.flush_journal()
        cut_took = time.monotonic() - start
        writer.join()

        assert warning is not None and "was not cut" in warning
        assert len(waits) == 5
        assert max(waits) < 0.3 * cut_took, (waits, cut_took)  # not the whole cut's length
        reader.execute("COMMIT")
        assert engine.store.flush_journal() is None  # the reader gone: cut at once
        assert Path(f"{db}-wal").stat().st_size == 0
        assert len(engine.recall("written during the cut", k=10)) >= 5
    finally:
        reader.close()
        engine.close()
