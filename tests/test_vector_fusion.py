"""Confidence-aware fusion around the vector channel: RRF keeps its shape; the keyword fast path
when keywords lead; keyword weights gated by their evidence when the vector leads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from semantic_memory.config import Settings
from semantic_memory.embedders import Embedder
from semantic_memory.fusion import keyword_gated_weights, keyword_leads, rrf
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.hookspecs import hookimpl

pytest.importorskip("semantic_memory_vector")

KW = ["porter", "trigram"]


def test_keyword_leads_by_weight_sums() -> None:
    assert keyword_leads({"porter": 1, "trigram": 0.15, "vector": 0.3}, KW, ["vector"])
    assert not keyword_leads({"porter": 1, "trigram": 0.15, "vector": 20}, KW, ["vector"])


def test_gate_scales_keyword_weights_only_when_the_vector_leads() -> None:
    strong = {"porter": 1.0, "trigram": 0.15, "vector": 20.0}
    gated = keyword_gated_weights(strong, KW, ["vector"], 0.5, 2)
    assert gated == {"porter": 0.25, "trigram": pytest.approx(0.0375), "vector": 20.0}
    assert keyword_gated_weights(strong, KW, ["vector"], 1.0, 16) == strong  # full coverage
    assert keyword_gated_weights(strong, KW, ["vector"], 0.5, 0) == strong  # off
    assert keyword_gated_weights(strong, KW, ["vector"], None, 16) == strong  # no verdict
    assert keyword_gated_weights(strong, KW, [], 0.2, 16) == strong  # vector skipped/absent
    weak = {"porter": 1.0, "trigram": 0.15, "vector": 0.3}
    assert keyword_gated_weights(weak, KW, ["vector"], 0.1, 16) == weak  # keywords lead


def test_gated_rrf_keeps_the_leading_ranking_unless_keywords_are_complete() -> None:
    rankings = {"vector": [1, 2, 3], "porter": [3, 2, 1]}
    weights = {"porter": 1.0, "vector": 20.0}
    low = rrf(rankings, keyword_gated_weights(weights, ["porter"], ["vector"], 0.6, 16))
    assert [f.id for f in low] == [1, 2, 3]
    assert low[0].ranks == {"vector": 1, "porter": 3}  # ranks still reported


class StubEmbedder(Embedder):
    """A deterministic bag-of-letters embedder with a configurable fusion weight."""

    name = "stub"
    model_id = "stub#1"
    dim = 26
    available = True

    def __init__(self, fusion_weight: float) -> None:
        self.fusion_weight = fusion_weight
        self.queries: list[str] = []

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(26, np.float32)
        for ch in text.lower():
            if "a" <= ch <= "z":
                v[ord(ch) - 97] += 1
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vec(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self._vec(text)


def engine_with(tmp_path: Path, embedder: StubEmbedder, **kw: Any) -> MemoryEngine:
    class Provide:
        @hookimpl
        def register_embedders(self, register, settings):  # noqa: ANN001, ANN201
            register(embedder)

    settings = Settings(db_path=str(tmp_path / "m.db"), device="cpu", dedup_sim=0.0,
                        plugins="bm25_porter,bm25_trigram,vector", recall_min_cosine=0.0, **kw)
    return MemoryEngine(settings, plugins=[Provide()])


def test_embedder_fusion_weight_becomes_the_channel_weight(tmp_path: Path) -> None:
    eng = engine_with(tmp_path, StubEmbedder(20.0))
    assert eng.weights["vector"] == 20.0
    eng.close()
    eng = engine_with(tmp_path, StubEmbedder(20.0), channel_weights="vector=2")
    assert eng.weights["vector"] == 2.0  # MEMORY_CHANNEL_WEIGHTS wins
    eng.close()


def test_fast_path_only_when_keywords_lead(tmp_path: Path) -> None:
    weak = StubEmbedder(0.3)
    eng = engine_with(tmp_path / "w", weak)
    eng.ingest([NewMemory("kubernetes namespaces per team"), NewMemory("pizza on fridays")])
    eng.recall("kubernetes namespaces", 2)
    assert weak.queries == []  # confident keywords, keywords lead: no embedding
    eng.close()
    strong = StubEmbedder(20.0)
    eng = engine_with(tmp_path / "s", strong)
    eng.ingest([NewMemory("kubernetes namespaces per team"), NewMemory("pizza on fridays")])
    hits = eng.recall("kubernetes namespaces", 2)
    assert strong.queries == ["kubernetes namespaces"]  # the vector leads: always asked
    assert hits[0].memory.content == "kubernetes namespaces per team"
    eng.close()


def test_score_fusion_mixes_the_channels_score_weights(tmp_path: Path) -> None:
    """Trigram weighs 0.15 in rank fusion and 0.75 in score fusion; the override sets both."""
    texts = ["getUserAccountBalance() via the ledger: wrapped with xyz hooks, fixed by kim jo "
             "with zoom, quiz, jazz, fuzzy sky", "balance account", "weekly pizza order"]
    eng = engine_with(tmp_path / "d", StubEmbedder(0.3), fusion_vector_share=0.25)
    assert (eng.weights["trigram"], eng.score_weights["trigram"]) == (0.15, 0.75)
    assert {"name": "trigram", "weight": 0.15, "score_weight": 0.75, "status": None} \
        in eng.stats()["channels"]
    eng.ingest([NewMemory(t) for t in texts])
    # Only trigram finds the identifier (a substring); the vector ranks the anagram first
    # (cosine 1), the identifier second (0.56, min-max 0.37 over 0.30 to 1). Trigram's share
    # is 0.75 * 0.75/1.75 = 0.32: the identifier scores 0.32 + 0.25 * 0.37 > 0.25.
    hits = eng.recall("AccountBalance", 2)
    assert [h.memory.content for h in hits] == texts[:2]
    assert hits[0].ranks == {"trigram": 1, "vector": 2}
    eng.close()
    eng = engine_with(tmp_path / "o", StubEmbedder(0.3), fusion_vector_share=0.25,
                      channel_weights="trigram=0.15")
    assert eng.score_weights["trigram"] == 0.15  # the override holds for both fusions
    # trigram's share 0.75 * 0.15/1.15 = 0.10: the identifier scores 0.10 + 0.09 < 0.25
    eng.ingest([NewMemory(t) for t in texts])
    assert [h.memory.content for h in eng.recall("AccountBalance", 2)] == texts[1::-1]
    eng.close()


def test_score_fusion_places_neighbours_by_decayed_score(tmp_path: Path) -> None:
    def contents(eng: MemoryEngine, decay: float) -> list[str]:
        eng.settings = replace(eng.settings, neighbour_decay=decay)
        return [h.memory.content for h in eng.recall("zebra", 7)]

    for fast_path in (False, True):
        eng = engine_with(tmp_path / str(fast_path), StubEmbedder(0.3), fast_path=fast_path)
        eng.ingest([NewMemory(t) for t in ("zebra crossing painted", "we met at noon", "x")])
        eng.ingest([NewMemory(t) for t in ("zebras at the zoo", "tickets were cheap", "rain")])
        eng.store_one(NewMemory("a zebra print shirt"))
        by_rank = contents(eng, 1.0)
        assert by_rank[:3] == ["zebra crossing painted", "zebras at the zoo", "we met at noon"]
        # score fusion, of the keyword channels alone too when confident keywords skip the
        # embedding: a neighbour at 1% of its hit's score goes behind every hit
        decayed = contents(eng, 0.01)
        assert decayed.index("we met at noon") > decayed.index("a zebra print shirt")
        eng.settings = replace(eng.settings, fusion="rrf")  # rank fusion: no decay
        assert contents(eng, 0.01) == contents(eng, 1.0)
        eng.close()
