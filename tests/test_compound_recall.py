"""A query word that no memory holds as typed: a compound typed run together ("healthcheck" for
"The health check endpoint", "precommit" for `pre-commit`) or apart ("auto scaler" for
`Autoscaler`), and a commit hash typed in full where the memory names its short form. Each is
searched in its other spelling too, one phrase with it, so it is found and judged by the
relevance bar (what a hook injects). Real SQLite files, a real PostgreSQL (tests/pg.py) and the
real CLI; BM25 only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pg
import pytest

from semantic_memory.config import Settings
from semantic_memory import keywords
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_bm25_porter import PREFIX_MIN, PorterChannel
from semantic_memory.stores.fts5 import fts_terms

BM25 = "bm25_porter,bm25_trigram"

HEALTH = "The health check endpoint is GET /healthz; Kubernetes probes call it every 10s"
HUSKY = "Husky pre-commit hook runs lint-staged; commit with --no-verify in an emergency"
NODES = "Node groups use Karpenter 0.37 with spot instances for workers"
THEME = "Tailwind dark mode uses the class strategy toggled by ThemeProvider"
REGRESSION = "Commit 7c3e9a1 introduced the regression in the pagination of InvoiceTable"
SCALER = "Horizontal Pod Autoscaler for the api scales between 2 and 10 replicas"
#: What else a project's store holds: the parts of the compounds, apart ("check" and "mode"
#: in other senses, "group" and "stage" alone; "auto" in automerge and Autosave), so a part
#: alone vouches for nothing.
OTHERS = [
    "We use pnpm, not npm or yarn, in the web repo",
    "Run the type check with pnpm tsc --noEmit before pushing",
    "The staging deploy runs from the release branch after review",
    "Users in the admin group can export invoices as CSV",
    "Vim mode is on in the editor; format on save too",
    "Invoices are emailed on the first of each month",
    "Prometheus scrapes /metrics on port 9090 every 15 seconds",
    "Renovate bot opens dependency PRs every Monday morning; automerge is on for patches",
    "Autosave is off in the editor, so save before you run the tests",
]
#: (query, the memory it is about): the QA's five words typed run together, a hash in full,
#: a word typed apart.
FOUND = [
    ("healthcheck", HEALTH),
    ("precommit", HUSKY),
    ("lintstaged", HUSKY),
    ("nodegroup", NODES),
    ("darkmode", THEME),
    ("7c3e9a1f0b2d", REGRESSION),
    ("auto scaler", SCALER),
]


def bm25_engine(path: Path) -> MemoryEngine:
    return MemoryEngine(Settings(db_path=str(path), device="cpu", plugins=BM25))


def fill(engine: MemoryEngine) -> None:
    """Every memory in project `web`, each its own session (no neighbour rides along)."""
    for n, content in enumerate([HEALTH, HUSKY, NODES, THEME, REGRESSION, SCALER, *OTHERS]):
        engine.store_one(NewMemory(content, project="web", session=f"s{n}"))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    eng = bm25_engine(tmp_path / "m.db")
    fill(eng)
    yield eng
    eng.close()


def top(engine: MemoryEngine, query: str) -> str | None:
    hits = engine.recall(query, 5, RecallFilters(project="web"))
    return hits[0].memory.content if hits else None


def injected(engine: MemoryEngine, query: str) -> list[str]:
    """What a hook would inject for `query` (k = 5)."""
    return [h.memory.content
            for h in engine.recall(query, 5, RecallFilters(project="web"), relevant_only=True)]


# --- the readings --------------------------------------------------------------------------------

def test_a_word_is_read_as_two_words_the_most_even_cut_first() -> None:
    assert keywords.two_word_readings("darkmode") == ["dark mode", "dar kmode", "darkm ode"]
    assert keywords.two_word_readings("healthcheck")[:2] == ["healt hcheck", "health check"]
    assert "pre commit" in keywords.two_word_readings("precommit")
    # a stopword is no part ("roll out": PostgreSQL's full text drops "out"); nor a number,
    # a short word or an unspaced script
    assert "roll out" not in keywords.two_word_readings("rollout")
    assert keywords.two_word_readings("abcde") == keywords.two_word_readings("k8sctl") == []
    assert keywords.two_word_readings("配置文件配置文件") == []


def test_a_word_is_also_read_run_together_with_its_neighbours() -> None:
    assert keywords.compound_readings("scaler", ["auto", "scaler"]) == [
        "sca ler", "autoscaler"]
    assert keywords.compound_readings("lock", ["the", "lock", "file"]) == ["lockfile"]
    assert keywords.compound_readings("it", ["fix", "it"]) == []


def test_a_long_hex_word_has_a_short_hash() -> None:
    assert keywords.short_hash("7c3e9a1f0b2d") == "7c3e9a1"
    assert keywords.short_hash("7c3e9a1f0b2d4e6a8c0e2a4f6b8d0c2e4a6b8d0f") == "7c3e9a1"
    # the short form itself, a number, a hex-looking English word: none
    for word in ("7c3e9a1", "20231205", "deadbeefcafe"):
        assert keywords.short_hash(word) is None, word


# --- SQLite: found and injected ------------------------------------------------------------------

@pytest.mark.parametrize(("query", "memory"), FOUND, ids=[q for q, _ in FOUND])
def test_a_compound_typed_otherwise_and_a_full_hash_are_found_and_injected(
        engine: MemoryEngine, query: str, memory: str) -> None:
    assert top(engine, query) == memory
    assert injected(engine, query) == [memory]


def test_the_rest_of_a_question_still_weighs(engine: MemoryEngine) -> None:
    """The word typed run together is one term among the question's: the memory holding
    both is injected, and a memory holding only the rest ("check" alone) is not."""
    assert injected(engine, "how often is the healthcheck endpoint probed?") == [HEALTH]
    assert injected(engine, "why does the precommit hook block my commit?") == [HUSKY]
    assert HEALTH not in injected(engine, "type check")


def test_a_word_some_memory_holds_is_searched_as_typed(tmp_path: Path) -> None:
    """Ordinary queries do not change: a word any memory holds gets no other spelling, even
    where a reading of it is held too; nor does a word of an unknown shape."""
    eng = bm25_engine(tmp_path / "m.db")
    fill(eng)
    literal = "nodegroup is the CLI's name for a managed node pool"
    eng.store_one(NewMemory(literal, project="web", session="literal"))
    assert injected(eng, "nodegroup") == [literal]
    assert top(eng, "nodegroup") == literal
    assert NODES not in [h.memory.content for h in eng.recall("nodegroup", 10)]
    porter = next(c for c in eng.channels if isinstance(c, PorterChannel))
    with eng.store.snapshot() as conn:
        for query in ("nodegroup", "which package manager do we use?", "zzzqqq", "7c3e9a1"):
            assert porter.phrases(conn, query) == fts_terms(
                PorterChannel.terms(query), prefix_min=PREFIX_MIN), query
    eng.close()


def test_the_other_spelling_costs_a_few_bounded_counts_once(engine: MemoryEngine) -> None:
    """An unknown word costs a count of itself and one per reading up to the first held,
    each stopping at its first match (LIMIT 1); a known word one count, remembered; asked
    again, nothing."""
    porter = next(c for c in engine.channels if isinstance(c, PorterChannel))
    with engine.store.snapshot() as conn:
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        try:
            porter.spellings(conn, ["healthcheck", "endpoint"], "healthcheck endpoint")
            counted = [s for s in statements if "MATCH" in s]
            # itself, "healt hcheck", "health check": then stop; "endpoint" once
            assert len(counted) <= 5 and all("LIMIT 1)" in s for s in counted), counted
            statements.clear()
            porter.spellings(conn, ["healthcheck", "endpoint"], "healthcheck endpoint")
            assert not [s for s in statements if "MATCH" in s]
        finally:
            conn.set_trace_callback(None)


def test_the_cli_recall_of_a_word_typed_run_together(tmp_path: Path) -> None:
    """The QA's repro: `recall healthcheck --project api` said "No memory matched"."""
    db = tmp_path / "cli.db"
    eng = bm25_engine(db)
    fill(eng)
    eng.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(db), MEMORY_PLUGINS=BM25)
    for args in (["healthcheck"], ["healthcheck", "--block", "2000"]):
        done = subprocess.run([sys.executable, "-m", "semantic_memory", "recall", *args,
                               "--project", "web"], capture_output=True, text=True, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert HEALTH in done.stdout, done.stdout + done.stderr


def test_a_word_stored_later_is_then_searched_as_typed(engine: MemoryEngine) -> None:
    """Whether a word is held is counted again once the store has grown: the new memory
    holding it literally is found first."""
    assert top(engine, "darkmode") == THEME
    literal = "the darkmode flag is read from localStorage"
    engine.store_one(NewMemory(literal, project="web", session="later"))
    assert injected(engine, "darkmode") == [literal]


# --- PostgreSQL: the same ------------------------------------------------------------------------

def test_postgres_finds_and_injects_the_same(tmp_path: Path) -> None:
    """PostgreSQL's own keyword search (a store under MEMORY_PG_MIRROR_MIN: no keyword
    mirror) finds and injects what SQLite does; a big store answers from the mirror, which
    runs the SQLite channels."""
    sqlite_engine = bm25_engine(tmp_path / "m.db")
    postgres = MemoryEngine(Settings(db_path=str(tmp_path / "pg.db"), db_url=pg.new_database(),
                                     device="cpu"))
    try:
        assert {c.name for c in postgres.channels} >= {"pg_fulltext", "pg_trigram"}
        for eng in (sqlite_engine, postgres):
            fill(eng)
        queries = [q for q, _ in FOUND] + ["how often is the healthcheck endpoint probed?",
                                            "type check", "nodegroup pool"]
        for query in queries:
            assert top(postgres, query) == top(sqlite_engine, query), query
            assert injected(postgres, query) == injected(sqlite_engine, query), query
        for query, memory in FOUND:
            assert injected(postgres, query) == [memory], query
    finally:
        sqlite_engine.close()
        postgres.close()


def test_postgres_searches_a_word_some_memory_holds_as_typed(tmp_path: Path) -> None:
    postgres = MemoryEngine(Settings(db_path=str(tmp_path / "pg.db"), db_url=pg.new_database(),
                                     device="cpu"))
    try:
        fill(postgres)
        literal = "nodegroup is the CLI's name for a managed node pool"
        postgres.store_one(NewMemory(literal, project="web", session="literal"))
        assert injected(postgres, "nodegroup") == [literal]
        assert NODES not in [h.memory.content for h in postgres.recall("nodegroup", 10)]
    finally:
        postgres.close()

