"""Global memories (stored without a project) belong to every project: a project's recall, and
so every hook's injection, brings those a channel vouches for, on both stores."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from semantic_memory.channels import Channel
from semantic_memory.config import Settings
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import ChannelHit, Memory, NewMemory, RecallFilters, RecallHit
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores

WEB = RecallFilters(project="web")
PREFERENCE = "Documentation pages use British spelling: colour, licence, behaviour"
QUESTION = "which spelling does the documentation use?"


def uids(hits: list[RecallHit]) -> list[str]:
    return [h.memory.uid for h in hits]


def test_a_projects_recall_brings_the_global_memories_that_match(engine: MemoryEngine) -> None:
    preference = engine.store_one(NewMemory(PREFERENCE, kind="preference")).uid
    web = engine.store_one(NewMemory("The web documentation is built by mkdocs", project="web"))
    other = engine.store_one(NewMemory("The api documentation spelling check runs codespell",
                                       project="api"))
    listed = uids(engine.recall(QUESTION, k=5, filters=WEB))
    assert preference in listed and web.uid in listed and other.uid not in listed
    # What a hook injects: the relevance bar, then the block.
    injected = engine.recall(QUESTION, k=5, filters=WEB, relevant_only=True)
    assert preference in uids(injected)
    assert PREFERENCE in engine.injection(QUESTION, injected, 2_000).text
    # Asked for, the project alone; the other filters hold for global memories too.
    assert preference not in uids(engine.recall(QUESTION, k=5, filters=WEB, with_global=False))
    facts = RecallFilters(project="web", kind="fact")
    assert uids(engine.recall(QUESTION, k=5, filters=facts)) == [web.uid]
    # Without a project filter nothing changes: every memory is in reach already.
    assert set(uids(engine.recall(QUESTION, k=5))) == {preference, web.uid, other.uid}


def test_a_global_memory_joins_only_when_a_channel_vouches_for_it(engine: MemoryEngine) -> None:
    """A search of a few global memories tops its own list with whatever shares a word; only
    the relevance bar may let one into a project's recall."""
    engine.store_one(NewMemory("Lunch on Fridays is at the noodle bar near the station"))
    port = engine.store_one(NewMemory("The staging database listens on port 5433",
                                      project="web")).uid
    query = "which port does the staging database use on Fridays?"
    assert uids(engine.recall(query, k=5, filters=WEB)) == [port]
    assert len(engine.recall(query, k=5)) == 2  # unfiltered, both are listed


def test_forgotten_superseded_and_restated_global_memories_stay_out(
        engine: MemoryEngine) -> None:
    old = engine.store_one(NewMemory("Release notes are written in the CHANGELOG.md file",
                                     kind="decision")).uid
    new = engine.store_one(NewMemory("Release notes are written in docs/releases.md",
                                     kind="decision", replaces=old)).uid
    gone = engine.store_one(NewMemory("Release notes need a reviewer sign-off")).uid
    engine.forget(gone)
    same = "Release notes list every breaking change first"
    own = engine.store_one(NewMemory(same, project="web")).uid
    twin = engine.store_one(NewMemory(same)).uid
    assert twin != own
    listed = uids(engine.recall("where are the release notes written", k=10, filters=WEB))
    assert new in listed and own in listed
    # superseded, forgotten, or saying word for word what the project's own memory says
    assert old not in listed and gone not in listed and twin not in listed


def test_a_projects_own_word_overrides_a_global_memory(engine: MemoryEngine, settings) -> None:
    """A project's memory that restates a global one with changed details (the rule that
    supersedes within a project) holds in that project, whichever is newer; elsewhere the
    global one still holds."""
    own = engine.store_one(NewMemory("The staging database listens on port 5433",
                                     project="web")).uid
    shared = engine.store_one(NewMemory("The staging database listens on port 5432")).uid
    query = "which port does the staging database listen on?"
    assert uids(engine.recall(query, k=5, filters=WEB, relevant_only=True)) == [own]
    assert uids(engine.recall(query, k=5, filters=RecallFilters(project="api"),
                              relevant_only=True)) == [shared]
    # Not another kind's, nor with supersession off.
    note = engine.store_one(NewMemory("The staging database listens on port 5431",
                                      kind="note")).uid
    assert note in uids(engine.recall(query, k=5, filters=WEB))
    engine.settings = replace(settings, supersede=False)
    assert shared in uids(engine.recall(query, k=5, filters=WEB))


def test_every_channel_keeps_to_the_global_memories_when_asked(engine: MemoryEngine) -> None:
    """`RecallFilters(global_only=True)` (a filter with no parameter) narrows every channel,
    including the unfiltered fast paths that rank the whole index alone: the global memories'
    id range here holds every project's memory too."""
    first = engine.store_one(NewMemory("kafka consumer lag alerts page the on-call")).uid
    engine.ingest([NewMemory(f"kafka consumer lag in group {i}", project=f"p{i % 3}")
                   for i in range(30)])
    last = engine.store_one(NewMemory("kafka lag dashboards live in grafana")).uid
    active = [c for c in engine.channels if c.active]
    assert active
    with engine.store.snapshot() as conn:
        shared = {i for i, m in engine.store.load(conn, list(range(1, 40))).items()
                  if m.uid in (first, last)}
        assert len(shared) == 2
        assert engine.store.any_live(conn, RecallFilters(global_only=True))
        for channel in active:
            if not channel.search(conn, "kafka consumer lag", 10, RecallFilters()):
                continue  # bigram reads CJK only
            hits = channel.search(conn, "kafka consumer lag", 10, RecallFilters(global_only=True))
            assert {h.id for h in hits} == shared, channel.name
        assert not engine.store.any_live(conn, RecallFilters(project="nowhere"))


class _Careless(Channel):
    """A third-party channel that reads no filter: every memory holding the query's first
    word, whatever its project."""

    name = "careless"

    def setup(self, conn: Any) -> None: ...
    def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None: ...
    def forget(self, conn: Any, ids: list[int]) -> None: ...

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> list[ChannelHit]:
        rows = conn.execute("SELECT id FROM memories WHERE content LIKE ? LIMIT ?",
                            (f"%{query.split()[0]}%", k)).fetchall()
        return [ChannelHit(id=row[0], score=1.0) for row in rows]

    @hookimpl
    def register_channels(self, register: Any, settings: Settings) -> None:
        register(self)


@pytest.mark.sqlite_only  # the channel speaks SQLite
def test_a_channel_that_ignores_the_filter_brings_no_other_project(settings: Settings) -> None:
    engine = MemoryEngine(settings, plugins=[_Careless()])
    try:
        other = engine.store_one(NewMemory("kafka lag alerts page the api on-call",
                                           project="api")).uid
        engine.store_one(NewMemory("kafka lag dashboards live in grafana"))  # a global one
        hits = engine.recall("kafka lag alerts", k=5, filters=WEB, relevant_only=True)
        assert other not in uids(hits)
    finally:
        engine.close()


def test_a_filter_takes_a_project_or_global_only() -> None:
    with pytest.raises(ValueError):
        RecallFilters(project="web", global_only=True)
    assert RecallFilters(global_only=True).narrows and RecallFilters(project="web").narrows
    assert not RecallFilters().narrows and not RecallFilters(include_superseded=True).narrows
    where, params = RecallFilters(global_only=True).sql("m")
    assert "m.project IS NULL" in where and params == []
