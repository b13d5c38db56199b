"""A purged text does not come back from a re-flush: a hook's flush (SessionEnd, PreCompact)
sends the whole session again, and text a forgotten memory holds is answered as its duplicate
(tests/test_fixbatch_g_reflush.py); but once that memory was purged (`memory-mcp purge`, the
maintenance's purge after the grace period, `purge --matching TEXT`) nothing recorded it, and a
resumed session's flush stored the exchange again as a new live memory. Now a purge leaves a
tombstone, the (project, hash) of each memory's whole text (`purged_texts`, no text), written
in the transaction that deletes it, and automatic capture of such a text is answered
`duplicate` without a uid, `reason` "purged: …"; an explicit store is a new memory. Expired
artifacts (a TTL) leave none. Schema: SQLite 13, PostgreSQL 14; `memory-mcp migrate` copies the
tombstones. On both stores."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness_support import add_turn, closed_port, hook_env, session_end
from old_schemas import as_written_at
from test_service_support import Service, memory_mcp_command, start_service

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores
QUESTION = "Who is the billing contact at Zyxwvutsrq Holdings?"
SECRET = "The billing contact at Zyxwvutsrq Holdings is Jane Roe, on her phone 555-0199."
TESTS = "Run pnpm test in the web folder; it uses vitest for every package."
PURGED = "purged: a memory of this project held this text and was purged"


def store_env(store_kind: str) -> dict[str, str]:
    """What names the store beside `hook_env`'s MEMORY_DB_PATH (a new PostgreSQL database)."""
    if store_kind == "postgresql":
        import pg

        return {"MEMORY_DB_URL": pg.new_database()}
    return {"MEMORY_PLUGINS": "bm25_porter,bm25_trigram"}


def cli(tmp: Path, store: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` on the store the service in `tmp` serves."""
    return subprocess.run([*memory_mcp_command(), *args], env=hook_env(tmp, None, **store),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def live(service: Service, word: str) -> dict[str, str]:
    """uid -> content of the live memories holding `word`."""
    with service.client() as http:
        return {m["uid"]: m["content"] for m in http.get(
            "/api/memories", params={"limit": 100}).json()["items"] if word in m["content"]}


def flushed_again(service: Service, project: str = "repo") -> dict[str, Any]:
    """The secret exchange sent to /ingest as a flush sends it: its one piece's result."""
    with service.client() as http:
        answer = http.post("/ingest", json={"items": [{
            "exchange": {"user": QUESTION, "reply": SECRET}, "kind": "note",
            "source": "compaction", "project": project}]}).json()
    return answer["results"][0]["pieces"][0]


def flushed_session(tmp: Path, store_kind: str) -> tuple[Service, dict[str, str], Path, str]:
    """A service in `tmp`, the store's env, and a two-exchange session its SessionEnd hook
    flushed; the content of the secret exchange's memory."""
    (tmp / "repo").mkdir()
    transcript = tmp / "transcript.jsonl"
    add_turn(transcript, QUESTION, SECRET)
    add_turn(transcript, "How do we run the web tests?", TESTS)
    store = store_env(store_kind)
    service = start_service(tmp, **store)
    assert "2 new" in session_end(tmp, service.url, transcript)["detail"]
    [content] = live(service, "Zyxwvutsrq").values()
    return service, store, transcript, content


def resume(tmp: Path, url: str, transcript: Path) -> dict[str, Any]:
    """The session resumed (`claude --continue`): one more exchange, then it ends again."""
    add_turn(transcript, "And the deploy command?", "Run make deploy from the repo root.")
    return session_end(tmp, url, transcript)


def test_a_resumed_sessions_flush_does_not_bring_back_a_forgotten_and_purged_exchange(
        tmp_path: Path, store_kind: str) -> None:
    service, store, transcript, content = flushed_session(tmp_path, store_kind)
    try:
        with service.client() as http:
            for uid in live(service, "Zyxwvutsrq"):
                assert http.delete(f"/api/memories/{uid}").status_code == 200
        purged = cli(tmp_path, store, "purge")
        assert purged.returncode == 0, purged.stderr
        assert json.loads(purged.stdout)["soft_deleted"] == 1
        line = resume(tmp_path, service.url, transcript)
        assert line["outcome"] == "stored" and "1 new, 2 already stored" in line["detail"], line
        assert live(service, "Zyxwvutsrq") == {}
        assert live(service, "make deploy") != {}
        piece = flushed_again(service)
        assert (piece["status"], piece["duplicate"], "uid" in piece) == ("duplicate", True, False)
        assert piece["reason"].startswith(PURGED), piece
        assert flushed_again(service, project="other")["status"] == "new"  # per project
        # a person asking again is heard; a later flush is then a duplicate of that memory
        asked = cli(tmp_path, store, "store", content, "--project", "repo", "--json")
        assert asked.returncode == 0, asked.stderr
        stored = json.loads(asked.stdout)
        assert stored["status"] == "new"
        piece = flushed_again(service)
        assert (piece["status"], piece["uid"]) == ("duplicate", stored["uid"])
        assert "reason" not in piece
    finally:
        service.stop()


def test_a_resumed_sessions_flush_does_not_bring_back_what_purge_matching_removed(
        tmp_path: Path, store_kind: str) -> None:
    service, store, transcript, _ = flushed_session(tmp_path, store_kind)
    try:
        purged = cli(tmp_path, store, "purge", "--matching", "zyxwvutsrq", "--yes")
        assert purged.returncode == 0, purged.stderr
        assert json.loads(purged.stdout)["memories"] == 1
        line = resume(tmp_path, service.url, transcript)
        assert "1 new, 2 already stored" in line["detail"], line
        assert live(service, "Zyxwvutsrq") == {}
        assert flushed_again(service)["reason"].startswith(PURGED)
    finally:
        service.stop()


def test_a_spooled_flush_replayed_after_the_purge_does_not_bring_it_back(
        tmp_path: Path, store_kind: str) -> None:
    service, store, transcript, _ = flushed_session(tmp_path, store_kind)
    try:
        with service.client() as http:
            for uid in live(service, "Zyxwvutsrq"):
                assert http.delete(f"/api/memories/{uid}").status_code == 200
        assert cli(tmp_path, store, "purge").returncode == 0
        # the service is unreachable at the resumed session's end: the flush goes to the spool
        down = f"http://127.0.0.1:{closed_port()}"
        assert resume(tmp_path, down, transcript)["outcome"] == "spooled"
        replayed = subprocess.run([*memory_mcp_command(), "spool", "replay"],
                                  env=hook_env(tmp_path, service.url), capture_output=True,
                                  text=True, timeout=60)
        assert replayed.returncode == 0, replayed.stderr
        assert live(service, "make deploy") != {}
        assert live(service, "Zyxwvutsrq") == {}
        # handled: neither left waiting nor kept as refused
        assert [p.name for p in (tmp_path / "spool").rglob("*") if p.is_file()] == []
    finally:
        service.stop()


def test_the_vector_channels_path_answers_a_purged_text_too(
        settings: Settings, minilm_path: Path) -> None:
    """With a channel that finds near-duplicates, items are written one by one
    (`_insert_or_refresh`), not as a batch: the same answer there."""
    engine = MemoryEngine(replace(settings, model_path=str(minilm_path)))
    text = "The Qwertzuiop build cache lives in /var/cache/qwertz and is wiped on Sundays"
    try:
        assert engine.recall_mode == "hybrid"  # the vector channel is on
        first = engine.store_one(NewMemory(text, kind="artifact", source="tool", project="web"))
        engine.forget(first.uid)
        assert engine.purge().soft_deleted == 1
        again = engine.store_one(NewMemory(text, kind="artifact", source="tool", project="web"))
        assert (again.status, again.uid) == ("duplicate", None)
        assert again.reason.startswith(PURGED)
        assert engine.store_one(NewMemory(text, project="web")).status == "new"
    finally:
        engine.close()


def test_an_expired_artifact_leaves_no_tombstone(settings: Settings) -> None:
    """A TTL's expiry is no one's forget: the same tool output captured again is stored."""
    engine = MemoryEngine(replace(settings, ttl_artifact_days=1))
    text = "pnpm test: 412 passed, 3 skipped in 38.2 s (vitest run --coverage)"
    old = 1_700_000_000.0
    try:
        engine.store_one(NewMemory(text, kind="artifact", source="tool", project="web",
                                   created_at=old, updated_at=old))
        assert engine.purge().expired_artifacts == 1
        assert list(engine.store.export_purged()) == []
        again = engine.store_one(NewMemory(text, kind="artifact", source="tool", project="web"))
        assert again.status == "new"
    finally:
        engine.close()


def test_a_store_of_the_schema_before_opens_with_its_data(settings: Settings) -> None:
    """Schema 12 (SQLite) / 13 (PostgreSQL) had no `purged_texts`: it is created on open, the
    memories stay, and a purge then leaves its tombstone."""
    engine = MemoryEngine(settings)
    kept = engine.store_one(NewMemory("Deploys go through make deploy", project="web")).uid
    gone = engine.store_one(NewMemory(SECRET, source="compaction", project="web")).uid
    engine.forget(gone)
    engine.close()
    as_written_at(settings, [("DROP TABLE purged_texts", ())], sqlite_version=12, pg_version=13)
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == (14 if settings.db_url else 13)
        assert engine.get(kept).content == "Deploys go through make deploy"
        assert engine.get(gone).deleted
        assert engine.purge().soft_deleted == 1
        assert engine.store_one(NewMemory(SECRET, source="compaction", project="web")
                                ).reason.startswith(PURGED)
    finally:
        engine.close()


def test_migrate_copies_the_tombstones(tmp_path: Path, settings: Settings,
                                       store_kind: str) -> None:
    """From the store of `settings` to the other kind (SQLite -> PostgreSQL and back)."""
    engine = MemoryEngine(settings)
    for project in ("web", None):
        uid = engine.store_one(NewMemory(SECRET, source="compaction", project=project)).uid
        engine.forget(uid)
    engine.store_one(NewMemory("Deploys go through make deploy", project="web"))
    assert engine.purge().soft_deleted == 2
    engine.close()
    if store_kind == "postgresql":
        source, target = settings.db_url, f"sqlite:///{tmp_path / 'copy.db'}"
        copy = Settings(db_path=str(tmp_path / "copy.db"), device="cpu")
    else:
        import pg

        source, target = settings.db_path, pg.new_database()
        copy = Settings(db_path=str(tmp_path / "unused.db"), db_url=target, device="cpu")
    done = subprocess.run([*memory_mcp_command(), "--db", source, "migrate", "--to", target],
                          env=hook_env(tmp_path, None), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verified"] and result["purged_texts"] == {"exported": 2, "copied": 2}
    engine = MemoryEngine(copy)
    try:
        for project in ("web", None):
            again = engine.store_one(NewMemory(SECRET, source="compaction", project=project))
            assert again.reason.startswith(PURGED), (project, again)
        assert engine.store_one(NewMemory(SECRET, source="compaction", project="api")
                                ).status == "new"
    finally:
        engine.close()
