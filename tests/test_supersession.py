"""Supersession: the deterministic rule on the labelled pairs, the engine on both stores (a
restated fact with a new value replaces the old one in recall; history on request; undo), the
schema upgrade, and the REST, MCP and CLI surfaces through a real service and subprocesses."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from test_service_support import Service, http_session, start_service

from semantic_memory.config import Settings
from semantic_memory.errors import InvalidMemory, UnknownMemory
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores.sqlite import SCHEMA_VERSION
from semantic_memory import supersede
from semantic_memory.supersede import DEFAULT_RULE, same_details, signals, supersedes

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "bench" / "data" / "supersession" / "pairs.jsonl"
#: What the shipped rule must keep on the labelled set (measured: 0.964 / 0.930).
MIN_PRECISION, MIN_RECALL = 0.9, 0.85
TOKEN = "supersede-token"


def contents(engine: MemoryEngine, query: str, **filters: object) -> list[str]:
    return [h.memory.content for h in engine.recall(query, 10, RecallFilters(**filters))]


# --- the rule --------------------------------------------------------------------------------


def test_the_rule_meets_its_figures_on_the_labelled_set() -> None:
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines()]
    assert len(pairs) >= 200
    assert {p["label"] for p in pairs} == {"supersedes", "restatement", "unrelated"}
    flagged = [DEFAULT_RULE.supersedes(signals(p["old"], p["new"])) for p in pairs]
    tp = sum(f and p["label"] == "supersedes" for f, p in zip(flagged, pairs))
    fp = sum(f and p["label"] != "supersedes" for f, p in zip(flagged, pairs))
    positives = sum(p["label"] == "supersedes" for p in pairs)
    assert tp / (tp + fp) >= MIN_PRECISION and tp / positives >= MIN_RECALL


def test_the_rule_on_the_issue_examples() -> None:
    old = "The staging database listens on port 6543"
    assert supersedes(old, "The staging database now listens on port 6544")
    assert not supersedes(old, "The staging database listens on port 6543.")  # restatement
    assert not supersedes(old, "The production database listens on port 5432")  # look-alike
    assert not supersedes("Redis runs on port 6379", "Memcached runs on port 11211")
    assert supersedes("预发布数据库的端口是 6543", "预发布数据库的端口现在是 6544")
    # a vector similarity, when an embedder gives one, can veto
    assert not supersedes(old, "The staging database now listens on port 6544", cosine=0.2)


@pytest.mark.parametrize(("old", "new", "label"), [
    ("Der Datenbankport ist 5432", "Der Datenbankport ist jetzt 5433", False),  # one word
    ("Die Staging-Datenbank läuft auf Port 6543",
     "Die Staging-Datenbank läuft jetzt auf Port 6544", True),
    ("Die Staging-Datenbank läuft auf Port 6543",
     "Die Produktionsdatenbank läuft auf Port 5432", False),
    ("Le serveur API tourne sur le port 8080", "Le serveur API tourne sur le port 9090", True),
    ("Le port de la base de données est 5432",
     "La base de données utilise le port 5432", False),  # restated
    ("El servidor de la API corre en el puerto 8080",
     "El servidor de la API corre en el puerto 9090", True),
    ("Сервер API работает на порту 8080", "Сервер API работает на порту 9090", True),
    ("Кэш Redis слушает порт 6379", "Сервер Memcached слушает порт 11211", False),
    ("Ο διακομιστής ακούει στη θύρα 5432", "Ο διακομιστής ακούει τώρα στη θύρα 5433", True),
])
def test_the_rule_reads_other_languages(old: str, new: str, label: bool) -> None:
    """Words of any script are words, each language's function words and update markers set
    aside, a number after its value words ("порту", "beträgt") a value, and a German noun's
    capital no name. Russian and Greek words were no tokens at all, and "ist 5432" read as
    the 5432nd of a series: none of the updates above was taken."""
    assert supersedes(old, new) is label


@pytest.mark.parametrize(("old", "new", "label"), [
    ("MEMORY_HOOK_BUDGET_S is 1.5 in CI", "MEMORY_HOOK_BUDGET_S is 3 in CI", True),
    ("DATABASE_URL is postgres://db:5432/app", "DATABASE_URL is postgres://db:6432/app", True),
    ("REDIS_PORT is 6379", "REDIS_PORT is 6380", True),
    ("REDIS_PORT is 6379", "POSTGRES_PORT is 5432", False),  # another setting
    ("API_TIMEOUT_S is 30", "DB_TIMEOUT_S is 60", False),
])
def test_a_setting_named_first_is_the_subject(old: str, new: str, label: bool) -> None:
    """"MEMORY_HOOK_BUDGET_S is 1.5" then "… is 3": the setting's name was one more volatile
    token, no stable word was left, and both values were injected."""
    assert supersedes(old, new) is label


@pytest.mark.parametrize(("old", "new", "label"), [
    ("Максимальный размер файла 10 МБ", "Максимальный размер файла теперь 20 МБ", True),
    ("Таймаут запроса 30 секунд", "Таймаут запроса теперь 60 секунд", True),
    ("The cache lasts 10 minutes", "The cache now lasts 20 minutes", True),
    ("step 2 takes 5 minutes", "step 3 takes 5 minutes", False),  # still a series member
    ("writer 5 item 3", "writer 6 item 3", False),
])
def test_a_number_before_a_unit_is_a_quantity_not_a_label(old: str, new: str,
                                                          label: bool) -> None:
    """Russian has no "is": in "размер файла 10 МБ" the number follows a plain noun and was
    read as the 10th of a series, so no update of a size or a timeout was taken."""
    assert supersedes(old, new) is label


def test_the_rule_meets_its_figures_in_other_languages() -> None:
    report = json.loads(subprocess.run(
        [sys.executable, str(ROOT / "bench" / "supersession.py")], capture_output=True,
        text=True, timeout=120, check=True).stdout)["other_languages"]
    # measured: 0.960 / 0.889 on the pairs written with the rule, 0.857 / 0.800 held out
    # (0.857 / 0.444 and 0.857 / 0.400 before the rule read them; 0.846 / 0.733 on the held
    # set before a number before a unit was a quantity)
    assert report["pairs_i18n"]["precision"] >= 0.9 and report["pairs_i18n"]["recall"] >= 0.8
    assert report["pairs_i18n_held"]["recall"] >= 0.6


@pytest.mark.parametrize(("old", "new", "replaces"), [
    # an identifier after a plain word names one of a series (a label), not a value
    ("Host web-01 runs nginx", "Host web-02 runs nginx", False),
    ("Ticket JIRA-101 is about login timeouts", "Ticket JIRA-102 is about login timeouts", False),
    ("Ticket JIRA-101 is about login timeouts", "Ticket JIRA-102 is about payment retries", False),
    ("term w1 r2 i3 payload text", "term w1 r2 i4 payload text", False),  # labels in a row
    ("term w4 r1 i7 payload text", "term w5 r1 i7 payload text", False),
    ("w1 r2 i3", "w1 r2 i4", False),  # every token volatile: no subject to compare
    ("\"alpha\" \"beta\" 7", "\"alpha\" \"beta\" 8", False),
    # ... after a cue it is a value; a label that stays is the subject of an update
    ("The primary host is web-01", "The primary host is web-02 now", True),
    ("The deploy target is web-01", "The deploy target moved to web-02", True),
    ("The metrics proxy listens on port 6543", "The metrics proxy now listens on port 6544", True),
    ("Ticket JIRA-101 is assigned to @alice", "Ticket JIRA-101 is now assigned to @bob", True),
    ("Host web-01 runs nginx 1.24", "Host web-01 runs nginx 1.26", True),
])
def test_identifiers_name_a_series_member_unless_a_cue_makes_them_a_value(
        old: str, new: str, replaces: bool) -> None:
    assert supersedes(old, new) is replaces
    if not replaces:
        assert not supersedes(new, old)


@pytest.mark.parametrize(("old", "new", "same"), [
    ("The cache TTL is 300 seconds", "The cache TTL is 600 seconds", False),
    ("The project uses Python 3.11", "The project uses Python 3.12", False),
    ("Deploys go out on Tuesdays", "Deploys go out on Thursdays", False),
    ("Step 2: run the migrations", "Step 3: run the migrations", False),
    ("Use pnpm, not npm", "Use npm, not pnpm", False),  # the same words, reversed
    ("Do not use npm; use pnpm", "Use npm; do not use pnpm", False),  # MiniLM: cosine 0.994
    ("We do not deploy on Fridays", "We deploy on Fridays", False),
    ("Never push to main", "Always push to main", False),
    ("We don't deploy on Fridays", "We do not deploy on Fridays", True),
    ("我们周五部署", "我们周五不部署", False),
    ("金曜日にデプロイする", "金曜日にデプロイしない", False),
    ("我们周五部署。", "我们周五部署", True),
    ("Alice prefers tabs in Go files", "ALICE PREFERS TABS IN GO FILES", True),
    ("Alice prefers tabs over spaces in Python files", "Alice prefers tabs over spaces in "
     "python files!", True),
    ("We deploy with Helm", "We deploy using Helm", True),
    ("The staging db listens on port 6543", "The staging db now listens on port 6543", True),
    # one word swapped for another (MiniLM: 0.981 and 0.984, over the near-duplicate bar)
    ("Enable strict mode in tsconfig", "Disable strict mode in tsconfig", False),
    ("Feature flag checkout_v2 is true in production",
     "Feature flag checkout_v2 is false in production", False),
    ("Increase the worker pool size", "Decrease the worker pool size", False),
    ("Caching is on for the staging API", "Caching is off for the staging API", False),
    ("Use npm in the web repo", "Avoid npm in the web repo", False),
    ("Run migrations before deploying", "Run migrations after deploying", False),
    ("我们周五部署", "我们周六部署", False),
    # ... but inflected, or words added or dropped
    ("We use pnpm for the web repo", "We are using pnpm for the web repo", True),
    ("The importer deploys nightly", "The importer deployed nightly", True),
    ("Deploy the web app on Fridays", "Deploy the web application on Fridays", True),
    ("Run the linter before committing", "Always run the linter before committing", True),
])
def test_near_duplicates_must_have_the_same_details(old: str, new: str, same: bool) -> None:
    """What an embedding's near-duplicate must also pass before two memories are merged."""
    assert same_details(old, new) is same and same_details(new, old) is same


def test_the_bench_reproduces_the_figures_as_json() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "supersession.py")],
                          capture_output=True, text=True, timeout=120, check=True)
    report = json.loads(done.stdout)
    assert report["pairs"] >= 200
    assert report["default"]["precision"] >= MIN_PRECISION
    assert report["default"]["recall"] >= MIN_RECALL
    held_out = report["cross_validated"]
    assert held_out["precision"] >= MIN_PRECISION and held_out["recall"] >= MIN_RECALL


# --- the engine, on both stores ---------------------------------------------------------------


@pytest.mark.both_stores
def test_an_update_replaces_the_old_fact_and_history_stays(engine: MemoryEngine) -> None:
    old = engine.store_one(NewMemory("The staging database listens on port 6543",
                                     project="shop")).uid
    other = engine.store_one(NewMemory("The production database listens on port 5432",
                                       project="shop")).uid
    elsewhere = engine.store_one(NewMemory("The staging database listens on port 6543 here",
                                           project="blog")).uid
    stored = engine.store_one(NewMemory("The staging database now listens on port 6544",
                                        project="shop"))
    new = stored.uid
    assert stored.supersedes == [old]  # the caller learns what left recall
    assert stored.to_dict()["supersedes"] == [old]
    assert "supersedes" not in engine.store_one(NewMemory("Unrelated: the CDN is Fastly",
                                                          project="cdn")).to_dict()
    assert contents(engine, "staging database port", project="shop") == [
        "The staging database now listens on port 6544",
        "The production database listens on port 5432"]
    history = contents(engine, "staging database port", project="shop", include_superseded=True)
    assert "The staging database listens on port 6543" in history and len(history) == 3
    assert engine.get(old).superseded_by == new and engine.get(old).to_dict()["superseded_by"]
    assert "superseded_by" not in engine.get(new).to_dict()
    assert engine.get(other).superseded_by is None and engine.get(elsewhere).superseded_by is None
    assert engine.supersedes(new) == [old]
    assert engine.count(RecallFilters(project="shop")) == 2
    assert engine.count(RecallFilters(project="shop", include_superseded=True)) == 3
    assert engine.unsupersede(old) == new
    assert "The staging database listens on port 6543" in contents(
        engine, "staging database port", project="shop")
    assert engine.unsupersede(old) is None
    with pytest.raises(UnknownMemory):
        engine.unsupersede("feedfacefeedface")


@pytest.mark.both_stores
@pytest.mark.parametrize("old_text,new_text", [
    ("The staging database listens on port 6543",
     "The staging database listens on port 7777 permanently"),
    ("The build cache lives in /var/cache/ci", "The build cache lives in /srv/cache/ci nowadays"),
    ("Our deploy window opens at 14:00 UTC", "Our deploy window opens at 16:00 UTC (weekdays)"),
])
def test_an_update_that_adds_a_longer_word_replaces_on_both_stores(
        engine: MemoryEngine, old_text: str, new_text: str) -> None:
    """PostgreSQL looked for candidates by the new text's one longest word, which an update
    adding a word ("permanently") holds alone: SQLite replaced the old value, PostgreSQL kept
    both current (PostgreSQL QA)."""
    old = engine.store_one(NewMemory(old_text, project="ops")).uid
    new = engine.store_one(NewMemory(new_text, project="ops"))
    assert new.supersedes == [old]
    assert engine.get(old).superseded_by == new.uid


@pytest.mark.both_stores
def test_an_update_behind_many_newer_memories_sharing_a_word_replaces_on_both_stores(
        engine: MemoryEngine) -> None:
    """PostgreSQL took the 20 newest memories holding the probe word: 21 newer facts about
    other databases pushed the staging one out, and both values stayed current."""
    old = engine.store_one(NewMemory("The staging database listens on port 6543",
                                     project="ops")).uid
    for word in ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                 "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
                 "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
                 "xray", "yankee"]:
        engine.store_one(NewMemory(f"The {word} database keeps {word} records for the "
                                   f"{word} team", project="ops"))
    new = engine.store_one(NewMemory("The staging database now listens on port 7777",
                                     project="ops"))
    assert new.supersedes == [old]


def test_probe_words_are_the_longest_stable_words_then_a_cjk_run() -> None:
    assert supersede.probe_words("The staging database listens on port 7777 permanently") \
        == ["permanently", "database", "staging"]
    assert supersede.probe_words("数据库端口改为 6544 了") == ["数据库"]
    assert supersede.probe_words("ok") == []


@pytest.mark.both_stores
def test_explicit_replaces_kinds_and_forget(engine: MemoryEngine) -> None:
    note = engine.store_one(NewMemory("Standup notes: port 6543 discussed", kind="note")).uid
    engine.store_one(NewMemory("Standup notes: port 6544 discussed", kind="note"))
    assert engine.get(note).superseded_by is None  # notes are never superseded by the rule
    old = engine.store_one(NewMemory("We deploy with Capistrano", kind="decision")).uid
    new = engine.store_one(NewMemory("Deployments go through Argo CD from now on",
                                     kind="decision", replaces=old)).uid
    assert engine.get(old).superseded_by == new
    assert "We deploy with Capistrano" not in contents(engine, "deploy Capistrano")
    assert engine.forget(new)  # forgetting the newer one makes the older current again
    assert engine.get(old).superseded_by is None
    assert "We deploy with Capistrano" in contents(engine, "deploy Capistrano")
    with pytest.raises(InvalidMemory, match="replaces"):
        engine.store_one(NewMemory("Anything", replaces="feedfacefeedface"))
    off = MemoryEngine(Settings(db_path=engine.settings.db_path, db_url=engine.settings.db_url,
                                device="cpu", supersede=False))
    try:
        a = off.store_one(NewMemory("The cache TTL is 300 seconds", project="x")).uid
        off.store_one(NewMemory("The cache TTL is 600 seconds", project="x"))
        assert off.get(a).superseded_by is None  # MEMORY_SUPERSEDE=0: only explicit ones
    finally:
        off.close()


@pytest.mark.both_stores
def test_an_edit_that_no_longer_restates_makes_the_replaced_current_again(
        engine: MemoryEngine) -> None:
    """Moving or rewriting the newer memory left the older one replaced by a memory that no
    longer said anything about it: recall and list showed neither in the project."""
    old = engine.store_one(NewMemory("Web uses Node 18 in CI", project="web")).uid
    new = engine.store_one(NewMemory("Web uses Node 20 in CI", project="web")).uid
    assert engine.get(old).superseded_by == new
    engine.update(new, content="Web uses Node 22 in CI")  # still a restatement: stays replaced
    assert engine.get(old).superseded_by == new
    engine.update(new, tags=["ci"])  # nor does a tag change anything
    assert engine.get(old).superseded_by == new
    engine.update(new, project="api")
    assert engine.get(old).superseded_by is None
    assert contents(engine, "node CI", project="web") == ["Web uses Node 18 in CI"]
    older = engine.store_one(NewMemory("The docs site builds with Hugo 0.120", project="web"))
    newer = engine.store_one(NewMemory("The docs site builds with Hugo 0.125", project="web"))
    assert newer.supersedes == [older.uid]
    engine.update(newer.uid, content="Use tabs, not spaces, in Makefiles")
    assert engine.get(older.uid).superseded_by is None
    assert "The docs site builds with Hugo 0.120" in contents(engine, "docs site Hugo",
                                                               project="web")


@pytest.mark.both_stores
def test_counts_are_of_current_memories(engine: MemoryEngine) -> None:
    """stats said 2 memories (web=2) where list showed 1: the replaced one is history."""
    engine.store_one(NewMemory("The staging database listens on port 6543", project="web"))
    engine.store_one(NewMemory("The staging database now listens on port 6544", project="web"))
    engine.store_one(NewMemory("Deploys need a green CI run"))
    stats = engine.stats()
    assert (stats["memories"], stats["by_project"], stats["without_project"]) == (2, {"web": 1}, 1)
    assert stats["by_kind"] == {"fact": 2} and engine.counts()["memories"] == 2
    assert engine.store.values("project", "w") == [("web", 1)]
    assert engine.count() == 2 == len(engine.list(RecallFilters(), 10, 0))


@pytest.mark.both_stores
def test_a_value_changed_back_is_current_again(engine: MemoryEngine) -> None:
    """6543 -> 6544 -> 6543: the restatement is a duplicate of the first memory, which was
    refreshed but stayed replaced, so recall kept answering 6544."""
    first = engine.store_one(NewMemory("The staging database listens on port 6543",
                                       project="shop"))
    moved = engine.store_one(NewMemory("The staging database now listens on port 6544",
                                       project="shop"))
    back = engine.store_one(NewMemory("The staging database listens on  port 6543",
                                      project="shop"))
    assert back.status == "duplicate" and back.uid == first.uid
    assert moved.supersedes == [first.uid] and back.supersedes == [moved.uid]
    assert contents(engine, "staging database port", project="shop") == [
        "The staging database listens on port 6543"]
    assert engine.get(first.uid).superseded_by is None
    assert engine.get(moved.uid).superseded_by == first.uid
    assert engine.supersedes(first.uid) == [moved.uid]


@pytest.mark.both_stores
def test_a_late_or_bulk_restatement_changes_nothing(engine: MemoryEngine) -> None:
    first = engine.store_one(NewMemory("The cache TTL is 300 seconds", project="x")).uid
    moved = engine.store_one(NewMemory("The cache TTL is 600 seconds", project="x")).uid
    written = engine.get(moved).created_at
    old_line = NewMemory("The cache TTL is 300 seconds", project="x", created_at=written - 60)
    as_note = NewMemory("The cache TTL is 300 seconds", project="x", kind="note")
    file_line = NewMemory("The cache TTL is 300 seconds", project="x")
    assert engine.store_one(old_line).uid == first  # an old transcript, stored late
    assert engine.store_one(as_note).uid == first  # a kind the rule never supersedes
    assert engine.ingest([file_line], batch_is_session=False)[0].uid == first  # a bulk load
    assert engine.get(first).superseded_by == moved
    assert contents(engine, "cache TTL", project="x") == ["The cache TTL is 600 seconds"]


@pytest.mark.both_stores
def test_a_chain_returns_only_its_newest(engine: MemoryEngine) -> None:
    for version in ("3.10", "3.11", "3.12"):
        engine.store_one(NewMemory(f"The project uses Python {version}", project="py"))
    assert contents(engine, "project uses Python", project="py") == [
        "The project uses Python 3.12"]
    assert len(contents(engine, "project uses Python", project="py",
                        include_superseded=True)) == 3


@pytest.mark.both_stores
def test_restatements_in_one_batch_never_replace_each_other(engine: MemoryEngine) -> None:
    """One batch shares a timestamp and is stored before its items are judged: the later
    restatement replaces the earlier one, never both each other (which left none current)."""
    results = engine.ingest([
        NewMemory("The staging db listens on port 5432", kind="fact", project="p"),
        NewMemory("The staging db listens on port 5433", kind="fact", project="p")])
    assert [r.status for r in results] == ["new", "new"]
    assert contents(engine, "staging db port", project="p") == [
        "The staging db listens on port 5433"]
    assert engine.supersedes(results[1].uid) == [results[0].uid]


@pytest.mark.both_stores
def test_hosts_and_tickets_named_by_identifiers_stay_apart(engine: MemoryEngine) -> None:
    """QA: three hosts in one batch, and tickets stored one by one, each came back `new` but
    only the last stayed current: its identifier was taken for a changed value."""
    hosts = [f"Host web-0{n} runs nginx" for n in (1, 2, 3)]
    results = engine.ingest([NewMemory(text, project="fleet") for text in hosts])
    assert [r.status for r in results] == ["new"] * 3
    assert sorted(m.content for m in engine.list(RecallFilters(project="fleet"))) == hosts
    tickets = ["Ticket JIRA-101 is about login timeouts", "Ticket JIRA-102 is about login "
               "timeouts", "Ticket JIRA-103 is about payment retries"]
    for text in tickets:
        assert engine.store_one(NewMemory(text, project="desk")).status == "new"
    assert sorted(m.content for m in engine.list(RecallFilters(project="desk"))) == tickets
    # a value named after a cue still replaces the older one
    engine.store_one(NewMemory("The primary host is web-01", project="fleet"))
    new = engine.store_one(NewMemory("The primary host is web-02 now", project="fleet")).uid
    assert contents(engine, "primary host", project="fleet")[0] == \
        "The primary host is web-02 now"
    assert len(engine.supersedes(new)) == 1
    assert engine.count(RecallFilters(project="fleet")) == 4


def test_a_batch_of_numbered_items_does_not_chain_supersede(engine: MemoryEngine) -> None:
    """QA: 3,000 distinct "term wN rM iK payload text" items left 2,999 superseded and recall
    for "payload" empty."""
    items = [NewMemory(f"term w{n % 7} r{n % 11} i{n} payload text", project="load")
             for n in range(3000)]
    results = engine.ingest(items)
    assert {r.status for r in results} == {"new"}
    assert engine.count(RecallFilters(project="load")) == 3000
    assert len(contents(engine, "payload", project="load")) == 10


def test_a_version_7_file_is_upgraded(tmp_path: Path) -> None:
    settings = Settings(db_path=str(tmp_path / "old.db"), device="cpu")
    engine = MemoryEngine(settings)
    uid = engine.store_one(NewMemory("The API server runs on port 8080")).uid
    engine.close()
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.execute("DROP INDEX memories_superseded")
    conn.execute("ALTER TABLE memories DROP COLUMN superseded_by")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    engine = MemoryEngine(settings)
    try:
        assert engine.store.schema_version == SCHEMA_VERSION
        new = engine.store_one(NewMemory("The API server runs on port 9090")).uid
        assert engine.get(uid).superseded_by == new
    finally:
        engine.close()


def test_export_and_import_keep_supersession(tmp_path: Path) -> None:
    db, copy = tmp_path / "a.db", tmp_path / "b.db"
    old = run_cli(db, "store", "The request timeout is 30 seconds").stdout.split()[1]
    new = run_cli(db, "store", "The request timeout is 45 seconds").stdout.split()[1]
    dump = tmp_path / "dump.jsonl"
    assert run_cli(db, "export", "-o", str(dump)).returncode == 0
    assert run_cli(copy, "import", str(dump)).returncode == 0
    line = json.loads(run_cli(copy, "recall", "request timeout", "--json",
                              "--include-superseded").stdout)
    assert {m["uid"]: m.get("superseded_by") for m in line} == {old: new, new: None}


# --- REST, MCP and the CLI -------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("supersede"), MEMORY_TOKEN=TOKEN)
    yield svc
    svc.stop()


def test_rest_fields(service: Service) -> None:
    with service.client() as http:
        old = http.post("/ingest", json={"content": "The worker pool has 4 processes",
                                         "project": "jobs"}).json()["uid"]
        stored = http.post("/ingest", json={"content": "The worker pool has 8 processes",
                                            "project": "jobs"}).json()
        new = stored["uid"]
        assert stored["supersedes"] == [old]
        recalled = http.post("/recall", json={"query": "worker pool processes",
                                              "project": "jobs"}).json()
        assert [i["uid"] for i in recalled["items"]] == [new] and old not in recalled["block"]
        both = http.post("/recall", json={"query": "worker pool processes", "project": "jobs",
                                          "include_superseded": True}).json()
        assert {i["uid"] for i in both["items"]} == {old, new}
        search = http.get("/api/search", params={"q": "worker pool", "project": "jobs",
                                                 "include_superseded": "true"}).json()
        assert {i["uid"] for i in search["items"]} == {old, new}
        assert [i["uid"] for i in http.get("/api/search", params={
            "q": "worker pool", "project": "jobs"}).json()["items"]] == [new]
        shown = http.get(f"/api/memories/{old}").json()
        assert shown["superseded_by"] == new and shown["supersedes"] == []
        assert http.get(f"/api/memories/{new}").json()["supersedes"] == [old]
        undo = http.post(f"/api/memories/{old}/unsupersede")
        assert undo.status_code == 200 and undo.json()["was_superseded_by"] == new
        assert http.post(f"/api/memories/{old}/unsupersede").status_code == 409
        assert http.post("/api/memories/feedfacefeedface/unsupersede").status_code == 404
        explicit = http.post("/ingest", json={"content": "Jobs run on the new scheduler",
                                              "project": "jobs", "replaces": old})
        assert explicit.status_code == 200, explicit.text
        assert http.get(f"/api/memories/{old}").json()["superseded_by"] == \
            explicit.json()["uid"]
        bad = http.post("/ingest", json={"content": "x", "replaces": "feedfacefeedface"})
        assert bad.status_code == 422 and bad.json()["field"] == "replaces"


def test_mcp_fields(service: Service) -> None:
    async def main() -> None:
        async with http_session(service.mcp_url, TOKEN) as session:
            async def call(name: str, args: dict) -> dict:
                result = await session.call_tool(name, args)
                assert not result.is_error, result.content
                return result.structured_content

            old = (await call("memory_store", {"content": "We chose Flask for the admin app",
                                               "kind": "decision", "project": "mcp"}))["uid"]
            stored = await call("memory_store", {"content": "Admin app: FastAPI, not Flask",
                                                 "kind": "decision", "project": "mcp",
                                                 "replaces": old})
            new = stored["uid"]
            assert stored["supersedes"] == [old]
            found = await call("memory_recall", {"query": "admin app Flask", "project": "mcp"})
            assert [i["uid"] for i in found["items"]] == [new]
            found = await call("memory_recall", {"query": "admin app Flask", "project": "mcp",
                                                 "include_superseded": True})
            assert {i["uid"] for i in found["items"]} == {old, new}
            assert [i.get("superseded_by") for i in found["items"] if i["uid"] == old] == [new]

    anyio.run(main)


def run_cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMORY_DB_PATH": str(db)}
    env.pop("MEMORY_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "semantic_memory", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_cli(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    old = run_cli(db, "store", "The CI runner image is ubuntu-22.04", "--project", "ci"
                  ).stdout.split()[1]
    stored = run_cli(db, "store", "The CI runner image is ubuntu-24.04", "--project", "ci").stdout
    new = stored.split()[1]
    assert f"(supersedes {old}:" in stored
    hits = json.loads(run_cli(db, "recall", "CI runner image", "--json").stdout)
    assert [h["uid"] for h in hits] == [new]
    hits = json.loads(run_cli(db, "recall", "CI runner image", "--json",
                              "--include-superseded").stdout)
    assert {h["uid"] for h in hits} == {old, new}
    undone = run_cli(db, "unsupersede", old)
    assert undone.returncode == 0 and new in undone.stdout
    for args, needle in ((("unsupersede", old), "not superseded"),
                         (("unsupersede", "feedfacefeedface"), "no live memory"),
                         (("store", "x", "--replaces", "feedfacefeedface"), "replaces")):
        failed = run_cli(db, *args)
        lines = failed.stderr.strip().splitlines()
        assert failed.returncode == 1 and len(lines) == 1 and needle in lines[0], failed.stderr
    explicit = run_cli(db, "store", "CI jobs run in Nix shells, no runner image",
                       "--project", "ci", "--replaces", old).stdout.split()[1]
    shown = json.loads(run_cli(db, "recall", "22.04", "--json", "--include-superseded").stdout)
    assert shown[0]["uid"] == old and shown[0]["superseded_by"] == explicit


@pytest.mark.both_stores
def test_an_update_in_another_language_replaces_the_old_fact(engine: MemoryEngine) -> None:
    for old, new, query in [
        # porter reads a CJK run as one token, and its pairs are too short for pg_trgm: the
        # trigram channel / the run's opening characters find the candidate
        ("预发布数据库的端口是 6543", "预发布数据库的端口现在是 6544", "预发布数据库"),
        ("ビルドサーバーのポートは 8080 です", "ビルドサーバーのポートは今は 9090 です",
         "ビルドサーバー"),
        ("Сервер API работает на порту 8080", "Сервер API работает на порту 9090",
         "порту сервер API"),
        ("Die Staging-Datenbank läuft auf Port 6543",
         "Die Staging-Datenbank läuft jetzt auf Port 6544", "Staging-Datenbank Port"),
    ]:
        first = engine.store_one(NewMemory(old, project="i18n")).uid
        second = engine.store_one(NewMemory(new, project="i18n")).uid
        assert engine.get(first).superseded_by == second, old
        assert contents(engine, query, project="i18n")[:1] == [new]
