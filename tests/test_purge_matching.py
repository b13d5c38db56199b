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
from typing import Any

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


def test_a_spooled_remember_and_a_spooled_exchange_go_too(tmp_path: Path) -> None:
    """A "remember" (and the proxy's memory_store) spools one memory as the whole body, a
    flush spools `exchange` items: both were passed over, and a replay stored them again."""
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"content": f"Customer {WORD} owes 4k", "source": "chat"},
                 harness="claude-code", event="UserPromptSubmit")
    spool.append(folder, "/ingest", {"items": [
        {"exchange": {"user": f"who is {WORD.lower()}?", "reply": "A customer since 2019."},
         "source": "compaction"},
        {"exchange": {"user": "which port do we use?", "reply": "We use port 5432 for the "
                      "database."}, "source": "compaction"}]},
        harness="claude-code", event="SessionEnd")
    listed = cli(tmp_path, "purge", "--matching", WORD, "--dry-run")
    assert "2 spooled memories" in listed.stderr, listed.stderr
    purged = cli(tmp_path, "purge", "--matching", WORD, "--yes")
    assert json.loads(purged.stdout)["spooled"] == 2
    assert files_holding(tmp_path) == []
    assert cli(tmp_path, "spool", "replay").returncode == 0
    stored = json.loads(cli(tmp_path, "list", "--json").stdout)
    assert [m["content"] for m in stored] == [
        "User: which port do we use?\nAssistant: We use port 5432 for the database."]


def test_purging_the_middle_of_a_chain_leaves_the_oldest_superseded(tmp_path: Path) -> None:
    """A replaced by B, B by C; B holds the text: A used to come back current beside C."""
    engine = MemoryEngine(Settings.from_env({}, db_path=str(tmp_path / "memory.db"),
                                            device="cpu"))
    try:
        first = engine.ingest([NewMemory("The staging database is staging-db-1",
                                         kind="decision")])[0].uid
        middle = engine.ingest([NewMemory(f"The staging database is {WORD}-db-2",
                                          kind="decision", replaces=first)])[0].uid
        last = engine.ingest([NewMemory("The staging database is staging-db-3",
                                        kind="decision", replaces=middle)])[0].uid
        report = engine.purge_matching(engine.holding(WORD), WORD)
        assert (report.memories, report.current_again) == (1, 0)
        assert engine.store.get(first).superseded_by == last
        assert [h.memory.uid for h in engine.recall("staging database", k=5)] == [last]
    finally:
        engine.close()


def test_text_cut_between_two_pieces_of_a_long_exchange_is_found(tmp_path: Path) -> None:
    """A long flushed exchange is stored in pieces; a name the cut fell inside ("…Zorblax" |
    "Industries…") was in neither piece alone, and stayed in both."""
    from semantic_memory.harness.transcript import exchange_chunks

    # no sentence end, line or paragraph break: the cut falls between two words
    filler = " ".join(f"step{i}" for i in range(300))
    user, reply = "What happened with the vendor?", f"{filler} we signed with Zorblax Industries"
    for size in range(len(filler), len(filler) + 200):
        pieces = exchange_chunks(user, reply + " and more" * 30, lambda t: t, size)
        if any(p.endswith("Zorblax") for p in pieces):
            break
    else:
        raise AssertionError("no cut fell between the two words")
    engine = MemoryEngine(Settings.from_env({}, db_path=str(tmp_path / "memory.db"),
                                            device="cpu"))
    try:
        engine.ingest([NewMemory(p, kind="note", source="compaction", session="s1")
                       for p in pieces], batch_is_session=True)
        found = engine.holding("zorblax industries")
        assert len(found.memories) == 2 and len(found.across) == 2
        assert engine.purge_matching(found, "zorblax industries").memories == 2
        assert not engine.holding("zorblax")
    finally:
        engine.close()


def test_a_dry_run_deletes_nothing_even_with_yes(tmp_path: Path) -> None:
    assert cli(tmp_path, "store", f"{WORD} renewed for a year").returncode == 0
    listed = cli(tmp_path, "purge", "--matching", WORD, "--dry-run", "--yes")
    assert listed.returncode == 0 and "1 memories" in listed.stderr, listed
    assert json.loads(cli(tmp_path, "list", "--json").stdout)  # still there


def test_a_turkish_capital_i_is_found_by_its_lower_case(tmp_path: Path) -> None:
    assert cli(tmp_path, "store", "The İstanbul office opens at nine").returncode == 0
    assert "1 memories" in cli(tmp_path, "purge", "--matching", "istanbul", "--dry-run").stderr


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


def test_a_replay_between_the_two_steps_stores_nothing_again(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    """A running service replays the spool every few seconds. When it replayed between the
    store's purge and the spool's scrub, a spooled "remember" holding the text was stored
    after the purge, and the scrub found no copy left: the text was back. The spool goes
    first now, so a replay at that moment finds nothing to store. The replay runs here where
    the service's timer could fire (in the store step), on this process's real store."""
    from click.testing import CliRunner
    from semantic_memory.cli import cli as memory_mcp
    from semantic_memory.service.spool_replay import drain

    for name in [n for n in os.environ if n.startswith("MEMORY_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_DB_PATH", str(tmp_path / "memory.db"))
    monkeypatch.setenv("MEMORY_PLUGINS", "bm25_porter,bm25_trigram")
    assert cli(tmp_path, "store", f"{WORD} asked for a discount").returncode == 0
    spool.append(tmp_path / "spool", "/ingest", {"content": f"Remember: {WORD} pays by card",
                                                 "source": "chat"},
                 harness="claude-code", event="UserPromptSubmit")
    purge = MemoryEngine.purge_matching

    def purge_then_a_replay_tick(engine: MemoryEngine, *args: Any) -> Any:
        report = purge(engine, *args)
        drain(engine, engine.settings)  # what spool_replay.run does every SCAN_S seconds
        return report

    monkeypatch.setattr(MemoryEngine, "purge_matching", purge_then_a_replay_tick)
    result = CliRunner().invoke(memory_mcp, ["purge", "--matching", WORD, "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["spooled"] == 1
    monkeypatch.undo()
    assert json.loads(cli(tmp_path, "list", "--json").stdout) == []
    assert files_holding(tmp_path) == []


def test_the_store_a_restore_replaced_is_named_as_not_searched(tmp_path: Path) -> None:
    """`restore` keeps the store it replaced beside the db, a copy of every memory it held:
    `purge --matching` does not open it, and says so instead of reporting every copy gone."""
    assert cli(tmp_path, "store", "the staging runbook lives in ops/").returncode == 0
    assert cli(tmp_path, "backup", str(tmp_path / "before.db")).returncode == 0
    assert cli(tmp_path, "store", f"{WORD} asked for a callback").returncode == 0
    restored = cli(tmp_path, "restore", str(tmp_path / "before.db"))
    assert restored.returncode == 0, restored.stderr
    kept = tmp_path / "memory.db.before-restore"
    assert files_holding(tmp_path) == [kept.name]
    listed = cli(tmp_path, "purge", "--matching", WORD, "--dry-run")
    assert listed.returncode == 0 and f"{kept} (the store `restore` replaced) is not " \
        "searched" in listed.stderr, listed.stderr
    done = cli(tmp_path, "purge", "--matching", WORD, "--yes")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["not_searched"] == [str(kept)]
    kept.unlink()
    again = cli(tmp_path, "purge", "--matching", WORD, "--yes")
    assert "not_searched" not in json.loads(again.stdout)
