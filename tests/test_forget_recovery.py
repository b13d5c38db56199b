"""A forget can be taken back until a purge: the service's start-up maintenance purges only what
was forgotten over MEMORY_FORGET_GRACE_DAYS ago, `memory-mcp forgotten` lists what waits,
`memory-mcp unforget` brings one back (found by every channel again), and every forget is one
line in the service's log. `memory-mcp purge`, a user's command, still purges them all.

Before: a memory an agent forgot (`memory_forget`) was hard-deleted at the next service start,
unlogged, with no way to list or undo it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from semantic_memory.config import Settings
from semantic_memory.errors import UnknownMemory
from semantic_memory.models import NewMemory, now
from semantic_memory.pipeline import DAY, MemoryEngine
from test_service_support import Service, http_session, start_service

pytestmark = pytest.mark.both_stores
#: Each store's keyword channels: an unforgotten memory is found by every one.
CHANNELS = {"sqlite": {"porter", "trigram"}, "postgresql": {"pg_fulltext", "pg_trigram"}}


def cli(db: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update(MEMORY_DB_PATH=str(db), MEMORY_DEVICE="cpu", **env)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=environment, timeout=60)


def forgotten_uids(db: Path) -> list[str]:
    listed = cli(db, "forgotten", "--json")
    assert listed.returncode == 0, listed.stderr
    return [m["uid"] for m in json.loads(listed.stdout)]


def wait_for_maintenance(service: Service) -> str:
    """The service's log once its start-up maintenance (run in the background) has logged."""
    deadline = time.monotonic() + 30
    while "maintenance: {" not in service.stderr():
        assert time.monotonic() < deadline, service.stderr()
        time.sleep(0.1)
    return service.stderr()


def agent_forgets(service: Service, uid: str) -> None:
    """What an agent does: MCP `memory_forget`, one uid a call."""
    async def forget() -> None:
        async with http_session(service.mcp_url) as session:
            result = await session.call_tool("memory_forget", {"uid": uid})
            assert not result.is_error, result.content

    anyio.run(forget)


@pytest.mark.sqlite_only
def test_an_agents_forget_survives_a_restart_until_its_grace_period_ends(tmp_path: Path) -> None:
    env = dict(MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    db = tmp_path / "memory.db"
    service = start_service(tmp_path, **env)
    try:
        with service.client() as http:
            uids = [http.post("/ingest", json={"content": text}).json()["uid"] for text in (
                "The release train leaves every second Tuesday",
                "Staging certificates renew through the ACME job",
                "The nightly backup runs at 02:00 UTC")]
        for uid in uids[:2]:
            agent_forgets(service, uid)
    finally:
        service.stop()
    log = service.stderr()
    assert all(f"forgot memory {uid}" in log for uid in uids[:2]), log  # the user can see it
    assert "release train" not in log  # a uid, never the text
    # time passes for one of them: it was forgotten 31 days ago
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE memories SET updated_at = ? WHERE uid = ?",
                     (time.time() - 31 * DAY, uids[1]))
    conn.close()

    service = start_service(tmp_path, **env)  # the default grace: 30 days
    try:
        log = wait_for_maintenance(service)
    finally:
        service.stop()
    assert "'soft_deleted': 1" in log and "1 forgotten memories kept" in log, log
    assert forgotten_uids(db) == [uids[0]]  # the recent forget waits; the old one went
    assert cli(db, "unforget", uids[0]).returncode == 0
    recalled = cli(db, "recall", "release train Tuesday", "--json")
    assert [h["uid"] for h in json.loads(recalled.stdout)][:1] == [uids[0]], recalled.stderr

    # 0 = as before: a service start purges every forgotten memory
    assert cli(db, "forget", uids[0]).returncode == 0
    service = start_service(tmp_path, **env, MEMORY_FORGET_GRACE_DAYS="0")
    try:
        log = wait_for_maintenance(service)
    finally:
        service.stop()
    assert "'soft_deleted': 1" in log and forgotten_uids(db) == []
    assert cli(db, "stats", "--json").returncode == 0


def test_start_up_maintenance_purges_only_forgets_older_than_the_grace(
        settings: Settings) -> None:
    engine = MemoryEngine(replace(settings, maintenance_on_start=True))
    try:
        old, recent, live = (engine.store_one(NewMemory(text)).uid for text in (
            "old forget about the proxy", "recent forget about the queue", "kept about the cache"))
        assert engine.store.forget(old, now() - 31 * DAY) == []  # forgotten 31 days ago
        assert engine.forget(recent)
        report = engine.startup_maintenance()
        assert report is not None and report.soft_deleted == 1
        assert engine.get(old) is None and engine.get(recent) is not None
        assert [m.uid for m in engine.forgotten()] == [recent]
        assert engine.purge().soft_deleted == 1  # `memory-mcp purge`: every one
        assert engine.forgotten() == [] and engine.get(live) is not None
    finally:
        engine.close()


def test_each_maintenance_run_logs_one_line_named_for_what_it_is(
        settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    """The service runs maintenance at its start and every MEMORY_MAINTENANCE_INTERVAL_S: each
    run logged "startup maintenance: …", an hourly line that named the start."""
    engine = MemoryEngine(replace(settings, maintenance_on_start=True))
    try:
        with caplog.at_level("INFO", logger="semantic_memory"):
            engine.startup_maintenance()
            engine.startup_maintenance()
        lines = [r.getMessage() for r in caplog.records if "maintenance" in r.getMessage()]
        assert len(lines) == 2 and all(line.startswith("maintenance: {'soft_deleted': 0")
                                       for line in lines), lines
    finally:
        engine.close()


def test_a_forgotten_artifact_waits_for_its_grace_like_any_memory(settings: Settings) -> None:
    engine = MemoryEngine(replace(settings, ttl_artifact_days=90))
    try:
        uid = engine.store_one(NewMemory("ancient tool output", kind="artifact")).uid
        engine.store.forget(uid, now() - 91 * DAY + 10 * DAY)  # stale, forgotten 81 days ago
        assert engine.purge(grace_days=100).to_dict()["expired_artifacts"] == 0
        assert engine.forgotten()[0].uid == uid
    finally:
        engine.close()


def test_unforget_brings_a_memory_back_to_every_channel(settings: Settings,
                                                         store_kind: str) -> None:
    engine = MemoryEngine(settings)
    try:
        uid = engine.store_one(NewMemory("The payments gateway retries webhooks five times",
                                         project="shop")).uid
        engine.store_one(NewMemory("The storefront caches product pages", project="shop"))
        assert engine.forget(uid)
        assert uid not in {h.memory.uid for h in engine.recall("payments gateway webhooks")}
        [listed] = engine.forgotten("shop")
        assert listed.uid == uid and listed.deleted and engine.forgotten("other") == []
        result = engine.unforget(uid)
        assert result.status == "restored" and not result.memory.deleted
        hits = engine.recall("payments gateway webhooks retries")
        assert hits[0].memory.uid == uid
        assert CHANNELS[store_kind] <= set(hits[0].ranks), hits[0].ranks
        assert engine.forgotten() == [] and engine.counts()["memories"] == 2
        assert engine.unforget(uid).status == "live"
        with pytest.raises(UnknownMemory):
            engine.unforget("never-stored")
    finally:
        engine.close()


def test_unforget_is_refused_where_a_live_memory_holds_the_text_now(settings: Settings) -> None:
    engine = MemoryEngine(settings)
    try:
        text = "Deploys freeze on Friday afternoons"
        first = engine.store_one(NewMemory(text)).uid
        assert engine.forget(first)
        again = engine.store_one(NewMemory(text)).uid  # stored anew while the first is forgotten
        assert again != first
        result = engine.unforget(first)  # two live copies of one text: never
        assert result.status == "duplicate" and result.duplicate_of == again
        assert engine.get(first).deleted and [m.uid for m in engine.forgotten()] == [first]
    finally:
        engine.close()


def test_forget_says_which_older_versions_are_current_again(settings: Settings) -> None:
    engine = MemoryEngine(settings)
    try:
        old = engine.store_one(NewMemory("The staging database listens on port 6543")).uid
        new = engine.store_one(NewMemory("The staging database now listens on port 6544"))
        assert new.supersedes == [old]
        assert engine.forget_memory(new.uid) == [old]
        assert engine.get(old).superseded_by is None
        assert engine.forget_memory(new.uid) is None  # no live memory: nothing to say
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_the_cli_lists_and_takes_back_forgets(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"

    def stored(*args: str) -> str:
        out = cli(db, "store", *args, "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["uid"]

    old = stored("The staging database listens on port 6543", "--project", "infra")
    new = stored("The staging database now listens on port 6544", "--project", "infra")
    other = stored("Lunch is at noon")
    forgot = cli(db, "forget", new)
    assert forgot.returncode == 0
    assert forgot.stdout.strip() == (f"forgot {new}; 1 older version(s) it had replaced are "
                                     f"current again: {old}")
    assert cli(db, "forget", other).returncode == 0

    listed = json.loads(cli(db, "forgotten", "--json").stdout)
    assert [m["uid"] for m in listed] == [other, new]  # the latest forget first
    assert listed[1]["forgotten_at"] == listed[1]["updated_at"]
    assert listed[1]["purged_after"] > listed[1]["forgotten_at"]  # 30 days on, ISO 8601
    assert [m["uid"] for m in json.loads(cli(db, "forgotten", "--project", "infra",
                                             "--json").stdout)] == [new]
    assert [m["uid"] for m in json.loads(cli(db, "forgotten", "--project", "",
                                             "--json").stdout)] == [other]
    table = cli(db, "forgotten", "--limit", "1", COLUMNS="200")
    assert other in table.stdout and new not in table.stdout
    assert "raise --limit" in table.stderr

    assert cli(db, "unforget", new).stdout.strip() == f"unforgot {new}: it is live again"
    hits = json.loads(cli(db, "recall", "staging database port", "--json").stdout)
    assert new in [h["uid"] for h in hits]

    for uid, reason in ((new, f"memory {new} is not forgotten"),
                        ("f" * 16, "no memory with uid 'ffffffffffffffff' (never stored, or "
                                   "purged)")):
        refused = cli(db, "unforget", uid)
        assert refused.returncode == 1 and refused.stderr.strip() == f"Error: {reason}"
    purged = cli(db, "purge")  # the user's command: every forgotten one, whatever its age
    assert json.loads(purged.stdout)["soft_deleted"] == 1
    gone = cli(db, "unforget", other)
    assert gone.returncode == 1 and "purged" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1 and "Traceback" not in gone.stderr

    again = stored("Lunch is at noon")
    assert cli(db, "forget", again).returncode == 0
    stored("Lunch is at noon")
    duplicate = cli(db, "unforget", again)
    assert duplicate.returncode == 1 and "holds the same text" in duplicate.stderr


@pytest.mark.sqlite_only
def test_the_grace_is_checked_like_every_setting(tmp_path: Path) -> None:
    out = cli(tmp_path / "x.db", "stats", MEMORY_FORGET_GRACE_DAYS="3651")
    assert out.returncode != 0
    assert out.stderr.strip().endswith("MEMORY_FORGET_GRACE_DAYS must be within 0..3650, not 3651")
    assert Settings.from_env({"MEMORY_FORGET_GRACE_DAYS": "0"}).forget_grace_days == 0


@pytest.mark.sqlite_only
def test_an_unforgotten_memory_is_found_by_meaning_again(tmp_path: Path,
                                                         minilm_path: Path) -> None:
    """The vector channel kept the memory's vector while it was forgotten: a paraphrase that
    shares no word with it finds it again."""
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db"), device="cpu",
                                   model_path=str(minilm_path), fast_path=False,
                                   recall_min_cosine=0.25,
                                   plugins="bm25_porter,bm25_trigram,vector,llama_cpp"))
    try:
        uid = engine.store_one(NewMemory("Rotate the database credentials every ninety days."
                                         )).uid
        engine.store_one(NewMemory("The office plants need watering on Mondays."))
        query = "How often should DB passwords be changed?"
        assert engine.forget(uid) and uid not in {h.memory.uid for h in engine.recall(query)}
        assert engine.unforget(uid).status == "restored"
        hits = engine.recall(query)
        assert hits[0].memory.uid == uid and "vector" in hits[0].ranks, hits[0].ranks
    finally:
        engine.close()


@pytest.mark.sqlite_only  # PostgreSQL itself: its keyword mirror, a SQLite copy of the text
def test_an_unforgotten_memory_returns_to_the_postgres_keyword_mirror(tmp_path: Path) -> None:
    """The mirror keeps a forgotten memory without its text; unforget brings the text back
    (the change log numbers the row anew) and the mirror answers for it."""
    import pg

    env = {"MEMORY_PG_MIRROR_MIN": "0"}
    engine = MemoryEngine(Settings.from_env(env, db_path=str(tmp_path / "memory.db"),
                                            db_url=pg.new_database(), device="cpu",
                                            serving=True))
    try:
        engine.ingest([NewMemory(f"note {i}: the backup job runs on host alpha", project="ops")
                       for i in range(5)])
        uid = engine.store_one(NewMemory("the wombat cache warms at dawn", project="ops")).uid
        mirror = next(c.mirror for c in engine.channels if c.name == "pg_fulltext")
        engine.recall("warm up", k=1)  # the first search builds the mirror
        mirror.wait(60)
        engine.recall("warm up", k=1)
        assert mirror.ready
        file = sqlite3.connect(mirror._path)

        def mirrored() -> int:
            return file.execute("SELECT count(*) FROM memories WHERE content LIKE '%wombat%' "
                                "AND deleted = 0").fetchone()[0]

        assert engine.forget(uid) and engine.recall("wombat dawn") == [] and mirrored() == 0
        assert engine.unforget(uid).status == "restored"
        hits = engine.recall("wombat dawn")
        assert hits[0].memory.uid == uid and "pg_fulltext" in hits[0].ranks
        assert mirrored() == 1 and mirror.ready  # the text is back where the channels search
        file.close()
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_an_artifact_past_its_ttl_leaves_recall_while_the_service_runs(tmp_path: Path) -> None:
    """The TTLs were applied at the service's start only: an artifact past its TTL was still
    recalled and injected for as long as the service ran. Maintenance runs again every
    MEMORY_MAINTENANCE_INTERVAL_S (here 1 s): once time has passed the artifact by (its
    `updated_at` set back, the service running), it leaves recall without a restart."""
    env = dict(MEMORY_PLUGINS="bm25_porter,bm25_trigram", MEMORY_TTL_ARTIFACT_DAYS="1",
               MEMORY_MAINTENANCE_INTERVAL_S="1")
    db = tmp_path / "memory.db"
    lines = tmp_path / "artifacts.jsonl"
    lines.write_text("".join(json.dumps({"content": content, "kind": "artifact"}) + "\n"
                             for content in ("Bash(pytest): 3 flaky zebracorn tests",
                                             "Bash(ls): zebracorn fixtures kept")))
    assert cli(db, "import", str(lines)).returncode == 0
    service = start_service(tmp_path, **env)
    try:
        with service.client() as http:
            def recalled() -> list[str]:
                answer = http.post("/recall", json={"query": "zebracorn", "k": 5})
                assert answer.status_code == 200, answer.text
                return sorted(h["content"] for h in answer.json()["items"])

            assert len(recalled()) == 2  # fresh: within its TTL
            with sqlite3.connect(db) as conn:  # a day and a minute pass for one of them
                conn.execute("UPDATE memories SET updated_at = ? WHERE content LIKE ?",
                             (time.time() - DAY - 60, "Bash(pytest)%"))
            conn.close()
            deadline = time.monotonic() + 60
            while len(recalled()) == 2:
                assert time.monotonic() < deadline, service.stderr()
                time.sleep(0.5)
            assert recalled() == ["Bash(ls): zebracorn fixtures kept"]
    finally:
        service.stop()
    assert "'expired_artifacts': 1" in service.stderr()
