"""BM25 over English-stemmed words (FTS5 `porter unicode61`): the keyword channel.

Owns the external-content FTS5 table `memories_fts`, kept in step with `memories` by triggers in
the writer's transaction. Queries are the OR of the query's non-stopword terms; a term of
PREFIX_MIN+ letters also matches as a (stemmed) prefix, so "health" finds "healthy" and "paint"
finds "painting"/"painter", and identifiers' prefixes match ("user" -> "username"). A word no
memory holds is also searched as a compound typed otherwise ("healthcheck" as "health check")
or as the short form of a hash typed in full (`PorterChannel.spellings`). On a big
store the commonest terms are left out of the OR (`fts5.bounded_search`). With query feedback
(MEMORY_QUERY_FEEDBACK, off by default) the words its first hits add are searched again.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from typing import Any

from semantic_memory.keywords import (
    ONE_WORD_MIN_IDF,
    STOPWORDS,
    bar_terms,
    coverages,
    flags,
    hold_extensions_with_names,
    identifier_parts,
    part_starts,
    typed_forms,
    without_flags,
    words,
)
from semantic_memory.stores.fts5 import (
    MatchCounts,
    TextMatcher,
    bounded_search,
    create_fts_table,
    feedback_words,
    fts_phrase,
    fts_terms,
    idf_coverage,
    idf_weights,
    unknown_word_spellings,
    whole_span,
)
from semantic_memory.channels import Channel, Confident
from semantic_memory.config import Settings
from semantic_memory.fusion import rrf
from semantic_memory.models import ChannelHit, Memory, RecallFilters, RecallHit
from semantic_memory.hookspecs import hookimpl

TABLE = "memories_fts"
TOKENIZE = "porter unicode61 remove_diacritics 2"
#: Shortest query term that also matches as a prefix (LoCoMo dev R@10 +0.7, bench/README.md).
PREFIX_MIN = 4
#: Query feedback: the FEEDBACK_WORDS best feedback words of the first FEEDBACK_HITS hits are
#: searched again, and that ranking joins the first at FEEDBACK_WEIGHT (RRF within the channel).
#: Chosen on LoCoMo dev without neighbours by leave-one-conversation-out on R@10
#: (docs/retrieval.md#query-feedback).
FEEDBACK_HITS, FEEDBACK_WORDS, FEEDBACK_WEIGHT = 2, 8, 0.3
#: The English stopwords as one text, tokenized as the index tokenizes: a query word that
#: matches it is one the stemmer folds into a stopword (`folds_into_stopword`).
_STOPWORD_TEXT = " ".join(sorted(STOPWORDS))
_STOPWORD_MATCHER = TextMatcher(TOKENIZE)


@functools.lru_cache(maxsize=4096)
def folds_into_stopword(word: str) -> bool:
    """Whether the index's stemmer makes `word` (lower-cased, as `keywords.words` gives it)
    a stopword: "one" and "ones" -> "on", "others" -> "other", "wills" -> "will", "ups" ->
    "up", "res" -> "re". Such a word matches every memory holding the stopword, so "which
    one?" found "on" in almost every memory and vouched for five of them."""
    return bool(_STOPWORD_MATCHER.matching([fts_phrase(word)], {0: _STOPWORD_TEXT})[0])


def flag_phrases(query: str) -> list[str]:
    """The query's multi-word flags (`keywords.flags`), each as the phrase of its words
    (`--no-verify` -> "no verify", which matches `--no-verify` and "no verify"): apart, "no"
    was a stopword and "verify" found every memory about verifying, above the one holding
    the flag, whose advice is the opposite."""
    return [" ".join(words(flag)) for flag in flags(query)]


class PorterChannel(Channel, Confident):
    name = "porter"
    stores = ("sqlite",)  # an FTS5 index in the db file
    search_on_caller_thread = True  # an FTS5 query over its own index: bounded, no hang
    weight = 1.0

    def __init__(self, min_coverage: float = Settings.inject_min_coverage,
                 feedback: bool = False) -> None:
        self.counts = MatchCounts()
        self.min_coverage = min_coverage
        self.feedback = feedback
        self.matcher = TextMatcher(TOKENIZE)

    def setup(self, conn: sqlite3.Connection) -> None:
        create_fts_table(conn, TABLE, TOKENIZE)

    def index(self, conn: sqlite3.Connection, memories: list[Memory],
              prepared: Sequence[Any] | None = None) -> None:
        """Nothing to do: the table's triggers index each insert."""

    def phrases(self, conn: sqlite3.Connection, query: str) -> list[str]:
        """The query's search terms as FTS5 phrases (`spellings`)."""
        terms = self.terms(query)
        return fts_terms(terms, prefix_min=PREFIX_MIN, spelled=self.spellings(conn, terms, query))

    def spellings(self, conn: sqlite3.Connection, terms: list[str], query: str
                  ) -> dict[str, str]:
        """Another spelling of `terms` (words of `query`) that each also matches as, one FTS5
        phrase with it (`fts5.fts_terms`): counted, weighed and judged by the relevance bar
        once. An identifier's in the other way code writes it: the index holds a word as
        written, `maxBodyBytes` one word and `MEMORY_MAX_BODY_BYTES` four, so a camelCase term
        also matches its parts in a row ("max body bytes": snake_case, kebab-case, spaced) and
        a snake_case one its parts run together ("lazymcp" for `lazy_mcp`: camelCase). A word
        the index holds nowhere (`fts5.unknown_word_spellings`): as a compound typed otherwise
        ("healthcheck" also as "health check", `health-check`; "scaler" of "auto scaler" as
        "autoscaler"), a hash typed in full as its short form (`7c3e9a1` for
        `7c3e9a1f0b2d`). A word typed in full width (`Ｅ１０２４`, searched as `e1024`) also as
        typed (`keywords.typed_forms`): the index holds a full-width memory as written."""
        other = {word: "".join(parts) if "_" in word else " ".join(parts)
                 for word, parts in identifier_parts(query).items()}
        other.update(typed_forms(query))  # before an identifier's other form: as it was
        other.update(unknown_word_spellings(conn, TABLE, [t for t in terms if t not in other],
                                            query, self.counts, PREFIX_MIN))
        return other

    def match_expression(self, conn: sqlite3.Connection, query: str) -> str:
        """The exact OR query (search() drops the commonest terms on a big store)."""
        return " OR ".join(self.phrases(conn, query))

    def search(
        self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
    ) -> list[ChannelHit]:
        hits = bounded_search(conn, TABLE, self.phrases(conn, query), k, filters, rescore=True,
                              counts=self.counts)
        if not self.feedback or not hits:
            return hits
        extra = feedback_words(conn, TABLE, query, [h.id for h in hits[:FEEDBACK_HITS]],
                               FEEDBACK_WORDS, self.counts)
        if not extra:
            return hits
        again = bounded_search(conn, TABLE, fts_terms(extra, prefix_min=PREFIX_MIN), k, filters,
                               rescore=True, counts=self.counts)
        fused = rrf({"query": [h.id for h in hits], "feedback": [h.id for h in again]},
                    {"feedback": FEEDBACK_WEIGHT}, limit=k)
        return [ChannelHit(id=f.id, score=f.score) for f in fused]

    @staticmethod
    def terms(query: str) -> list[str]:
        """What search and `confidence` weigh: the query's multi-word flags, each one phrase
        of its words (`flag_phrases`), and its other words but English stopwords (all of them
        if that leaves none)."""
        terms = words(without_flags(query))
        return flag_phrases(query) + ([t for t in terms if t not in STOPWORDS] or terms)

    @staticmethod
    def content_terms(query: str) -> list[str]:
        """What the relevance bar weighs (`keywords.bar_terms`: the query's words but function
        words, English and those of de, fr, es, pt, it and ru, and what pasted output says
        about where), less the words the stemmer folds into a stopword
        (`folds_into_stopword`); a multi-word flag is one phrase, as search weighs it. PostgreSQL's full-text channel weighs the same words."""
        return flag_phrases(query) + [t for t in bar_terms(without_flags(query))
                                      if not folds_into_stopword(t)]

    def confidence(self, conn: sqlite3.Connection, query: str, ids: list[int]) -> float | None:
        """IDF coverage of the query by the best hit (the engine's keyword fast path)."""
        if not ids:
            return 0.0
        return idf_coverage(conn, TABLE, self.terms(query), ids[0], self.counts)

    def relevant(self, conn: sqlite3.Connection, query: str, hits: list[RecallHit]) -> set[int]:
        """Hits containing at least MEMORY_INJECT_MIN_COVERAGE of the query, IDF-weighted (the
        bar for injecting); each hit's coverage goes into its signals. A term matches as the
        search matches it (stemmed, prefixes of PREFIX_MIN+ letters), and a term of
        PREFIX_MIN+ letters also where a part of an identifier starts with it
        (`keywords.starts_a_part`): the index holds `getUserAccountBalance` as one word, so
        what the trigram channel found for "AccountBalance" never cleared the bar. Function
        words are set aside (`content_terms`): one no memory holds weighed most of all ("Wie
        starten wir den Server neu?" missed the bar), and one the stemmer makes a stopword
        ("one" -> "on") is held by almost every memory. A file name's extension counts only
        where its name is held too (`keywords.hold_extensions_with_names`). A query of one
        content word vouches only for a word no commoner than ONE_WORD_MIN_IDF says, or one a
        single memory holds (a store of a few memories), since every memory holding "fix"
        covers all of "fix it". A query of function words alone
        ("why?", "do it", "which one?", "wie geht's?") vouches for nothing: a memory holding
        "why" is no answer to it, and its session's neighbours came along with it."""
        terms = self.content_terms(query)
        if not terms:
            for hit in hits:
                hit.signals["coverage"] = 0.0
            return set()
        phrases = fts_terms(terms, prefix_min=PREFIX_MIN,
                            spelled=self.spellings(conn, terms, query))
        weights = idf_weights(conn, TABLE, phrases, self.counts, min_df=1)
        if (len(terms) == 1 and weights[0] < ONE_WORD_MIN_IDF
                and self.counts.count(conn, TABLE, phrases[0], 2, whole_span(conn)) > 1):
            for hit in hits:
                hit.signals["coverage"] = 0.0
            return set()
        texts = {h.memory.id: h.memory.content for h in hits}
        matched = self.matcher.matching(phrases, texts)
        for ids, parts in zip(matched, part_starts(terms, texts, PREFIX_MIN), strict=False):
            ids |= parts
        hold_extensions_with_names(query, {t: i for i, t in enumerate(terms[:len(matched)])},
                                   matched)
        coverage = coverages(weights, matched, list(texts))
        for hit in hits:
            hit.signals["coverage"] = coverage[hit.memory.id]
        return {i for i, c in coverage.items() if c >= self.min_coverage}


@hookimpl
def register_channels(register, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    register(PorterChannel(settings.inject_min_coverage, settings.query_feedback))
