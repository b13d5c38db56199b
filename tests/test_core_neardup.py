"""No fact twice in one injection block: the near-duplicate rule (word-shingle containment), the
block the engine builds, neighbour expansion, and `/recall`'s `block_uids` of a real service."""

from __future__ import annotations

from pathlib import Path

import pytest
from semantic_memory.models import Memory, NewMemory, RecallHit
from semantic_memory.neardup import adds_little, distinct, near_duplicates, shingles
from semantic_memory.pipeline import MemoryEngine
from test_service_support import start_service

pytestmark = pytest.mark.both_stores

FACT = "the deploy freeze starts on Fridays at noon"
CHUNK = f"User: remember that {FACT}\nAssistant: Noted."
LONG_CHUNK = (f"User: what should I know before Friday's release?\nAssistant: Two things: "
              f"{FACT}, and the release checklist now needs a sign-off from the payments team "
              "before the canary goes out; ask Dana on the platform channel for it.")
SESSION = "claude-code:s1"


def hit(uid: str, content: str, score: float = 1.0, neighbour_of: str | None = None) -> RecallHit:
    memory = Memory(id=hash(uid) % 10_000, uid=uid, content=content, kind="note", source="chat",
                    project=None, tags=[], created_at=0.0, updated_at=0.0)
    return RecallHit(memory, score, neighbour_of=neighbour_of)


@pytest.mark.sqlite_only
@pytest.mark.parametrize(("a", "b", "same"), [
    (FACT, FACT, True),
    (FACT, f"  {FACT.upper()}! ", True),  # case, spacing and punctuation do not count
    (FACT, CHUNK, True),  # one inside the other
    (FACT, LONG_CHUNK, True),  # however long the other is
    (FACT, "the deploy freeze starts on Mondays at noon", False),  # 3 of 6 shingles left
    # One word changed in twenty: 15 of 18 shingles left.
    ("Use pnpm, not npm, in the web repository and in every package of it, because the "
     "lockfile is pnpm's", "Use pnpm, not npm, in the web repository and in every package of "
     "it, since the lockfile is pnpm's", True),
    (FACT, "Redis fixture database 7 pins the flaky checkout test", False),
    ("ok thanks", "ok thanks for the help", False),  # under three words: no one's duplicate
])
def test_near_duplicates_by_shingle_containment(a: str, b: str, same: bool) -> None:
    assert near_duplicates(shingles(a), shingles(b)) is same
    assert near_duplicates(shingles(b), shingles(a)) is same


@pytest.mark.sqlite_only
def test_distinct_keeps_rank_order_and_prefers_the_compact_fact() -> None:
    # The chunk ranks first but adds only "User: remember that … Assistant: Noted.": the fact
    # takes its place.
    fact, chunk, other = hit("f", FACT), hit("c", CHUNK), hit("o", "Pin the Redis fixture to db 7")
    assert adds_little(shingles(CHUNK), shingles(FACT))
    assert [h.memory.uid for h in distinct([chunk, other, fact])] == ["f", "o"]
    assert [h.memory.uid for h in distinct([fact, other, chunk])] == ["f", "o"]
    # A longer memory that carries much more than the fact stays where it ranks, and the fact,
    # which it holds, goes.
    long = hit("l", LONG_CHUNK)
    assert not adds_little(shingles(LONG_CHUNK), shingles(FACT))
    assert [h.memory.uid for h in distinct([long, fact, other])] == ["l", "o"]
    assert [h.memory.uid for h in distinct([fact, long, other])] == ["f", "o"]
    assert distinct([]) == []


def store_session(engine: MemoryEngine) -> tuple[str, str]:
    """A "remember" fact and, next to it in the same session, the flush chunk around it."""
    fact, chunk = engine.ingest([NewMemory(FACT, kind="fact", session=SESSION),
                                 NewMemory(CHUNK, kind="note", source="compaction",
                                           session=SESSION)])
    assert fact.status == chunk.status == "new"
    return str(fact.uid), str(chunk.uid)


def test_a_block_never_holds_the_fact_twice(engine: MemoryEngine) -> None:
    fact_uid, chunk_uid = store_session(engine)
    engine.ingest([NewMemory("The staging database runs PostgreSQL 16 on port 5433")])
    for relevant_only in (False, True):
        hits = engine.recall("when does the deploy freeze start?", k=5,
                             relevant_only=relevant_only)
        assert {fact_uid, chunk_uid} <= {h.memory.uid for h in hits}  # both found
        block = engine.injection_block("when does the deploy freeze start?", hits, 2000)
        assert block.count(FACT) == 1, block
        assert fact_uid in block and chunk_uid not in block


def test_a_neighbour_that_repeats_a_hit_leaves_its_place_to_the_next(engine: MemoryEngine
                                                                     ) -> None:
    fact_uid, chunk_uid = store_session(engine)
    [other] = engine.ingest([NewMemory("The release calendar lives in the ops wiki",
                                       session=SESSION)])
    # "noted" is only in the chunk: the fact and the wiki note come along as its neighbours,
    # and the fact, which the chunk holds, is left out.
    hits = engine.recall("noted", k=5)
    assert [(h.memory.uid, h.neighbour_of) for h in hits] == [
        (chunk_uid, None), (other.uid, chunk_uid)]


@pytest.mark.sqlite_only
def test_recall_block_uids_name_what_the_block_holds(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        with service.client() as http:
            batch = [{"content": FACT, "kind": "fact", "session": SESSION},
                     {"content": CHUNK, "source": "compaction", "session": SESSION}]
            stored = http.post("/ingest", json={"items": batch}).json()["results"]
            answer = http.post("/recall", json={
                "query": "when does the deploy freeze start?", "k": 5,
                "budget_chars": 2000}).json()
    finally:
        service.stop()
    fact_uid = stored[0]["uid"]
    assert answer["block"].count(FACT) == 1
    assert answer["block_uids"] == [fact_uid]
    assert {i["uid"] for i in answer["items"]} <= {fact_uid, stored[1]["uid"]}
