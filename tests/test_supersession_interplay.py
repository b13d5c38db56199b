"""How supersession meets the other ways a memory changes state: a purge (an expired artifact,
an old forget), an edit of the memory replaced, the embedding queue's near-duplicate merge, an
unforget, an import and an export. Each path must leave every live memory either current or
superseded by a live memory: a `superseded_by` naming nothing hides a memory for good."""

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
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import DAY, MemoryEngine
from test_service_support import start_service

pytestmark = pytest.mark.both_stores


def cli(db: Path, *args: str, stdin: str | None = None, **env: str
        ) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), MEMORY_DEVICE="cpu", HOME=str(db.parent), **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=environment, input=stdin, timeout=120)


def sql(engine: MemoryEngine, statement: str, *params: object) -> None:
    """One write in the store's own parameter style (psycopg writes %s)."""
    with engine.store.write() as conn:
        conn.execute(statement.replace("?", engine.store.placeholder), params)


def current(engine: MemoryEngine, **filters: object) -> list[str]:
    """The uids `list` shows (current memories only)."""
    return [m.uid for m in engine.list(RecallFilters(**filters), limit=100)]


# --- 1. a purge ------------------------------------------------------------------------------


def test_what_an_expired_artifact_replaced_is_current_again(settings: Settings) -> None:
    """A fact replaced by an artifact (`store --kind artifact --replaces F`) stayed replaced by
    a uid nothing held once the artifact expired: hidden from list, recall and stats for
    good, where a forget of the artifact would have brought it back."""
    engine = MemoryEngine(replace(settings, ttl_artifact_days=90))
    try:
        fact = engine.store_one(NewMemory("The nightly benchmark takes 41 minutes on the CI "
                                          "runner", project="p1")).uid
        run = engine.store_one(NewMemory("Nightly benchmark run: 38 minutes", kind="artifact",
                                         project="p1", replaces=fact))
        assert run.supersedes == [fact] and current(engine) == [run.uid]
        sql(engine, "UPDATE memories SET updated_at = ? WHERE uid = ?",
            time.time() - 91 * DAY, run.uid)

        report = engine.startup_maintenance()  # the service's periodic run
        assert report is not None and report.expired_artifacts == 1
        assert report.to_dict()["current_again"] == 1
        assert current(engine) == [fact] and engine.get(fact).superseded_by is None
        assert engine.recall("nightly benchmark minutes")[0].memory.uid == fact
        assert engine.stats()["memories"] == 1
        assert "current_again" not in engine.purge().to_dict()  # none: as before
    finally:
        engine.close()


def test_a_purged_forget_and_an_older_release_s_leftovers_are_repaired(
        settings: Settings) -> None:
    """A purge also clears what a purge of an earlier release left dangling, and what a
    forgotten memory kept pointing at: brought back, it is current."""
    engine = MemoryEngine(settings)
    try:
        old, newer, kept = (engine.store_one(NewMemory(text, project="p")).uid for text in (
            "The staging database listens on port 6543",
            "The staging database now listens on port 6544",
            "Deploys run from the release branch"))
        assert engine.get(old).superseded_by == newer
        sql(engine, "UPDATE memories SET superseded_by = 'gone0000gone0000' WHERE uid = ?",
            kept)  # what a purge of an earlier release left
        assert engine.forget(old)  # forgotten while replaced: keeps its superseded_by
        sql(engine, "UPDATE memories SET superseded_by = 'gone0000gone0000' WHERE uid = ?",
            old)
        assert current(engine) == [newer]

        report = engine.purge(grace_days=30)  # the forget is recent: kept
        assert report.to_dict()["current_again"] == 1 and report.soft_deleted == 0
        assert sorted(current(engine)) == sorted([newer, kept])
        assert engine.unforget(old).status == "restored"
        # cleared while forgotten; brought back, the newer value restates it again
        assert engine.get(old).superseded_by == newer
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_memory_mcp_purge_says_how_many_are_current_again(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    fact = cli(db, "store", "The nightly benchmark takes 41 minutes", "--project", "p1")
    uid = fact.stdout.split()[1]
    run = cli(db, "store", "Nightly benchmark run: 38 minutes", "--kind", "artifact",
              "--project", "p1", "--replaces", uid)
    assert run.returncode == 0 and f"supersedes {uid}" in run.stdout, run.stderr
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memories SET updated_at = updated_at - 91 * 86400 "
                     "WHERE kind = 'artifact'")
    conn.close()
    purged = cli(db, "purge")
    assert purged.returncode == 0, purged.stderr
    assert json.loads(purged.stdout)["current_again"] == 1
    listed = cli(db, "list", "--json")
    assert [m["uid"] for m in json.loads(listed.stdout)] == [uid]


# --- 2. an edit of the memory replaced -------------------------------------------------------

OLD_PORT = "The staging database listens on port 6543"
NEW_PORT = "The staging database now listens on port 6544"


def test_an_edit_that_unlinks_a_superseded_memory_makes_it_current(engine: MemoryEngine
                                                                    ) -> None:
    """Edited into another project, kind or subject, the older memory stayed replaced by a
    memory it no longer has anything to do with: invisible to list, recall and stats."""
    old = engine.store_one(NewMemory(OLD_PORT, project="p1")).uid
    new = engine.store_one(NewMemory(NEW_PORT, project="p1")).uid
    assert engine.get(old).superseded_by == new
    edited = engine.update(old, project="p2", kind="note",
                           content="Our cat is named Felix and likes salmon")
    assert edited.status == "updated" and "superseded_by" not in edited.to_dict()["memory"]
    assert engine.get(old).superseded_by is None and current(engine, project="p2") == [old]
    assert engine.recall("cat Felix salmon", filters=RecallFilters(project="p2"))[0] \
        .memory.uid == old
    assert engine.stats()["memories"] == 2

    for change in ({"kind": "decision"}, {"project": "p3"},  # the rule links within one
                   {"content": "The nightly backup runs at 02:00 UTC"}):  # another subject
        again = engine.store_one(NewMemory(OLD_PORT.replace("6543", "6540"), project="p1")).uid
        engine.update(again, content=OLD_PORT.replace("6543", "6541"))  # still restated
        assert engine.get(again).superseded_by is None  # 6541 is newest: it is current
        newest = engine.store_one(NewMemory(NEW_PORT.replace("6544", "6549"), project="p1"))
        assert again in (newest.supersedes or []), change
        assert engine.update(again, **change).status == "updated"
        assert engine.get(again).superseded_by is None, change
        engine.forget(again)
        engine.forget(newest.uid)


def test_an_edit_that_still_restates_or_an_explicit_replacement_stays_superseded(
        engine: MemoryEngine) -> None:
    old = engine.store_one(NewMemory(OLD_PORT, project="p1")).uid
    new = engine.store_one(NewMemory(NEW_PORT, project="p1")).uid
    edited = engine.update(old, content=OLD_PORT.replace("6543", "6542"), tags=["db"])
    assert edited.to_dict()["memory"]["superseded_by"] == new  # the result says so too
    assert engine.get(old).superseded_by == new and current(engine) == [new]
    # a replacement the rule never made, by a person's `replaces`: a typo fixed keeps it
    yarn = engine.store_one(NewMemory("Prefers yarn for package managment", kind="preference",
                                      project="p1")).uid
    pnpm = engine.store_one(NewMemory("Prefers pnpm for package management",
                                      kind="preference", project="p1", replaces=yarn)).uid
    engine.update(yarn, content="Prefers yarn for package management")
    assert engine.get(yarn).superseded_by == pnpm


@pytest.mark.sqlite_only
def test_rest_patch_of_a_superseded_memory_into_another_project(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        with service.client() as http:
            old, new = (http.post("/ingest", json={"content": text, "kind": "fact",
                                                   "project": "p1"}).json()["uid"]
                        for text in (OLD_PORT, NEW_PORT))
            patched = http.patch(f"/api/memories/{old}", json={
                "project": "p2", "kind": "note",
                "content": "Our cat is named Felix and likes salmon"})
            assert patched.status_code == 200, patched.text
            listed = http.get("/api/memories", params={"project": "p2"}).json()
            assert [m["uid"] for m in listed["items"]] == [old]
            assert http.get(f"/api/memories/{old}").json()["superseded_by"] is None
            assert http.get(f"/api/memories/{new}").json()["supersedes"] == []
    finally:
        service.stop()


# --- 6. an export's times --------------------------------------------------------------------


def test_an_export_keeps_times_to_the_microsecond(engine: MemoryEngine) -> None:
    """An export wrote whole seconds: an import of it moved every memory's times back by up
    to a second, where the docs promise the memory restored as it was."""
    from semantic_memory.models import parse_time

    uid = engine.store_one(NewMemory("The release train leaves on Thursdays")).uid
    engine.update(uid, tags=["release"])
    stored = engine.get(uid)
    sql(engine, "UPDATE memories SET created_at = ? WHERE uid = ?", 1_700_000_000.0, uid)
    (record,) = engine.export()
    assert record["created_at"] == "2023-11-14T22:13:20+00:00"  # a whole second stays one
    assert "." in record["updated_at"]
    assert abs(parse_time(record["updated_at"]) - stored.updated_at) < 1e-6


@pytest.mark.sqlite_only
def test_an_export_imported_restores_the_same_times(tmp_path: Path) -> None:
    import sqlite3

    source, target = tmp_path / "a" / "memory.db", tmp_path / "b" / "memory.db"
    for text in ("The release train leaves on Thursdays", "Deploys need two approvals"):
        assert cli(source, "store", text).returncode == 0
    exported = cli(source, "export")
    assert exported.returncode == 0, exported.stderr
    imported = cli(target, "import", "-", stdin=exported.stdout)
    assert imported.returncode == 0, imported.stderr

    def times(db: Path) -> list[tuple[str, float, float]]:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT uid, created_at, updated_at FROM memories "
                                "ORDER BY uid").fetchall()
        conn.close()
        return rows

    before, after = times(source), times(target)
    assert [r[0] for r in before] == [r[0] for r in after]
    for (_, created, updated), (_, created2, updated2) in zip(before, after):
        assert abs(created - created2) < 1e-6 and abs(updated - updated2) < 1e-6


# --- 4. an unforget of a value changed meanwhile ---------------------------------------------

LATEST_PORT = "The staging database now listens on port 6546"


def test_an_unforgotten_value_a_newer_one_restates_comes_back_superseded(
        engine: MemoryEngine) -> None:
    """6543, then 6544; 6544 forgotten (6543 current again), 6546 stored (replacing 6543);
    6544 brought back: it came back current, beside 6546, and recall answered both."""
    first = engine.store_one(NewMemory(OLD_PORT, project="p1")).uid
    second = engine.store_one(NewMemory(NEW_PORT, project="p1")).uid
    assert engine.forget_memory(second) == [first]
    latest = engine.store_one(NewMemory(LATEST_PORT, project="p1"))
    assert latest.supersedes == [first]

    result = engine.unforget(second)
    assert result.status == "restored" and result.memory.superseded_by == latest.uid
    assert result.line() == (f"unforgot {second}: it is live again, superseded by the newer "
                             f"{latest.uid} (recall leaves it out; `memory-mcp unsupersede "
                             f"{second}` makes it current)")
    assert current(engine, project="p1") == [latest.uid]
    assert [h.memory.uid for h in engine.recall("staging database port",
                                                filters=RecallFilters(project="p1"))] \
        == [latest.uid]
    assert engine.supersedes(latest.uid) == [second, first]  # history, newest first
    assert engine.unsupersede(second) == latest.uid  # a person's call, as ever


def test_an_unforget_without_a_newer_restatement_comes_back_current(engine: MemoryEngine
                                                                     ) -> None:
    first = engine.store_one(NewMemory(OLD_PORT, project="p1")).uid
    second = engine.store_one(NewMemory(NEW_PORT, project="p1")).uid
    engine.forget(second)
    other = engine.store_one(NewMemory(LATEST_PORT, project="p2")).uid  # another project
    note = engine.store_one(NewMemory(LATEST_PORT, kind="note", project="p1")).uid
    result = engine.unforget(second)
    assert result.memory.superseded_by is None
    assert result.line() == f"unforgot {second}: it is live again"
    # what the forget made current stays current (docs/cli.md)
    assert sorted(current(engine, project="p1")) == sorted([first, second, note])
    assert current(engine, project="p2") == [other]
    # a note is never superseded by the rule; nor is anything with MEMORY_SUPERSEDE=0
    engine.forget(note)
    engine.store_one(NewMemory(LATEST_PORT.replace("6546", "6547"), kind="note",
                               project="p1"))
    assert engine.unforget(note).memory.superseded_by is None
    engine.forget(second)
    engine.settings = replace(engine.settings, supersede=False)
    engine.store_one(NewMemory(LATEST_PORT, project="p1"))
    assert engine.unforget(second).memory.superseded_by is None


@pytest.mark.sqlite_only
def test_rest_unforget_says_a_newer_memory_supersedes_it(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        with service.client() as http:
            def store(text: str) -> str:
                return http.post("/ingest", json={"content": text, "kind": "fact",
                                                  "project": "p1"}).json()["uid"]

            store(OLD_PORT)
            second = store(NEW_PORT)
            assert http.delete(f"/api/memories/{second}").status_code == 200
            latest = store(LATEST_PORT)
            answer = http.post(f"/api/memories/{second}/unforget")
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "restored"
            assert answer.json()["memory"]["superseded_by"] == latest
            found = http.get("/api/search", params={"q": "staging database port",
                                                    "project": "p1"}).json()["items"]
            assert [i["uid"] for i in found] == [latest]
    finally:
        service.stop()
    assert f"unforgot memory {second}; superseded by newer memory {latest}" in service.stderr()


# --- 3. the embedding queue's near-duplicate merge, taken back --------------------------------

TRAIN = "The release train leaves every second Thursday at noon"


def queue_engine(settings: Settings, minilm_path: Path, **more: object) -> MemoryEngine:
    """An engine whose writes wait for their vectors in the queue, as the service's do."""
    engine = MemoryEngine(replace(settings, model_path=str(minilm_path), dedup_sim=0.9,
                                  **more))
    assert engine.writer.deferrable(), engine.plugin_problems
    engine.writer.defer = True
    return engine


def merged_twin(engine: MemoryEngine) -> tuple[str, str]:
    """(the first, its near-duplicate the queue merged away)."""
    first = engine.store_one(NewMemory(TRAIN, project="p")).uid
    engine.writer.catch_up(64)
    twin = engine.store_one(NewMemory(TRAIN + "!", project="p")).uid
    assert engine.writer.catch_up(64) == 1 and engine.get(twin).deleted
    return first, twin


def test_a_near_duplicate_merge_taken_back_stays_taken_back(
        settings: Settings, minilm_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Unforget answered "restored", and the queue merged the memory away again at its next
    pass: it had no vector, so it was judged a near-duplicate once more. Nor did the merge
    say so in the log, where every other forget is one line."""
    engine = queue_engine(settings, minilm_path)
    try:
        with caplog.at_level("INFO", logger="semantic_memory"):
            first, twin = merged_twin(engine)
        assert f"forgot memory {twin} (near-duplicate of {first})" in caplog.messages
        assert engine.unforget(twin).status == "restored"
        for _ in range(3):
            engine.writer.catch_up(64)
        assert not engine.get(twin).deleted and engine.stats()["embedding_queue"] == 0
        assert twin in [h.memory.uid for h in engine.recall("release train Thursday")]
    finally:
        engine.close()


def test_a_memory_forgotten_before_its_vector_is_not_merged_once_brought_back(
        settings: Settings, minilm_path: Path) -> None:
    engine = queue_engine(settings, minilm_path)
    try:
        first = engine.store_one(NewMemory(TRAIN, project="p")).uid
        engine.writer.catch_up(64)
        twin = engine.store_one(NewMemory(TRAIN + "!", project="p")).uid
        assert engine.forget(twin)  # before the queue came to it
        assert engine.unforget(twin).status == "restored"
        engine.writer.catch_up(64)
        assert not engine.get(twin).deleted and not engine.get(first).deleted
    finally:
        engine.close()


def test_brought_back_by_a_process_without_the_model_it_is_not_merged_either(
        settings: Settings, minilm_path: Path) -> None:
    """`memory-mcp unforget` in a shell without MEMORY_MODEL_PATH, beside the service's
    queue: the memory merged kept the vector the queue made for it."""
    engine = queue_engine(settings, minilm_path)
    keyword_only = MemoryEngine(settings)
    try:
        _, twin = merged_twin(engine)
        assert not keyword_only.writer.deferrable()
        assert keyword_only.unforget(twin).status == "restored"
        assert engine.writer.catch_up(64) == 0 and not engine.get(twin).deleted
    finally:
        keyword_only.close()
        engine.close()


@pytest.mark.sqlite_only
def test_the_service_keeps_a_merge_taken_back(tmp_path: Path, minilm_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_MODEL_PATH=str(minilm_path),
                            MEMORY_DEDUP_SIM="0.9")
    try:
        with service.client() as http:
            def settled() -> None:
                deadline = time.monotonic() + 60
                while http.get("/api/stats").json()["embedding_queue"]:
                    assert time.monotonic() < deadline, service.stderr()
                    time.sleep(0.1)

            first = http.post("/ingest", json={"content": TRAIN, "project": "p"}).json()["uid"]
            settled()
            twin = http.post("/ingest", json={"content": TRAIN + "!",
                                              "project": "p"}).json()["uid"]
            settled()
            forgotten = http.get("/api/forgotten").json()["items"]
            assert [m["uid"] for m in forgotten] == [twin]
            assert http.post(f"/api/memories/{twin}/unforget").json()["status"] == "restored"
            settled()
            http.post("/ingest", json={"content": "Deploys need two approvals"})  # wakes it
            settled()
            assert http.get(f"/api/memories/{twin}").status_code == 200
            assert http.get("/api/forgotten").json()["items"] == []
    finally:
        service.stop()
    assert f"forgot memory {twin} (near-duplicate of {first})" in service.stderr()


# --- 5. an import naming no live memory as the one that replaced a line ----------------------


def test_an_import_clears_superseded_by_naming_no_live_memory(engine: MemoryEngine) -> None:
    """A line superseded by itself, by a uid stored nowhere, or by a line the same file marks
    forgotten was imported as new and invisible: list, recall and stats never showed it."""
    lines = [
        NewMemory("Self superseding fact about the green rack", project="p1",
                  uid="00000000000000e1", superseded_by="00000000000000e1"),
        NewMemory("Superseded by a forgotten one about the red rack", project="p1",
                  uid="00000000000000e2", superseded_by="00000000000000e3"),
        NewMemory("Forgotten one about the red rack moved", project="p1",
                  uid="00000000000000e3", forgotten=True),
        NewMemory("The build server runs Ubuntu 22.04", project="p1", uid="00000000000000d1",
                  superseded_by="00000000000000ff"),
        # a line may name one a later batch brings: that supersession is kept
        NewMemory("The CI runners use Node 18", project="p1", uid="00000000000000c1",
                  superseded_by="00000000000000c2"),
    ]
    later = NewMemory("The CI runners now use Node 20", project="p1", uid="00000000000000c2")
    results = engine.ingest(lines, batch_is_session=False)  # what `memory-mcp import` does
    results += engine.ingest([later], batch_is_session=False)
    assert [r.status for r in results] == ["new"] * 6
    assert current(engine) == ["00000000000000c2"]  # before the import ends

    assert engine.finish_import(6, 1000) == 3
    assert sorted(current(engine)) == ["00000000000000c2", "00000000000000d1",
                                       "00000000000000e1", "00000000000000e2"]
    assert engine.get("00000000000000c1").superseded_by == "00000000000000c2"
    assert engine.recall("green rack")[0].memory.uid == "00000000000000e1"
    assert engine.finish_import(0, 1000) == 0  # run twice: nothing more
