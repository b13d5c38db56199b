"""Issue #25: writes never wait for an embedding. The service stores and keyword-indexes a
memory at once; its vector follows from the embedding queue (service/embed_queue.py), where a
near-duplicate is merged when its vector arrives. Real MiniLM, real SQLite, a real service."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from semantic_memory import testing
from semantic_memory.models import NewMemory, RecallFilters

PLUGINS = "bm25_porter,bm25_trigram,vector,llama_cpp"


def hybrid(tmp_path: Path, minilm_path: Path, **settings: Any) -> Any:
    return testing.engine_with(tmp_path, plugins=PLUGINS, model_path=str(minilm_path),
                               device="cpu", **settings)


def test_deferred_writes_are_embedded_by_catch_up_and_duplicates_merged(
        tmp_path: Path, minilm_path: Path) -> None:
    engine = hybrid(tmp_path, minilm_path)
    try:
        assert engine.recall_mode == "hybrid" and engine.writer.deferrable()
        engine.writer.defer = True
        first = engine.store_one(NewMemory("Alice prefers tabs in Go files", project="p"))
        twin = engine.store_one(NewMemory("ALICE PREFERS TABS IN GO FILES", project="p"))
        other = engine.store_one(NewMemory("The staging db listens on port 5433", project="p"))
        assert {first.status, twin.status, other.status} == {"new"}  # no vector yet: no dedup
        assert engine.writer.queued.is_set() and engine.stats()["embedding_queue"] == 3
        assert engine.recall("tabs Go")[0].memory.uid == first.uid  # found by words at once
        assert engine.writer.catch_up(64) == 3
        assert engine.stats()["embedding_queue"] == 0
        assert engine.get(twin.uid).deleted and not engine.get(first.uid).deleted  # merged
        hits = engine.recall("which port does the staging database use?")
        assert hits[0].memory.uid == other.uid and "vector" in hits[0].ranks
        assert engine.writer.catch_up(64) == 0
    finally:
        engine.close()


def contents(engine: Any, query: str) -> list[str]:
    return [h.memory.content for h in engine.recall(query, filters=RecallFilters(project="p"))]


@pytest.mark.parametrize("deferred", [False, True])
def test_a_changed_value_is_no_near_duplicate(tmp_path: Path, minilm_path: Path,
                                              deferred: bool) -> None:
    """MiniLM puts "TTL 300" within 0.986 of "TTL 600", "pnpm, not npm" within 0.992 of
    "npm, not pnpm" and "Enable strict mode" within 0.981 of "Disable strict mode". Judged near-duplicates, the update was refused as a duplicate of the old
    value (at once), or forgotten when its vector arrived while the fact it had replaced
    stayed replaced (queued): recall then found neither."""
    engine = hybrid(tmp_path, minilm_path)
    try:
        engine.writer.defer = deferred
        texts = ["The cache TTL is 300 seconds", "The cache TTL is 600 seconds",
                 "Use pnpm, not npm", "Use npm, not pnpm",
                 # one word swapped: 0.981
                 "Enable strict mode in tsconfig", "Disable strict mode in tsconfig"]
        stored = [engine.store_one(NewMemory(t, project="p")) for t in texts]
        old, new = stored[:2]
        assert engine.writer.catch_up(64) == (6 if deferred else 0)
        assert {m.status for m in stored} == {"new"}
        assert not any(engine.get(m.uid).deleted for m in stored)
        assert engine.get(old.uid).superseded_by == new.uid
        assert contents(engine, "cache TTL") == ["The cache TTL is 600 seconds"]
        assert sorted(contents(engine, "strict mode")) == ["Disable strict mode in tsconfig",
                                                           "Enable strict mode in tsconfig"]
    finally:
        engine.close()


def test_a_merged_restatement_keeps_its_place_in_supersession(tmp_path: Path,
                                                              minilm_path: Path) -> None:
    """Tabs, then spaces (replacing tabs), then TABS again in capitals (replacing spaces). The
    last one's vector shows it near-duplicates the first (MiniLM lowercases: cosine 1.0), so
    it is merged into the first, which takes its place: current, and replacing spaces. Left
    as they were, the first stayed replaced by spaces, spaces by the forgotten capitals, and
    recall found none of the three."""
    engine = hybrid(tmp_path, minilm_path)
    try:
        engine.writer.defer = True
        tabs, spaces, again = (engine.store_one(NewMemory(t, project="p")) for t in (
            "Alice prefers tabs in Go files", "Alice prefers spaces in Go files",
            "ALICE PREFERS TABS IN GO FILES"))
        assert engine.get(tabs.uid).superseded_by == spaces.uid  # the rule, at ingest
        assert engine.get(spaces.uid).superseded_by == again.uid
        assert engine.writer.catch_up(64) == 3
        assert engine.get(again.uid).deleted  # merged into the first
        assert engine.get(tabs.uid).superseded_by is None
        assert engine.get(spaces.uid).superseded_by == tabs.uid
        assert contents(engine, "Alice Go files") == ["Alice prefers tabs in Go files"]
    finally:
        engine.close()


def test_without_the_queue_a_write_is_embedded_at_once(tmp_path: Path,
                                                       minilm_path: Path) -> None:
    engine = hybrid(tmp_path, minilm_path)
    try:
        engine.store_one(NewMemory("Alice prefers tabs in Go files", project="p"))
        assert engine.store_one(NewMemory("ALICE PREFERS TABS IN GO FILES",
                                          project="p")).status == "duplicate"
        assert engine.stats()["embedding_queue"] == 0
    finally:
        engine.close()


@pytest.mark.slow
def test_the_service_answers_writes_before_their_vectors_and_fills_them_in(
        memory_service: Any, minilm_path: Path) -> None:
    service = memory_service(MEMORY_PLUGINS=PLUGINS, MEMORY_MODEL_PATH=str(minilm_path),
                             MEMORY_DEVICE="cpu", MEMORY_FAST_PATH="0")  # always embed queries
    items = [{"content": f"Decision {i}: the {w} service retries {i} times before failing",
              "project": "q"} for i, w in enumerate(["billing", "search", "auth", "mail"] * 10)]
    status, body = service.request("POST", "/ingest", {"items": items})
    assert status == 200 and all(r["status"] == "new" for r in body["results"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, stats = service.request("GET", "/api/stats")
        if stats["embedding_queue"] == 0 and stats["embedder"]["vectorized"] == 40:
            break
        time.sleep(0.5)
    assert stats["embedding_queue"] == 0 and stats["embedder"]["vectorized"] == 40
    status, found = service.request("POST", "/recall", {"query": "billing service retries",
                                                        "project": "q", "k": 3})
    assert status == 200 and any("vector" in item.get("ranks", {}) for item in found["items"])


def test_a_text_that_yields_no_vector_never_spins_the_queue(tmp_path: Path,
                                                            minilm_path: Path) -> None:
    """A memory whose embedding fails stays keyword-only and out of the queue's way: catch_up
    reports no progress for it (the service's worker then waits), and newer memories behind it
    are still embedded."""
    engine = hybrid(tmp_path, minilm_path)
    try:
        engine.writer.defer = True
        bad = engine.store_one(NewMemory("this text will not embed", project="p"))
        vector = next(c for c in engine.channels if c.name == "vector")
        real = vector.prepare

        def prepare(items: Any) -> list[Any]:  # the model makes no vector for the bad text
            return [None if "will not embed" in m.content else v
                    for m, v in zip(items, real(items))]

        vector.prepare = prepare  # type: ignore[method-assign]
        assert engine.writer.catch_up(8) == 0  # no progress: the worker sleeps, no busy loop
        good = engine.store_one(NewMemory("the staging db listens on port 5433", project="p"))
        assert engine.writer.catch_up(8) == 1 and engine.writer.catch_up(8) == 0
        # the bad one is refused, not queued: still found by its words, still without a vector
        stats = engine.stats()
        assert (stats["embedding_queue"], stats["embedding_refused"]) == (0, 1)
        assert engine.embedder_info()["missing"] == 1
        assert engine.recall("will not embed")[0].memory.uid == bad.uid
        assert engine.recall("staging port")[0].memory.uid == good.uid
    finally:
        engine.close()


def test_restored_near_duplicates_are_not_merged_when_their_vectors_arrive(
        tmp_path: Path, minilm_path: Path) -> None:
    """An import of an export keeps memories ingest never near-dedups (they were judged in
    the store they came from): the queue embeds them and merges none."""
    engine = hybrid(tmp_path, minilm_path)
    try:
        engine.writer.defer = True
        then = time.time() - 86_400
        results = engine.ingest([
            NewMemory("Alice prefers tabs in Go files", project="p", uid="a1", created_at=then,
                      updated_at=then),
            NewMemory("ALICE PREFERS TABS IN GO FILES", project="p", uid="a2", created_at=then,
                      updated_at=then)], batch_is_session=False)
        assert [r.status for r in results] == ["new", "new"]
        assert engine.writer.catch_up(8) == 2
        assert not engine.get("a1").deleted and not engine.get("a2").deleted
    finally:
        engine.close()
