"""Code-heavy memories through the relevance bar (what hooks inject, `relevant_only`), BM25
only: identifiers, their parts and pasted tool output. Real SQLite file, real porter and
trigram channels."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from semantic_memory.config import Settings
from semantic_memory.keywords import bar_terms, identifier_parts, where_words, words
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

BM25 = "bm25_porter,bm25_trigram"

PYTEST_PASTE = """\
____________________________ test_make_widget_large ____________________________

    def test_make_widget_large():
>       make_widget(5)

tests/test_widget.py:8:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _

size = 5

    def make_widget(size):
>       if size > 3: raise ValueError(f"size {size} exceeds MAX_WIDGET_SIZE=3")
E       ValueError: size 5 exceeds MAX_WIDGET_SIZE=3

tests/test_widget.py:5: ValueError
=========================== short test summary info ============================
FAILED tests/test_widget.py::test_make_widget_large - ValueError: size 5 exceeds MAX_..."""

WIDGET = ("ValueError: size 5 exceeds MAX_WIDGET_SIZE is expected in test_make_widget_large, "
          "mark it xfail")
#: What a coding store holds besides: test runs, defs, paths, the words of pytest's output.
CODE_NOTES = [
    "tests/test_cli.py::test_help failed: the short test summary info lists 1 failed",
    "def load(path): raise FileNotFoundError in tests/conftest.py line 8",
    "pytest prints a short test summary info line per failed test",
    "def make_config(size=3): the f-string in tests/test_config.py",
    "tests/test_db.py:5 failed with 3 errors; raise the timeout",
    "def parse(text): tests in tests/test_parse.py cover it; raise ValueError on junk",
    "the CI log ends with the short test summary info of pytest",
    "def widget_name(): used by tests/test_names.py",
    "f-strings are fine in def bodies; raise early",
]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """BM25 only, each memory its own session (no neighbour rides along with a hit)."""
    eng = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), device="cpu", plugins=BM25))
    yield eng
    eng.close()


def store(engine: MemoryEngine, *contents: str) -> None:
    for n, content in enumerate(contents):
        engine.store_one(NewMemory(content, session=f"s{n}"))


def injected(engine: MemoryEngine, query: str) -> list[str]:
    """What a hook would inject for `query` (k = 5)."""
    return [h.memory.content for h in engine.recall(query, 5, relevant_only=True)]


def test_underscore_runs_are_no_words_and_edge_underscores_no_part_of_one() -> None:
    assert words("________ test_x ________ _ _ __init__ _private MAX_") == [
        "test_x", "init", "private", "max"]


def test_a_pasted_pytest_failure_with_its_separator_lines_clears_the_bar(
        engine: MemoryEngine) -> None:
    """pytest's `____ test_x ____` separators were query words no memory can match, weighing
    as the rarest terms: the memory about this very failure, ranked first, stayed under the
    bar."""
    store(engine, WIDGET, *CODE_NOTES)
    assert engine.recall(PYTEST_PASTE, 5)[0].memory.content == WIDGET
    assert injected(engine, PYTEST_PASTE)[:1] == [WIDGET]


def test_a_dunder_query_finds_and_injects_its_memory(engine: MemoryEngine) -> None:
    """`__init__` is the word `init` now, as the porter index holds it: still found first."""
    exports = "package exports live in src/pkg/__init__.py"
    store(engine, exports, *CODE_NOTES)
    for query in ("__init__.py", "src/pkg/__init__.py", "what does __init__ export?"):
        assert engine.recall(query, 5)[0].memory.content == exports
        assert injected(engine, query)[:1] == [exports]


# --- a part of an identifier ---------------------------------------------------------------------

BALANCE = "getUserAccountBalance in src/billing/balance.ts rounds to cents with Math.round"
AUTH = "useAuthStore (src/stores/auth-store.ts) must be reset in afterEach or tests leak the session"
LAZY = "LazyMCP defers the SDK import until the first request reaches the mcp endpoint"
LOADER = "DataLoaderV2.prefetch_batches leaks file handles, use DataLoaderV3 instead"
WEB_NOTES = [
    "The web repo uses pnpm as its package manager, not npm",
    "Invoices are emailed on the first of each month",
    "the mcp server and its proxy share one port, so a second service on the machine picks another",
    "upload the data to the bucket before the file is read",
    "support for the metadata import was added in the last release",
    "we report every transport error with the imported module's name",
]


def test_what_only_a_part_of_an_identifier_finds_clears_the_bar(engine: MemoryEngine) -> None:
    """The trigram channel ranked `getUserAccountBalance` first for "AccountBalance", but the
    porter index holds the identifier as one word, so nothing cleared the bar: a query word
    of 4+ characters now counts as held where it starts a part of an identifier."""
    store(engine, BALANCE, AUTH, LAZY, LOADER, *WEB_NOTES)
    for query, memory in (("AccountBalance", BALANCE), ("AuthStore", AUTH),
                          ("lazy-mcp", LAZY), ("data loader v2 file handles", LOADER)):
        assert engine.recall(query, 5)[0].memory.content == memory, query
        assert injected(engine, query)[:1] == [memory], query


def test_a_common_substring_inside_an_english_word_vouches_for_nothing(
        engine: MemoryEngine) -> None:
    """"port" is inside "import", "support", "report" and "transport", "data" inside
    "metadata": no part of an identifier, so the bar still refuses them."""
    store(engine, BALANCE, AUTH, LAZY, LOADER, *WEB_NOTES)
    assert injected(engine, "port this to rust") == [WEB_NOTES[2]]
    assert "support for the metadata import was added in the last release" not in injected(
        engine, "data")


def test_the_cli_block_injects_a_memory_a_part_of_its_identifier_found(tmp_path: Path) -> None:
    """The QA's repro: `recall "AccountBalance" --block 2000` printed "Nothing clears the
    relevance bar" with the memory ranked first above it."""
    db = tmp_path / "cli.db"
    eng = MemoryEngine(Settings(db_path=str(db), device="cpu", plugins=BM25))
    store(eng, BALANCE, *WEB_NOTES[:2])
    eng.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(db), MEMORY_PLUGINS=BM25)
    done = subprocess.run([sys.executable, "-m", "semantic_memory", "recall", "AccountBalance",
                           "--block", "2000"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert BALANCE in done.stdout and "Nothing clears" not in done.stdout + done.stderr


# --- where pasted output says where --------------------------------------------------------------

BUILD_APP = "semantic_memory.service.app.build_app wires the Starlette routes"
LOCKED = ("sqlite3.OperationalError: database is locked in the loader means two workers "
          "share features.db; set WORKERS=1")
PORT = "the staging database listens on 5432"
#: Commits whose diff stats hold the query's line number by chance.
COMMITS = [
    "Committed 1a2b3c4: fix(cli): quieter errors\nFiles:\ncore/semantic_memory/cli.py | 57 ++--",
    "Committed 5d6e7f8: docs: the service page\nFiles:\ndocs/service.md | 57 +++++++--",
    "Committed 9a8b7c6: the service answers 404 for an unknown uid\nFiles:\ncore/x.py | 12 +",
]


def test_where_words_are_addresses_and_line_numbers() -> None:
    assert where_words('File "/srv/ml/loader.py", line 120, in fetch') == {"120"}
    assert where_words("service/app.py:57 and src/a.ts:12:5 and Line 346") == {
        "57", "12", "5", "346"}
    assert where_words("<sqlite3.Connection object at 0x7f8e2c1d0b70> 0x1f") == {
        "0x7f8e2c1d0b70"}
    # a port is what a question asks about: kept
    assert where_words("localhost:18765 db.internal:5432 https://example.com:8080/x 127.0.0.1:80"
                       " which service listens on 5432?") == set()


def test_a_line_number_no_longer_outweighs_the_file_it_is_in(engine: MemoryEngine) -> None:
    """For `service/app.py:57` the 57 carried half the weight: commits whose diff stats held
    "57" were injected and the memory about app.py was not."""
    store(engine, BUILD_APP, *COMMITS, *CODE_NOTES)
    assert engine.recall("service/app.py:57", 5)[0].memory.content == BUILD_APP
    assert injected(engine, "service/app.py:57") == [BUILD_APP]


def test_a_pasted_error_with_its_address_and_line_clears_the_bar(engine: MemoryEngine) -> None:
    store(engine, LOCKED, PORT, *COMMITS, *CODE_NOTES)
    paste = ('sqlite3.OperationalError: database is locked\n  File "loader.py", line 120\n'
             "<sqlite3.Connection object at 0x7f8e2c1d0b70>")
    assert engine.recall(paste, 5)[0].memory.content == LOCKED
    assert injected(engine, paste) == [LOCKED]
    assert injected(engine, "which service listens on 5432?") == [PORT]


def test_a_longer_question_is_judged_without_its_numbers(engine: MemoryEngine) -> None:
    """A date in a question is in no memory's text: "2023" weighed most of all and kept the
    answer out. A short question keeps its number."""
    shelter = "Maria: I gave my old winter coats to the homeless shelter downtown last week"
    store(engine, shelter, PORT, "the staging database listens on 5433 since the move",
          "Maria: the shelter needs volunteers on weekends", "John: I bought a winter jacket",
          "we moved the dinner to December")
    question = "What did Maria donate to a homeless shelter in December 2023?"
    assert engine.recall(question, 5)[0].memory.content == shelter
    assert injected(engine, question)[:1] == [shelter]
    assert "2023" not in bar_terms(question)
    assert bar_terms("which service listens on 5432?") == ["service", "listens", "5432"]
    assert bar_terms("uv run pytest -n 2") == ["uv", "run", "pytest", "2"]
    assert bar_terms("0x7f8e2c1d0b70") == ["0x7f8e2c1d0b70"]  # nothing else to judge by


# --- camelCase and snake_case ---------------------------------------------------------------------

FLAKY = "the flaky test is tests/test_service_warm.py::test_warm_restart_keeps_spool"
BODY = "MEMORY_MAX_BODY_BYTES caps a REST request body (default 1 MiB)"
API = "NEXT_PUBLIC_API_BASE_URL must not end with a slash"
SPELLINGS = [
    ("testServiceWarm", FLAKY), ("maxBodyBytes", BODY), ("buildApp", BUILD_APP),
    ("apiBaseUrl", API), ("lazy_mcp", LAZY), ("get_user_account_balance", BALANCE),
    ("dataloader_v2", LOADER),
]


def test_identifier_parts_cut_where_code_does() -> None:
    assert identifier_parts("maxBodyBytes LazyMCP DataLoaderV2 MCPServer lazy_mcp") == {
        "maxbodybytes": ("max", "body", "bytes"), "lazymcp": ("lazy", "mcp"),
        "dataloaderv2": ("data", "loader", "v2"), "mcpserver": ("mcp", "server"),
        "lazy_mcp": ("lazy", "mcp")}
    assert identifier_parts("HTTP 0x7F8E2C Config python3 __init__ build") == {}


@pytest.mark.parametrize(("query", "memory"), SPELLINGS, ids=[q for q, _ in SPELLINGS])
def test_a_camel_case_query_meets_its_snake_case_memory_and_back(
        engine: MemoryEngine, query: str, memory: str) -> None:
    """The porter index holds `maxBodyBytes` as one word and `MEMORY_MAX_BODY_BYTES` as four:
    BM25 alone never brought one spelling to the other (the QA found 8 such prompts with
    nothing recalled)."""
    store(engine, FLAKY, BODY, BUILD_APP, API, LAZY, BALANCE, LOADER, *COMMITS, *CODE_NOTES)
    assert engine.recall(query, 5)[0].memory.content == memory
    assert injected(engine, query)[:1] == [memory]


def test_a_camel_case_query_needs_its_parts_in_a_row(engine: MemoryEngine) -> None:
    apart = "the build of the app takes a minute"
    store(engine, apart, *CODE_NOTES)
    assert injected(engine, "buildApp") == []


def test_postgresql_judges_identifier_parts_and_pasted_output_alike(tmp_path: Path) -> None:
    """The PostgreSQL full-text channel's bar (below its keyword mirror's size) sets aside
    what pasted output says about where and counts a part of an identifier, as the porter
    channel does: the same memories go in on both stores."""
    import pg

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), db_url=pg.new_database(),
                                   device="cpu"))
    try:
        store(engine, BALANCE, AUTH, LAZY, LOADER, BUILD_APP, *WEB_NOTES, *COMMITS)
        assert injected(engine, "AccountBalance")[:1] == [BALANCE]
        assert injected(engine, "AuthStore")[:1] == [AUTH]
        pasted = injected(engine, "service/app.py:57")
        assert pasted[:1] == [BUILD_APP] and not set(COMMITS[:2]) & set(pasted)  # not for "57"
        assert "support for the metadata import was added in the last release" not in injected(
            engine, "data")
    finally:
        engine.close()
