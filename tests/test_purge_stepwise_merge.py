"""`memory-mcp purge` (`MemoryEngine.purge()`: reclaim, then the index merge and VACUUM) merged
every FTS5 index in one transaction: at 1M memories it held every other writer (a service
beside it) for 31.7 s. It now merges a step at a time (`store.scrub_indexes`), as the
service's own purge does, so another process's writes land between the steps; the words of
what went still leave the file and the indexes stay whole."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import sqlite
from test_fixbatch_g_grace_purge import PLUGINS, WORD, files_holding, random_notes

#: Another process: one small memory at a time until its stdin closes, then the
#: CLOCK_MONOTONIC (the same in every process) start and end of each write.
WRITER = """
import json, sys, threading, time
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
engine = MemoryEngine(Settings(db_path=sys.argv[1], plugins=sys.argv[2], device="cpu"))
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
spans, i = [], 0
print("ready", flush=True)
while not stop.is_set():
    start = time.monotonic()
    engine.ingest([NewMemory(f"writer note {i}", project="web")], batch_is_session=False)
    spans.append((start, time.monotonic()))
    i += 1
engine.close()
print(json.dumps(spans))
"""


def test_a_writer_beside_the_cli_purge_writes_while_the_indexes_merge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), plugins=PLUGINS, device="cpu"))
    try:
        notes = random_notes(9000, 36)
        for start in range(0, len(notes), 1000):
            engine.ingest([NewMemory(text, project="web") for text in notes[start:start + 1000]],
                          batch_is_session=False)
        engine.store.optimize()
        uid = engine.ingest([NewMemory("Customer Zyxwvutsrq Holdings pays late",
                                       project="web")])[0].uid
        assert uid is not None and engine.forget(uid)
        for note in notes[:90]:  # 1%
            found = engine.store.read().execute(
                "SELECT uid FROM memories WHERE content = ?", (note,)).fetchone()
            assert engine.forget(found[0])
        merging: list[tuple[float, float]] = []  # when each merge (or step) ran

        def timed(merge: Any) -> Any:
            def run(*args: Any) -> Any:
                start = time.monotonic()
                try:
                    return merge(*args)
                finally:
                    merging.append((start, time.monotonic()))
            return run

        monkeypatch.setattr(sqlite, "merge_fts_indexes", timed(sqlite.merge_fts_indexes))
        monkeypatch.setattr(sqlite, "merge_fts_step", timed(sqlite.merge_fts_step))
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), PLUGINS],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
            time.sleep(0.3)
            report = engine.purge()  # what `memory-mcp purge` runs
            out, _ = writer.communicate("", timeout=60)
        finally:
            if writer.poll() is None:
                writer.kill()
        assert report.soft_deleted == 91 and report.vacuumed and report.warning is None
        first, last = merging[0][0], merging[-1][1]
        landed = [end for _, end in json.loads(out.splitlines()[-1]) if first < end < last]
        # one transaction: at most the write in flight as it began ends inside it (the next
        # waits for its commit); step by step (8 steps here) ~25 do
        assert len(landed) >= 3, (len(merging), last - first)
        with engine.store.write() as conn:
            for table in ("memories_fts", "memories_fts_tri"):
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        assert engine.recall(notes[4321], k=1)[0].memory.content == notes[4321]
        assert engine.store.flush_journal() is None
    finally:
        engine.close()
    assert files_holding(tmp_path, WORD) == []
