"""Keyword channels alone fuse by score (MEMORY_FUSION=score, the default): their normalised
scores weigh with the channels' score weights and decay the neighbours; MEMORY_FUSION=rrf keeps
rank fusion. Real SQLite store, real porter and trigram channels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from semantic_memory.config import Settings
from semantic_memory.fusion import score_fusion
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

BM25 = "bm25_porter,bm25_trigram"


def engine(tmp_path: Path, **settings: object) -> MemoryEngine:
    eng = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), device="cpu", plugins=BM25,
                                **settings))  # type: ignore[arg-type]
    eng.ingest([NewMemory(t) for t in ("zebra crossing painted", "we met at noon", "x")])
    eng.ingest([NewMemory(t) for t in ("zebras at the zoo", "tickets were cheap", "rain")])
    eng.store_one(NewMemory("a zebra print shirt"))
    return eng


def contents(eng: MemoryEngine, k: int = 7, **settings: object) -> list[str]:
    base = eng.settings
    eng.settings = replace(base, **settings)  # type: ignore[arg-type]
    try:
        return [h.memory.content for h in eng.recall("zebra", k)]
    finally:
        eng.settings = base


def test_keyword_only_recall_fuses_the_channels_scores(tmp_path: Path) -> None:
    eng = engine(tmp_path)
    with eng.store.snapshot() as conn:
        scored = {c.name: [(h.id, h.score) for h in c.search(conn, "zebra", 50,
                                                               RecallFilters())]
                  for c in eng.channels}
    lead = eng.settings.fusion_lead
    assert lead > 0  # the default: a channel's clear leader speaks louder
    fused = score_fusion(scored, eng.score_weights, lead=lead)
    hits = eng.recall("zebra", 2)
    # the engine's top hits are score fusion's, scored as shares of the weight, each raised
    # by its channel's lead (0..1 + lead)
    assert [h.memory.id for h in hits] == [f.id for f in fused[:2]]
    assert [h.score for h in hits] == [f.score for f in fused[:2]]
    assert 0.5 < hits[0].score <= 1.0 + lead and set(hits[0].ranks) == {"porter", "trigram"}
    assert score_fusion(scored, eng.score_weights) != fused  # the lead counted here
    eng.settings = replace(eng.settings, fusion="rrf")  # rank fusion: sum of w / (60 + rank)
    top = eng.recall("zebra", 2)[0]
    assert top.score == pytest.approx(sum(eng.weights[c] / (60 + r) for c, r in top.ranks.items()))
    eng.close()


def test_keyword_only_neighbours_follow_the_decayed_score(tmp_path: Path) -> None:
    eng = engine(tmp_path)
    by_rank = contents(eng, neighbour_decay=1.0)
    assert by_rank[:3] == ["zebra crossing painted", "zebras at the zoo", "we met at noon"]
    # a neighbour at 1% of its hit's score goes behind every hit that scores more
    decayed = contents(eng, neighbour_decay=0.01)
    assert decayed.index("we met at noon") > decayed.index("a zebra print shirt")
    # rank fusion carries no confidence: its neighbours are placed by rank whatever the decay
    assert contents(eng, fusion="rrf", neighbour_decay=0.01) == contents(
        eng, fusion="rrf", neighbour_decay=1.0)
    eng.close()
