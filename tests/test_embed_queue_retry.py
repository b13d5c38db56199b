"""The embedding queue retries what the model failed (QA review findings 1, 2 and 6): a batch
the model made no vector for is embedded again once the model is back, an edit never waits for
the model in the write lane, and a failed step is retried when the log says. A real embedder
plugin (an entry point on a PYTHONPATH site) that raises or hangs while a flag file exists,
against a real `memory-mcp serve`; the engine-level cases run the real queue task on a real
SQLite file. Timings are compared as ratios only."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import embedder_support
import numpy as np
from embedder_support import DIM
from semantic_memory import testing
from semantic_memory.models import NewMemory
from semantic_memory.service import embed_queue
from semantic_memory.stores import sqlite as sqlite_store
from test_plugin_isolation import install

#: The model: a letter histogram; raises while FLAG.fail exists, hangs while FLAG exists.
PLUGIN = '''
import os, time
import numpy as np
from semantic_memory.embedders import Embedder
from semantic_memory.hookspecs import hookimpl

FLAG = os.environ["FLAKYEMB_FLAG"]

class Letters(Embedder):
    name = "letters"; model_id = "letters#1"; dim = 26; cosine_floor = 0.0

    def embed_documents(self, texts):
        if os.path.exists(FLAG + ".fail"):
            raise RuntimeError("model server unreachable")
        while os.path.exists(FLAG):
            time.sleep(0.05)
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text):
        v = np.zeros(26, np.float32)
        for ch in text.lower():
            if "a" <= ch <= "z":
                v[ord(ch) - 97] += 1
        return v / max(float(np.linalg.norm(v)), 1e-12)

@hookimpl
def register_embedders(register, settings):
    register(Letters())
'''


def serve(memory_service: Any, tmp_path: Path) -> tuple[Any, Path]:
    flag = tmp_path / "model.flag"
    home = tmp_path / "home"
    home.mkdir()
    service = memory_service(
        PYTHONPATH=str(install(tmp_path / "site", "flakyemb", PLUGIN)), FLAKYEMB_FLAG=str(flag), HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
        MEMORY_EMBEDDER="letters", MEMORY_PLUGINS="bm25_porter,vector,flakyemb")
    return service, flag


def stats(service: Any) -> dict[str, Any]:
    status, body = service.request("GET", "/api/stats")
    assert status == 200
    return body


def drained(service: Any, within: float) -> float | None:
    """Seconds until the queue is empty and every memory has a vector; None if not `within`."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        now = stats(service)
        if now["embedding_queue"] == 0 and now["embedder"]["missing"] == 0:
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def ingest(service: Any, text: str) -> str:
    status, body = service.request("POST", "/ingest", {"content": text, "project": "p"})
    assert status == 200 and body["status"] == "new", body
    return body["uid"]


def fail_a_batch(service: Any, flag: Path, n: int, tag: str) -> None:
    """`n` memories written while the model raises, and the queue's batch of them failed."""
    log = Path(service.env["MEMORY_DB_PATH"]).parent / "service.stderr"
    seen = log.read_text().count("model server unreachable")
    (flag.parent / (flag.name + ".fail")).touch()
    for i in range(n):
        ingest(service, f"{tag} outage note {i}: the build cache lives on nas {tag}{i}")
    start = time.monotonic()
    while log.read_text().count("model server unreachable") == seen:
        assert time.monotonic() - start < 20, "the queue never tried the batch"
        time.sleep(0.05)
    assert stats(service)["embedding_queue"] == n
    (flag.parent / (flag.name + ".fail")).unlink()


def test_memories_whose_embedding_failed_are_embedded_once_the_model_is_back(
        memory_service: Any, tmp_path: Path) -> None:
    """Finding 1: they wait for the queue's retry (RETRY_S), or less when the model embeds
    another write first; before, they stayed keyword-only for the life of the process."""
    service, flag = serve(memory_service, tmp_path)
    fail_a_batch(service, flag, 3, "first")
    by_time = drained(service, within=embed_queue.RESCAN_S + 5 * embed_queue.RETRY_S)
    assert by_time is not None, "never retried once the model was back"
    assert stats(service)["embedder"]["vectorized"] == 3

    fail_a_batch(service, flag, 3, "second")
    ingest(service, "after the outage: deploys go through the blue pipeline")
    by_success = drained(service, within=by_time * 3)
    assert by_success is not None and by_success < by_time / 3, (by_success, by_time)
    assert stats(service)["embedder"]["vectorized"] == 7


def test_an_edit_never_waits_for_a_stuck_model(memory_service: Any, tmp_path: Path) -> None:
    """Finding 2: edits (REST PATCH) leave the embedding to the queue, as writes do, so four
    of them while the model hangs neither wait nor hold the write lane from a hook's write;
    the queue embeds the new texts once the model answers, and the service stops quietly."""
    service, flag = serve(memory_service, tmp_path)
    uids = [ingest(service, f"deploy note number {n}: staging host is stg-{n}") for n in range(4)]
    assert drained(service, within=60) is not None
    stuck_s = 6.0
    flag.touch()
    threading.Timer(stuck_s, flag.unlink).start()
    start = time.monotonic()

    def edit(uid: str) -> tuple[int, float]:
        status, _ = service.request("PATCH", f"/api/memories/{uid}",
                                    {"content": f"edited deploy note {uid}: host is stg-99"},
                                    timeout=60)
        return status, time.monotonic() - start

    with ThreadPoolExecutor(4) as pool:
        edits = list(pool.map(edit, uids))
        ingest(service, "another note, the hook flush")
        hook_s = time.monotonic() - start
    assert all(status == 200 for status, _ in edits)
    assert max(s for _, s in edits) < stuck_s / 3 and hook_s < stuck_s / 3, (edits, hook_s)
    assert drained(service, within=60) is not None  # the edits' vectors, once the model is back
    assert stats(service)["embedder"]["vectorized"] == 5
    for uid in uids:
        status, body = service.request("GET", f"/api/memories/{uid}")
        assert status == 200 and not body.get("deleted") and "stg-99" in body["content"]
    service.stop()
    log = (Path(service.env["MEMORY_DB_PATH"]).parent / "service.stderr").read_text()
    assert "Traceback" not in log and "CancelledError" not in log, log[-3000:]


class Letters(embedder_support.Letters):
    """In process: raises while `broken`, answers NaN for a text holding "poison"."""

    broken = False

    def embed_documents(self, texts: list[str]) -> Any:
        if self.broken:
            raise RuntimeError("model server restarting")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> Any:
        if "poison" in text:  # all NaN: a NaN count, normed, spreads to the whole row
            return np.full(DIM, np.nan, np.float32)
        return super().embed_query(text)


def engine(tmp_path: Path, model: Letters) -> Any:
    made = testing.engine_with(tmp_path, embedder_support.Plugin(model),
                               plugins="bm25_porter,vector", fast_path=False)
    made.writer.defer = True
    return made


def test_a_failed_batch_is_due_again_after_the_retry_and_a_refused_text_leaves_the_queue(
        tmp_path: Path) -> None:
    """Engine level: a failed batch waits `retry_s`, not the process's life; a text the model
    refuses while it embeds others is no longer counted in the queue (still `missing`)."""
    model = Letters()
    eng = engine(tmp_path, model)
    try:
        eng.ingest([NewMemory("zephyr builds are flaky"), NewMemory("quartz clocks tick")])
        model.broken = True
        assert eng.writer.catch_up(32, retry_s=0.3) == 0
        model.broken = False
        assert eng.writer.catch_up(32, retry_s=0.3) == 0  # not due yet: no spinning
        time.sleep(0.4)
        assert eng.writer.catch_up(32, retry_s=0.3) == 2
        eng.ingest([NewMemory("poison pill text"), NewMemory("the blue pipeline deploys")])
        assert eng.writer.catch_up(32) == 1 and eng.writer.catch_up(32) == 0
        assert eng.writer.refused() == 1 and eng.stats()["embedding_queue"] == 0
        assert eng.embedder_info()["missing"] == 1
    finally:
        eng.close()


def test_a_failed_step_is_retried_when_the_log_says(tmp_path: Path, monkeypatch: Any,
                                                    caplog: Any) -> None:
    """Finding 6: a step that raised (the write lock held by another process) is retried
    RETRY_S later, not at the next rescan."""
    monkeypatch.setattr(embed_queue, "RETRY_S", 0.5)
    monkeypatch.setattr(embed_queue, "RESCAN_S", 20.0)
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 300)
    eng = engine(tmp_path, Letters())
    other = sqlite3.connect(tmp_path / "memory.db", isolation_level=None)
    try:
        eng.ingest([NewMemory("zephyr builds are flaky"), NewMemory("quartz clocks tick")])
        other.execute("BEGIN IMMEDIATE")  # another process's long write
        caplog.set_level(logging.WARNING, logger="semantic_memory.service")
        took: list[float] = []

        async def main() -> None:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(embed_queue.run, eng, eng.settings)
                while "retrying in" not in caplog.text:
                    await anyio.sleep(0.02)
                other.execute("ROLLBACK")
                start = time.monotonic()
                with anyio.move_on_after(embed_queue.RESCAN_S * 0.75):
                    while await anyio.to_thread.run_sync(eng.writer.pending):
                        await anyio.sleep(0.05)
                    took.append(time.monotonic() - start)
                tasks.cancel_scope.cancel()

        anyio.run(main)
        assert took and took[0] < embed_queue.RESCAN_S / 4, "retried only at the rescan"
    finally:
        other.close()
        eng.close()
