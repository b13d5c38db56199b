"""The relevance bar on short coding prompts (QA "tokens" report): what a hook's recall injects
(`relevant_only`) for a word the stemmer folds into a stopword ("which one?") and for a file
name (`users.py`), on a real engine over SQLite and over PostgreSQL (`both_stores`)."""

from __future__ import annotations

import pytest
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
