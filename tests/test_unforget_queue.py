"""An unforget in a service leaves the embedding to the embedding queue, as an edit does: a
stuck model never holds it, the memory gets its vector once the model answers, and the queue
never merges a memory brought back (or edited) into a near-duplicate. The queue's marks of
such memories (`Writer._edited`) go once they are embedded or out of the queue. A real embedder
plugin (an entry point on a PYTHONPATH site) that hangs while a flag file exists, against a
real `memory-mcp serve` on a random port; the engine-level cases run the queue's batches on a
real SQLite file. Timings are compared as ratios only."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from embedder_support import Letters, Plugin
from semantic_memory import testing
from semantic_memory.models import NewMemory
from test_plugin_isolation import install

#: The model: a letter histogram; hangs while the file FLAG exists.
PLUGIN = '''
import os, time
import numpy as np
from semantic_memory.embedders import Embedder
from semantic_memory.hookspecs import hookimpl

FLAG = os.environ["STUCKEMB_FLAG"]

class Letters(Embedder):
    name = "letters"; model_id = "letters#1"; dim = 26; cosine_floor = 0.0

    def embed_documents(self, texts):
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


def stats(service: Any) -> dict[str, Any]:
    status, body = service.request("GET", "/api/stats")
    assert status == 200
    return body


def drained(service: Any, within: float) -> bool:
    """Whether the queue is empty and every memory has a vector within `within` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        now = stats(service)
        if now["embedding_queue"] == 0 and now["embedder"]["missing"] == 0:
            return True
        time.sleep(0.1)
    return False


def test_an_unforget_never_waits_for_a_stuck_model(memory_service: Any, tmp_path: Path) -> None:
    """REST unforget while the model hangs answers at once (before: it embedded inline and
    waited for the model); the memory is live and found, and gets its vector once the model
    answers."""
    flag = tmp_path / "model.flag"
    home = tmp_path / "home"
    home.mkdir()
    service = memory_service(
        PYTHONPATH=str(install(tmp_path / "site", "stuckemb", PLUGIN)), STUCKEMB_FLAG=str(flag), HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
        MEMORY_EMBEDDER="letters", MEMORY_PLUGINS="bm25_porter,vector,stuckemb")
    flag.touch()  # stuck from the start: the queue's batch waits on the model
    status, body = service.request("POST", "/ingest", {
        "content": "the nightly parquet export runs on host etl-3", "project": "p"})
    assert status == 200 and body["status"] == "new", body
    uid = body["uid"]
    status, _ = service.request("DELETE", f"/api/memories/{uid}")
    assert status == 200
    stuck_s = 6.0
    threading.Timer(stuck_s, flag.unlink).start()
    start = time.monotonic()
    status, body = service.request("POST", f"/api/memories/{uid}/unforget", timeout=60)
    took = time.monotonic() - start
    assert status == 200 and body["status"] == "restored", body
    assert took < stuck_s / 3, took
    assert flag.exists(), "the model answered before the check: nothing was shown"
    assert drained(service, within=60), stats(service)  # its vector, once the model answers
    assert stats(service)["embedder"]["vectorized"] == 1
    status, body = service.request("GET", f"/api/memories/{uid}")
    assert status == 200 and not body.get("deleted"), body


def deferring(tmp_path: Path) -> Any:
    """An engine whose writer defers embedding to the queue, as a service's does."""
    made = testing.engine_with(tmp_path, Plugin(Letters()), plugins="bm25_porter,vector",
                               fast_path=False)
    made.writer.defer = True
    return made


OLDER = "the staging host for the deploys is stg-7"
NEAR = "the staging host for the deploys is stg-7 now"


def test_the_queue_merges_a_near_duplicate_but_not_one_brought_back(tmp_path: Path) -> None:
    """A near-duplicate written since the start is merged by the queue (the rule); the same
    memory forgotten before its vector and brought back is not: a person brought it back."""
    eng = deferring(tmp_path)
    try:
        older = eng.store_one(NewMemory(OLDER))
        assert eng.writer.catch_up(32) == 1
        merged = eng.store_one(NewMemory(NEAR))
        assert eng.writer.catch_up(32) == 1
        assert eng.get(merged.uid).deleted, "the control: the queue merges a near-duplicate"
        eng.unforget(merged.uid)  # its vector was made: not in the queue
        assert eng.writer.catch_up(32) == 0 and not eng.get(merged.uid).deleted
        eng.forget(merged.uid)
        eng.forget(older.uid)
        eng.unforget(older.uid)
        back = eng.store_one(NewMemory(NEAR + " and then"))
        eng.forget(back.uid)  # forgotten before the queue embedded it
        assert eng.unforget(back.uid).status == "restored"
        assert eng.writer.catch_up(32) == 1
        assert not eng.get(back.uid).deleted
        assert eng.embedder_info()["missing"] == 0
    finally:
        eng.close()


def test_the_marks_of_edited_and_unforgotten_memories_go_once_out_of_the_queue(
        tmp_path: Path) -> None:
    """`Writer._edited` does not grow for the process's life: a mark goes when the queue
    embeds the memory, or when a later look at the queue no longer finds it there (brought
    back with its vector); an edited near-duplicate is still never merged."""
    eng = deferring(tmp_path)
    try:
        eng.store_one(NewMemory(OLDER))
        others = [eng.store_one(NewMemory(f"note {n}: the cache lives on nas{n}")).uid
                  for n in range(5)]
        assert eng.writer.catch_up(32) == 6
        edited = eng.update(others[0], content=NEAR).memory.uid
        for uid in others[1:]:
            eng.update(uid, content=f"edited: {uid} moved to the blue pipeline")
        eng.forget(others[1])
        eng.unforget(others[1])  # edited, not yet embedded: the queue embeds it
        assert len(eng.writer._edited) == 5
        assert eng.writer.catch_up(32) == 5
        assert not eng.get(edited).deleted  # an edit is never merged
        assert eng.writer._edited == {}
        eng.forget(others[2])
        eng.unforget(others[2])  # its vector kept: not in the queue
        assert len(eng.writer._edited) == 1
        assert eng.writer.catch_up(32) == 0
        assert eng.writer._edited == {}
        assert eng.embedder_info()["missing"] == 0
    finally:
        eng.close()
