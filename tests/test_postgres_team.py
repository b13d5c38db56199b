"""A team on one PostgreSQL database: several services, on different machines (HOMEs), each with
its own settings. What one service's settings choose must not undo another's work: two
embedding models keep a vector each, rather than overwriting each other's at every rescan, and
the shortest grace or TTL of a teammate purges nothing another's service still keeps."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pg
import psycopg
from test_service_support import Service, memory_mcp_command, service_env, start_service

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_postgres.schema import SCHEMA_VERSION

TEXTS = ["Rotate the database credentials every ninety days.",
         "The office plants need watering on Mondays.",
         "Bob adopted a grey kitten named Pixel.",
         "The payments service deploys from the release branch on Thursdays."]


def engine(tmp_path: Path, url: str, model: Path, name: str) -> MemoryEngine:
    """A developer's engine on the team's database, with its own HOME (db path) and model."""
    return MemoryEngine(Settings.from_env({
        "MEMORY_DB_PATH": str(tmp_path / name / "memory.db"), "MEMORY_DB_URL": url,
        "MEMORY_MODEL_PATH": str(model), "MEMORY_DEVICE": "cpu",
        "MEMORY_RECALL_MIN_COSINE": "0", "MEMORY_EMBED_N_CTX": "256"}))


def pg_vector(engine: MemoryEngine) -> Any:
    return next(c for c in engine.channels if c.name == "pg_vector")


def vectors(engine: MemoryEngine) -> dict[tuple[int, str], bytes]:
    """(memory id, model) -> the stored vector's text, of every row."""
    with engine.store.snapshot() as conn:
        return {(i, m): v for i, m, v in conn.execute(
            "SELECT memory_id, model, vec::text FROM memories_pgvec")}


def test_two_models_on_one_store_keep_a_vector_each(tmp_path: Path, minilm_path: Path,
                                                    qwen3_path: Path) -> None:
    """Alice embeds with MiniLM (384-d), Bob with the tiny Qwen3 (64-d). Each service's queue
    embeds what lacks its own model's vector; before, the second model's write replaced the
    first's (one row per memory), so each queue found the whole store pending again at every
    rescan, for ever, and each service's vector channel was empty half the time."""
    url = pg.new_database()
    alice = engine(tmp_path, url, minilm_path, "alice")
    bob = engine(tmp_path, url, qwen3_path, "bob")
    try:
        alice.ingest([NewMemory(t, project="app") for t in TEXTS])  # embedded as stored
        assert pg_vector(alice).pending_count(alice.store.read()) == 0
        assert pg_vector(bob).pending_count(bob.store.read()) == len(TEXTS)
        assert bob.writer.catch_up() == len(TEXTS)  # bob's queue: his model's vectors
        kept = vectors(alice)
        for _ in range(2):  # each queue rescans: nothing is pending, nothing is written
            assert alice.writer.catch_up() == 0 and bob.writer.catch_up() == 0
        assert vectors(alice) == kept and len(kept) == 2 * len(TEXTS)
        for who, dim in ((alice, 384), (bob, 64)):
            info = who.embedder_info()
            assert (info["vectorized"], info["missing"], info["other_model_vectors"]) == (
                len(TEXTS), 0, len(TEXTS)), info
            assert info["dim"] == dim
            hits = who.recall("How often should DB passwords be changed?", k=4,
                              filters=RecallFilters(project="app"))
            assert any("pg_vector" in h.ranks for h in hits), who.settings.model_path
        # an edit drops every model's vector of the old text: both queues embed the new one
        uid = alice.list(RecallFilters(project="app"), limit=10)[0].uid
        alice.update(uid, content="Rotate the database credentials every thirty days.")
        assert pg_vector(bob).pending_count(bob.store.read()) == 1
        assert bob.writer.catch_up() == 1 and alice.writer.catch_up() == 0
        assert len(vectors(alice)) == 2 * len(TEXTS)
    finally:
        alice.close()
        bob.close()


def test_an_export_holds_every_model_of_a_memory(tmp_path: Path, minilm_path: Path,
                                                 qwen3_path: Path) -> None:
    """`memory-mcp migrate` reads the vectors a page of memories at a time: with two models a
    page of rows (500) may end between a memory's two rows, whose second was then skipped."""
    url = pg.new_database()
    alice = engine(tmp_path, url, minilm_path, "alice")
    bob = engine(tmp_path, url, qwen3_path, "bob")
    try:
        alice.ingest([NewMemory("alice's first note, which bob's queue has not reached")])
        bob.ingest([NewMemory(f"note {i} about the release train", project="app")
                    for i in range(260)])
        alice.writer.catch_up(limit=1000)  # rows: 1 of the first memory, then 2 per memory
        exported = list(pg_vector(alice).export_vectors(alice.store))
        assert len(exported) == 1 + 2 * 260
        assert len({(uid, model) for uid, model, _, _ in exported}) == 1 + 2 * 260
        assert {(model.split(".")[0][:10], dim) for _, model, dim, _ in exported} == {
            (pg_vector(alice).tag()[0].split(".")[0][:10], 384),
            (pg_vector(bob).tag()[0].split(".")[0][:10], 64)}
        assert all(np.isfinite(v).all() for _, _, _, v in exported)
    finally:
        alice.close()
        bob.close()


def test_a_v11_vector_table_is_keyed_by_model_on_upgrade(tmp_path: Path, minilm_path: Path,
                                                         qwen3_path: Path) -> None:
    """Schema 12 rebuilds the primary key of a table keyed by memory alone; the vectors stay."""
    url = pg.new_database()
    alice = engine(tmp_path, url, minilm_path, "alice")
    alice.ingest([NewMemory(t, project="app") for t in TEXTS])
    alice.close()
    with psycopg.connect(url, autocommit=True) as conn:  # as release 11 left it
        conn.execute("ALTER TABLE memories_pgvec DROP CONSTRAINT memories_pgvec_pkey, "
                     "ADD PRIMARY KEY (memory_id)")
        conn.execute("UPDATE store_meta SET value = '11' WHERE key = 'schema_version'")
    alice = engine(tmp_path, url, minilm_path, "alice")
    bob = engine(tmp_path, url, qwen3_path, "bob")
    try:
        assert alice.store.schema_version == SCHEMA_VERSION  # every later step ran too
        with psycopg.connect(url) as conn:
            key = conn.execute(
                "SELECT array_agg(a.attname ORDER BY k.n) FROM pg_index i "
                "CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(att, n) "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att "
                "WHERE i.indrelid = 'memories_pgvec'::regclass AND i.indisprimary").fetchone()
        assert key[0] == ["memory_id", "model", "dim"]
        assert len(vectors(alice)) == len(TEXTS)
        assert bob.writer.catch_up() == len(TEXTS) and alice.writer.catch_up() == 0
        assert len(vectors(alice)) == 2 * len(TEXTS)
    finally:
        alice.close()
        bob.close()


# --- maintenance: the longest grace and TTLs any service of the store announced ---------------

DAY = 86_400


def wait_for_maintenance(service: Service, runs: int = 1, timeout: float = 60) -> None:
    """Until `service` logged `runs` maintenance runs (its first follows its warm-up)."""
    deadline = time.monotonic() + timeout
    while service.stderr().count("maintenance: {") < runs:
        assert time.monotonic() < deadline, service.stderr()[-2000:]
        assert service.proc.poll() is None, service.stderr()[-2000:]
        time.sleep(0.1)


def stored(url: str) -> tuple[set[str], int]:
    """The uids of every stored memory (forgotten ones too) and the injection reports."""
    with psycopg.connect(url) as conn:
        uids = {r[0] for r in conn.execute("SELECT uid FROM memories")}
        return uids, conn.execute("SELECT count(*) FROM injections").fetchone()[0]


SHORT = {"MEMORY_FORGET_GRACE_DAYS": "0", "MEMORY_TTL_ARTIFACT_DAYS": "1",
         "MEMORY_TTL_INJECTION_DAYS": "1"}


def test_a_teammates_shorter_grace_and_ttls_purge_nothing_another_keeps(tmp_path: Path) -> None:
    """Bob forgets a memory (30 days to take it back), his artifact is 5 days old and so is an
    injection report (TTLs 90 days). Frank starts his service on the same database with a
    grace of 0 and TTLs of 1 day: its maintenance purged Bob's forget at once (his unforget
    then failed) and expired both. Now the store keeps the longest periods any service
    announced, until a teammate lowers them on purpose (MEMORY_PG_RETENTION_RESET)."""
    url = pg.new_database()
    bob = start_service(tmp_path / "bob", MEMORY_DB_URL=url)
    frank: Service | None = None
    try:
        wait_for_maintenance(bob)  # his periods announced
        with bob.client() as client:
            forgotten = client.post("/ingest", json={
                "content": "The payments feature flag rollout is at 20 percent",
                "kind": "note", "project": "github.com/acme/app"}).json()["uid"]
            artifact = client.post("/ingest", json={
                "content": "pytest output: 312 passed, 2 skipped in 41.2s", "kind": "artifact",
                "project": "github.com/acme/app"}).json()["uid"]
            assert client.post("/inject/report", json={
                "uids": [artifact], "harness": "claude-code", "hook": "UserPromptSubmit",
                "query": "did the tests pass?", "chars": 60}).status_code == 200
            assert client.delete(f"/api/memories/{forgotten}").status_code == 200
        with psycopg.connect(url) as conn:  # five days old
            conn.execute("UPDATE memories SET updated_at = updated_at - %s WHERE uid = %s",
                         (5 * DAY, artifact))
            conn.execute("UPDATE injections SET ts = ts - %s", (5 * DAY,))

        frank = start_service(tmp_path / "frank", MEMORY_DB_URL=url, **SHORT)
        wait_for_maintenance(frank)
        assert stored(url) == ({forgotten, artifact}, 1)
        assert "keeping what this store's services keep longest" in frank.stderr()
        with frank.client() as client:
            listed = client.get("/api/forgotten").json()
        assert listed["grace_days"] == 30 and [i["uid"] for i in listed["items"]] == [forgotten]
        with bob.client() as client:
            assert client.post(f"/api/memories/{forgotten}/unforget").status_code == 200
            assert client.delete(f"/api/memories/{forgotten}").status_code == 200
        frank.stop()

        # lowering on purpose: every service's settings lowered, then one command resets
        reset = subprocess.run([*memory_mcp_command(), "stats"], capture_output=True,
                               text=True, timeout=60, env=service_env(
                                   tmp_path / "frank", MEMORY_DB_URL=url,
                                   MEMORY_PG_RETENTION_RESET="1", **SHORT))
        assert reset.returncode == 0, reset.stderr
        frank = start_service(tmp_path / "frank", MEMORY_DB_URL=url, **SHORT)
        wait_for_maintenance(frank)
        assert stored(url) == (set(), 0)
    finally:
        bob.stop()
        if frank is not None:
            frank.stop()
