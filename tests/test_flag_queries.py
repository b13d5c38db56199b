"""A command-line flag of two or more words is searched and judged whole (`keywords.flags`):
`--no-verify` was the single term "verify" ("no" is a stopword, and a kebab-case word got no
phrase form), so a memory about verifying ranked above the one holding the flag, whose advice
is the opposite, and was injected with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

MEMORIES = {
    "flag": "Pushing with git push --no-verify skips the lint hook; never do it on main.",
    "bare": "Verify the signature of every release artifact.",
    "cache_flag": "Run npm ci --no-audit --no-fund in CI to keep the logs short.",
    "cache_bare": "The npm audit report goes to the security channel.",
    "long": "The migration tool prints a plan with --dry-run-plan before it writes anything.",
    "other": "Parsing the config file happens once at start-up.",
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MemoryEngine, dict]]:
    db: Path = tmp_path_factory.mktemp("flags") / "memory.db"
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu",
                                   plugins="bm25_porter,bm25_trigram"))
    uids = {key: engine.store_one(NewMemory(text, project="p")).uid
            for key, text in MEMORIES.items()}
    yield engine, uids
    engine.close()


def ranked(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query, 5, RecallFilters(project="p"))]


def injected(engine: MemoryEngine, query: str) -> list[str]:
    return [h.memory.uid for h in engine.recall(query, 5, RecallFilters(project="p"),
                                                relevant_only=True)]


@pytest.mark.parametrize(("query", "key"), [
    ("--no-verify", "flag"),
    ("why does --no-verify skip hooks?", "flag"),
    ("--no-audit", "cache_flag"),
    ("--dry-run-plan", "long"),
])
def test_the_memory_holding_the_flag_ranks_first_and_alone_is_injected(
        engine: tuple[MemoryEngine, dict], query: str, key: str) -> None:
    store, uids = engine
    assert ranked(store, query)[0] == uids[key]
    assert injected(store, query) == [uids[key]]


def test_the_bare_word_still_finds_both(engine: tuple[MemoryEngine, dict]) -> None:
    """Only a flag is kept whole: "verify" alone finds the flag's memory too."""
    store, uids = engine
    assert {uids["flag"], uids["bare"]} <= set(ranked(store, "verify"))


def test_flags_in_a_query() -> None:
    from semantic_memory.keywords import flags, trigram_terms

    assert flags("git commit --no-verify -m x --force --dry-run-plan") == [
        "no-verify", "dry-run-plan"]
    assert flags("a-b --x - --") == []  # no flag of two words, no kebab-case word
    assert trigram_terms("--no-verify hook") == ["no-verify", "hook"]
