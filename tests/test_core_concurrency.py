"""Concurrent writers and readers, in threads and in separate processes, on one db file."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

WRITES = 60


def _writer_process(db: str, worker: int, queue: multiprocessing.Queue) -> None:
    engine = MemoryEngine(Settings(db_path=db))
    acked, errors = [], []
    for i in range(WRITES):
        try:
            result = engine.store_one(NewMemory(f"process {worker} wrote entry {i} zz{worker}q{i}"))
            acked.append(result.uid)
            engine.recall(f"entry {i}", k=3)
        except Exception as exc:  # noqa: BLE001 - every error is a test failure
            errors.append(repr(exc))
    engine.close()
    queue.put((acked, errors))


def test_processes_write_and_read_together(tmp_path: Path) -> None:
    db = str(tmp_path / "shared.db")
    MemoryEngine(Settings(db_path=db)).close()  # create the schema once
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer_process, args=(db, w, queue)) for w in range(4)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    errors = [e for _, errs in results for e in errs]
    assert errors == []
    acked = {uid for uids, _ in results for uid in uids}
    assert len(acked) == 4 * WRITES
    engine = MemoryEngine(Settings(db_path=db))
    stored = {m.uid for m in engine.list(limit=10_000)}
    assert acked <= stored
    assert engine.recall("zz3q59")[0].memory.content == "process 3 wrote entry 59 zz3q59"
    engine.close()


def test_threads_share_one_engine(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "t.db")))
    acked: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for i in range(WRITES):
            try:
                uid = engine.store_one(NewMemory(f"thread {worker} note {i}")).uid
                engine.recall(f"thread {worker}", k=5)
                engine.list(limit=5)
                with lock:
                    acked.append(uid)
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(set(acked)) == 8 * WRITES
    assert engine.count() == 8 * WRITES
    engine.close()


def test_killed_writer_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """A process killed mid-stream: everything it acknowledged is still there."""
    db = str(tmp_path / "kill.db")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_acking_writer, args=(db, queue))
    proc.start()
    acked = [queue.get(timeout=60) for _ in range(30)]
    proc.kill()
    proc.join()
    engine = MemoryEngine(Settings(db_path=db))
    stored = {m.uid for m in engine.list(limit=100_000)}
    assert set(acked) <= stored
    engine.close()


def _acking_writer(db: str, queue: multiprocessing.Queue) -> None:
    engine = MemoryEngine(Settings(db_path=db))
    i = 0
    while True:
        queue.put(engine.store_one(NewMemory(f"durable {i}")).uid)
        i += 1
