"""The relevance bar on short coding prompts (QA "tokens" report): what a hook's recall injects
(`relevant_only`) for a word the stemmer folds into a stopword ("which one?") and for a file
name (`users.py`), on a real engine over SQLite and over PostgreSQL (`both_stores`)."""

from __future__ import annotations

import pytest
from semantic_memory.keywords import file_names
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_bm25_porter import PorterChannel, folds_into_stopword

pytestmark = pytest.mark.both_stores


def injected(engine: MemoryEngine, prompt: str, project: str) -> list[str]:
    """What a hook's recall would inject: the contents of the vouched hits, k = 5."""
    hits = engine.recall(prompt, 5, RecallFilters(project=project), relevant_only=True)
    return [h.memory.content for h in hits]


def store(engine: MemoryEngine, project: str, *texts: str) -> None:
    """One ingest each, as notes stored apart: no session neighbours come along."""
    for text in texts:
        engine.ingest([NewMemory(text, kind="fact", project=project)])


def test_words_the_stemmer_folds_into_a_stopword() -> None:
    """Porter makes "one" and "ones" "on", "others" "other", "wills" "will", "ups" "up":
    words that spell no stopword but match every memory holding one."""
    for word in ("one", "ones", "others", "wills", "ups", "overs", "nots", "ins"):
        assert folds_into_stopword(word), word
    for word in ("online", "onboarding", "done", "users", "owner", "update", "py", "ts"):
        assert not folds_into_stopword(word), word
    assert PorterChannel.content_terms("which one is the other one?") == []
    assert PorterChannel.content_terms("the other ones on staging") == ["staging"]


def test_which_one_injects_nothing(engine: MemoryEngine) -> None:
    """"which one?", "this one", "the other one": before, each injected every memory holding
    "on" on SQLite (porter stems "one" to "on") and every memory holding "one" on
    PostgreSQL; a question with a content word still finds its memory."""
    store(engine, "infra",
          "Neovim: format on save is on for every Terraform file",
          "Prometheus scrapes the node exporters on port 9090",
          "Automerge is on for Renovate patch updates",
          "Only one worker runs the database migrations; the other ones wait for the lock",
          "Scale the ingest workers up over the weekend batch window")
    for prompt in ("which one?", "this one", "the other one", "the other ones",
                   "ups and overs", "one"):
        assert injected(engine, prompt, "infra") == [], prompt
    assert injected(engine, "which worker runs the migrations?", "infra") == [
        "Only one worker runs the database migrations; the other ones wait for the lock"]


def test_file_names_in_a_query() -> None:
    """`users.py` is the name "users" and the extension "py", which the bar counts only beside
    the name; dotted code that is no file name is no file name."""
    assert file_names("users.py") == {"py": {"users"}}
    assert file_names("where is next.config.js?") == {"js": {"config"}}
    assert file_names("see api/repositories/users.py:57.") == {"py": {"users"}}
    assert file_names("users.py and deps.py, Cargo.lock") == {"py": {"users", "deps"},
                                                              "lock": {"cargo"}}
    for code in ("os.path.join", "res.json()", "console.log", "process.env.NODE_ENV",
                 ".py files", "py", "version 3.11"):
        assert file_names(code) == {}, code


def test_a_file_name_injects_its_file_not_its_extension(engine: MemoryEngine) -> None:
    """`users.py` injected every memory naming some other Python file: "py" carried half of
    the query's weight, and the bar is 0.5. The file's own memory is still injected, and a
    memory naming the file's kind beside the query's other words still counts it."""
    store(engine, "api",
          "get_user_by_email in api/repositories/users.py lowercases the email first",
          "The database session comes from get_db_session() in api/deps.py",
          "Settings are loaded by pydantic BaseSettings in api/config.py",
          "Celery tasks are declared in api/tasks/mail.py and api/tasks/reports.py",
          "parse_iso8601 in api/utils/dates.py accepts a trailing Z",
          # "users"* also matches these: "user" weighs no more than "py" on a code store
          "The userId claim is read from the access token",
          "Rate limits are counted per user and per IP",
          "The admin user is seeded by the bootstrap script",
          "Every request logs its user-agent string",
          "userProfile responses are cached for a minute",
          "Deleted users are anonymised after 30 days")
    store(engine, "cli",
          "The HTTP client sets the agent header in src/http/client.rs",
          "tokio's main macro is only on src/main.rs",
          "Progress bars are drawn by indicatif in src/progress.rs",
          "Config parsing lives in src/config.rs with serde")
    assert injected(engine, "users.py", "api") == [
        "get_user_by_email in api/repositories/users.py lowercases the email first"]
    assert injected(engine, "client.rs", "cli") == [
        "The HTTP client sets the agent header in src/http/client.rs"]
    assert injected(engine, "what does deps.py provide?", "api") == [
        "The database session comes from get_db_session() in api/deps.py"]
    store(engine, "web", "tsconfig.json includes src/**/*.ts and excludes dist",
          "The tsconfig paths alias @/ maps to src/")
    assert injected(engine, "which files does tsconfig.json include?", "web")[:1] == [
        "tsconfig.json includes src/**/*.ts and excludes dist"]


def test_a_prompt_of_one_common_word_injects_nothing(engine: MemoryEngine) -> None:
    """"fix it", "run it again": one content word, so every memory holding it covered all of
    the query and up to five were injected. One content word now vouches only where it is no
    commoner than ONE_WORD_MIN_IDF allows; a rare one still does, and so does a longer
    question about the same memories."""
    store(engine, "web",
          "Fixed the hydration mismatch by moving Date.now() into a useEffect",
          "Fix for the flaky checkout test: mark it test.slow()",
          "Run the unit tests with pnpm vitest run",
          "Run Playwright with pnpm test:e2e; fix snapshots with --update",
          "Storybook runs on port 6006",
          "The env var NEXT_PUBLIC_API_BASE_URL has no trailing slash",
          "Tailwind's brand-500 colour is #4F46E5",
          "Named exports only, except for pages")
    for prompt in ("fix it", "fix that", "run it again", "please run it"):
        hits = engine.recall(prompt, 5, RecallFilters(project="web"), relevant_only=True)
        assert hits == [], (prompt, [(h.memory.content, h.signals, h.ranks) for h in hits])
    assert injected(engine, "storybook", "web") == ["Storybook runs on port 6006"]
    assert injected(engine, "how did we fix the hydration mismatch?", "web")[:1] == [
        "Fixed the hydration mismatch by moving Date.now() into a useEffect"]
