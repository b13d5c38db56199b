"""`memory-mcp purge --matching TEXT`: every copy of a text the store and the spool keep goes
for good (a customer's name, a secret the redaction missed), and nothing else. Before, such
a text could only be found and forgotten memory by memory, and its earlier versions, the
prompts it was injected for and the writes still spooled kept it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pg
from semantic_memory import spool
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from test_service_support import start_service

WORD = "Zyxwvutsrq"  # the text to purge; stored in several spellings of its case


def files_holding(folder: Path) -> list[str]:
    """The files under `folder` (store, WAL, spool) whose bytes hold WORD in any case."""
    return sorted(str(f.relative_to(folder)) for f in folder.rglob("*")
                  if f.is_file() and f.suffix != ".log" and WORD.lower().encode()
                  in f.read_bytes().lower())


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(folder / "memory.db"), MEMORY_DEVICE="cpu",
               MEMORY_PLUGINS="bm25_porter,bm25_trigram", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_every_copy_goes_while_the_service_serves_and_nothing_else(tmp_path: Path) -> None:
    service = start_service(tmp_path, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        with service.client() as http:
            def store(content: str, **fields: object) -> str:
                answer = http.post("/ingest", json={"content": content, **fields})
                assert answer.status_code == 200, answer.text
                return answer.json()["uid"]

            http.post("/ingest", json={"items": [
                {"content": f"filler note {i} about build tooling and the pnpm cache {i}",
                 "project": "web"} for i in range(30)]}).raise_for_status()
            live = store(f"Customer {WORD} Holdings pays its invoices late", project="web")
            tagged = store("The billing export runs nightly", tags=[WORD.lower()])
            edited = store(f"The {WORD.upper()} contract renews in March", project="web")
            assert http.patch(f"/api/memories/{edited}", json={
                "content": "The big contract renews in March"}).status_code == 200
            forgotten = store(f"Call {WORD} about the refund", project="web")
            assert http.delete(f"/api/memories/{forgotten}").status_code == 200
            older = store("The staging database is staging-db-1", kind="decision",
                          project="web")
            newer = store(f"The staging database is {WORD}-db-2", kind="decision",
                          project="web", replaces=older)
            http.post("/inject/report", json={
                "uids": [live], "harness": "claude-code", "project": "web",
                "query": f"what does {WORD.lower()} owe us?", "chars": 120}).raise_for_status()
            kept = store("Deploys go through make deploy", project="web")
        assert files_holding(tmp_path)

        listed = cli(tmp_path, "purge", "--matching", WORD.lower(), "--dry-run")
        assert listed.returncode == 0, listed.stderr
        assert all(uid in listed.stdout for uid in (live, tagged, forgotten, newer))
        assert edited not in listed.stdout and kept not in listed.stdout
        assert ("4 memories, 1 earlier versions of other memories, 1 injection prompts and 0 "
                f"spooled memories hold '{WORD.lower()}'") in listed.stderr

        unconfirmed = cli(tmp_path, "purge", "--matching", WORD.lower())
        assert unconfirmed.returncode == 2 and "add --yes" in unconfirmed.stderr
        with service.client() as http:  # nothing went
            assert http.get(f"/api/memories/{live}").status_code == 200

        purged = cli(tmp_path, "purge", "--matching", WORD.lower(), "--yes")
        assert purged.returncode == 0, purged.stderr
        assert json.loads(purged.stdout) == {"memories": 4, "revisions": 1, "prompts": 1,
                                             "current_again": 1, "spooled": 0}
        assert files_holding(tmp_path) == []  # db, WAL and shm, while the service serves
        with service.client() as http:
            for uid in (live, tagged, forgotten, newer):
                assert http.get(f"/api/memories/{uid}").status_code == 404
            assert http.get(f"/api/memories/{edited}").json()["content"] == \
                "The big contract renews in March"
            assert http.get(f"/api/memories/{older}").json().get("superseded_by") is None
            assert http.get(f"/api/memories/{kept}").status_code == 200
            assert http.post("/recall", json={"query": WORD}).json()["count"] == 0
            reports = http.get("/api/injections").json()["items"]
            assert [r["query"] for r in reports] == [None]  # the report stays, blanked
            http.post("/ingest", json={"content": "a later note about docker compose"})
        assert service.stop() == 0
        assert files_holding(tmp_path) == []
    finally:
        if service.proc.poll() is None:
            service.stop()


def test_spooled_copies_go_and_the_rest_of_their_write_replays(tmp_path: Path) -> None:
    assert cli(tmp_path, "store", f"{WORD} asked for a discount").returncode == 0
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"items": [
        {"content": f"Exchange: the {WORD.lower()} account moved to the EU region"},
        {"content": "Exchange: the CI cache key now includes the lockfile hash"}]},
        harness="claude-code", event="PreCompact")
    spool.append(folder, "/ingest", {"items": [{"content": "Refused write", "tags": [WORD]}]},
                 harness="claude-code", event="SessionEnd", rejected="a test refusal")
    names = sorted(f.name for f in folder.glob("*.json"))

    purged = cli(tmp_path, "purge", "--matching", WORD, "--yes")
    assert purged.returncode == 0, purged.stderr
    assert json.loads(purged.stdout) == {"memories": 1, "revisions": 0, "prompts": 0,
                                         "current_again": 0, "spooled": 2}
    assert files_holding(tmp_path) == []
    # the write keeps its name (its place in the queue) and its other memory; the refused
    # write held only the one, and went
    assert sorted(f.name for f in folder.glob("*.json")) == names
    assert list((folder / spool.REJECTED).glob("*.json")) == []
    replayed = cli(tmp_path, "spool", "replay")
    assert replayed.returncode == 0, replayed.stderr
    stored = json.loads(cli(tmp_path, "list", "--json").stdout)
    assert [m["content"] for m in stored] == [
        "Exchange: the CI cache key now includes the lockfile hash"]


def test_a_captured_copy_of_a_purged_text_is_not_stored_again(tmp_path: Path) -> None:
    text = f"The {WORD} cache lives in /var/cache/zyx"
    assert cli(tmp_path, "store", text, "--source", "compaction").returncode == 0
    assert cli(tmp_path, "purge", "--matching", WORD, "--yes").returncode == 0
    again = cli(tmp_path, "store", text, "--source", "compaction")
    assert again.returncode == 0 and again.stdout.startswith("duplicate: purged: "), again
    assert cli(tmp_path, "store", text).stdout.startswith("new ")  # a person asked again


def test_a_project_scope_and_bad_input(tmp_path: Path) -> None:
    for content, project in ((f"{WORD} in web", "web"), (f"{WORD} in api", "api"),
                             (f"{WORD} everywhere", None)):
        assert cli(tmp_path, "store", content,
                   *(["--project", project] if project else [])).returncode == 0
    scoped = cli(tmp_path, "purge", "--matching", WORD, "--project", "web", "--yes")
    assert json.loads(scoped.stdout)["memories"] == 1
    global_only = cli(tmp_path, "purge", "--matching", WORD, "--project", "", "--yes")
    assert json.loads(global_only.stdout)["memories"] == 1
    left = json.loads(cli(tmp_path, "list", "--json").stdout)
    assert [m["content"] for m in left] == [f"{WORD} in api"]

    blank = cli(tmp_path, "purge", "--matching", "  ", "--yes")
    assert blank.returncode == 2 and "not blank" in blank.stderr
    stray = cli(tmp_path, "purge", "--yes")
    assert stray.returncode == 2 and "go with --matching" in stray.stderr
    nothing = cli(tmp_path, "purge", "--matching", "no such words anywhere")
    assert nothing.returncode == 0 and "0 memories" in nothing.stderr
    assert "Traceback" not in blank.stderr + stray.stderr + nothing.stderr


def test_a_memory_edited_since_it_was_found_stays(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings.from_env({}, db_path=str(tmp_path / "memory.db"),
                                            device="cpu"))
    try:
        uid = engine.ingest([NewMemory(f"Ask {WORD} for the signed NDA")])[0].uid
        found = engine.holding(WORD)
        assert [m.uid for m in found.memories] == [uid]
        engine.update(uid, content="Ask legal for the signed NDA")
        report = engine.purge_matching(found, WORD)
        # the edit's revision was not among what was found: it stays for a later look
        assert (report.memories, report.revisions) == (0, 0)
        assert engine.store.get(uid) is not None
        again = engine.holding(WORD)
        assert not again.memories and list(again.revisions.values()) == [uid]
        assert engine.purge_matching(again, WORD).revisions == 1
        assert not engine.holding(WORD)
    finally:
        engine.close()


def test_every_copy_goes_on_postgresql(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings.from_env({}, db_path=str(tmp_path / "memory.db"),
                                            db_url=pg.new_database(), device="cpu"))
    try:
        live = engine.ingest([NewMemory(f"Customer {WORD} pays late", project="web")])[0].uid
        edited = engine.ingest([NewMemory(f"The {WORD} contract renews", project="web")])[0].uid
        engine.update(edited, content="The big contract renews")
        other = engine.ingest([NewMemory("Deploys go through make deploy")])[0].uid
        engine.record_injection(uids=[live], project="web", query=f"what does {WORD} owe?")
        found = engine.holding(WORD.upper(), "web")
        assert ([m.uid for m in found.memories], list(found.revisions.values()),
                len(found.reports)) == ([live], [edited], 1)
        assert not engine.holding(WORD, "api")
        report = engine.purge_matching(found, WORD.upper())
        assert (report.memories, report.revisions, report.prompts) == (1, 1, 1)
        assert not engine.holding(WORD)
        assert engine.store.get(live) is None and engine.store.get(other) is not None
        assert engine.recall(WORD, k=5) == []
    finally:
        engine.close()
