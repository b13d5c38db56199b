"""BM25 over character trigrams (FTS5 `trigram`): substrings, CJK/Thai and compound words.

Owns the external-content FTS5 table `memories_fts_tri`, kept in step with `memories` by
triggers in the writer's transaction. Each query word of 3+ characters becomes a substring
phrase; a run of CJK/Thai characters (no spaces between words) is cut into its overlapping
trigrams so that partial overlaps still match.

Ranking is BM25 with k1 = 0 (`fts5.binary_tf_search`): the summed IDF of the query substrings
a memory contains, newer first among equals. A word is a phrase of many trigrams, and FTS5's
bm25() matches every phrase twice (once over the whole index for its IDF): this matches each
once, which halves the channel's work at 1M memories. Against bm25(): LoCoMo fused R@10 61.9 vs
62.2, LoCoMo hidden among 100k synthetic memories 14.5 vs 10.3, the multilingual benchmark
unchanged (bench/README.md).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from semantic_memory import keywords
from semantic_memory.keywords import (
    UNSPACED,
    coverages,
    identifier_parts,
    trigram_terms,
    typed_forms,
)
from semantic_memory.stores.fts5 import (
    MatchCounts,
    TextMatcher,
    bounded_search,
    create_fts_table,
    fts_terms,
    idf_weights,
    unknown_word_spellings,
)
from semantic_memory.channels import Channel
from semantic_memory.config import Settings
from semantic_memory.models import ChannelHit, Memory, RecallFilters, RecallHit
from semantic_memory.hookspecs import hookimpl

TABLE = "memories_fts_tri"


class TrigramChannel(Channel):
    name = "trigram"
    stores = ("sqlite",)  # an FTS5 index in the db file
    search_on_caller_thread = True  # an FTS5 query over its own index: bounded, no hang
    #: On spaced text every trigram query term is also a porter term, matched more loosely
    #: ("tim" inside "time"), so at equal weight RRF lets this noisier copy outvote porter
    #: (LoCoMo dev R@10 60.9 fused vs 61.3 porter alone). At 0.15 it breaks porter's near-ties
    #: and fused beats porter alone (61.9); where porter finds nothing (CJK runs, substrings of
    #: identifiers and compounds) this channel's order is the fused order whatever the weight.
    #: The curve is flat from 0.1 to 0.2 (leave-one-conversation-out: docs/retrieval.md).
    weight = 0.15
    #: Under score fusion (an embedder answering) its min-max-normalised scores, the summed IDF
    #: of the substrings a memory holds, are mixed instead of its ranks, and it speaks up: at
    #: 0.75 of porter, LoCoMo dev R@10 rises 71.1 -> 72.2 with MiniLM, and R@5 70.5 -> 70.9
    #: with EmbeddingGemma at its share 0.8 (leave-one-conversation-out across both models
    #: picks 0.75 in four folds of five: docs/vector.md).
    score_weight = 0.75

    def __init__(self, min_coverage: float = Settings.inject_min_coverage) -> None:
        self.counts = MatchCounts()
        self.min_coverage = min_coverage
        self.matcher = TextMatcher("trigram")

    def setup(self, conn: sqlite3.Connection) -> None:
        create_fts_table(conn, TABLE, "trigram")

    def index(self, conn: sqlite3.Connection, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Nothing to do: the table's triggers index each insert."""

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]:
        # A trigram match costs ~2x a porter match (every trigram's positions), and at weight
        # 0.15 its order only breaks porter's near-ties on spaced text: a quarter of the work
        # budget (keywords.MATCH_BUDGET) cost no recall when it was chosen (LoCoMo dev R@10
        # 61.7 at a half, 62.0 at a quarter; LoCoMo among 100k others the same).
        return bounded_search(conn, TABLE, self.phrases(conn, query), k, filters,
                              budget=keywords.MATCH_BUDGET // 4, counts=self.counts,
                              binary_tf=True)

    def phrases(self, conn: sqlite3.Connection, query: str) -> list[str]:
        """The query's substrings as FTS5 phrases, an identifier's matching either way code
        writes it: a camelCase term also as snake_case (`max_body_bytes` for `maxBodyBytes`),
        a snake_case one also run together (`lazymcp` for `lazy_mcp`, inside `LazyMCP`: the
        index ignores case). A hash typed in full that no memory holds also matches as its
        short form (`fts5.unknown_word_spellings`: `7c3e9a1` for `7c3e9a1f0b2d`). A word typed
        in full width (folded to ASCII by `keywords.words`) also matches as typed."""
        terms = trigram_terms(query)
        other = {word: "".join(parts) if "_" in word else "_".join(parts)
                 for word, parts in identifier_parts(query).items()}
        other.update(typed_forms(query))  # before an identifier's other form: as it was
        other.update(unknown_word_spellings(conn, TABLE, [t for t in terms if t not in other],
                                            query, self.counts, compounds=False))
        return fts_terms(terms, spelled=other)

    def relevant(self, conn: sqlite3.Connection, query: str, hits: list[RecallHit]) -> set[int]:
        """For queries in scripts without spaces (Thai, CJK runs), where porter's words are
        whole runs and cannot judge: hits containing at least MEMORY_INJECT_MIN_COVERAGE of
        the query's substrings, IDF-weighted. Spaced text is porter's to judge."""
        if not UNSPACED.search(query):
            return set()
        phrases = fts_terms(trigram_terms(query))
        weights = idf_weights(conn, TABLE, phrases, self.counts, min_df=1)
        texts = {h.memory.id: h.memory.content for h in hits}
        coverage = coverages(weights, self.matcher.matching(phrases, texts), list(texts))
        return {i for i, c in coverage.items() if c >= self.min_coverage}


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(TrigramChannel(settings.inject_min_coverage))
