"""Keyword arithmetic shared by every store's keyword channels: tokens, stopwords, the
substring terms of a trigram search, BM25's IDF and the work bound of an OR query. No SQL here:
the SQLite FTS5 engine is `stores/fts5.py`, PostgreSQL's lives with its store."""

from __future__ import annotations

import math
import re

_WORD = re.compile(r"\w+", re.UNICODE)

#: Short English function words: matching them says nothing about relevance.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don ll re ve d m
    o y isn aren wasn weren hasn haven hadn doesn didn won wouldn shan shouldn mustn couldn""".split()
)

#: Bounds the work a pathological (10 kB, emoji-laden) query can cause.
MAX_QUERY_TERMS = 64


def words(text: str) -> list[str]:
    """Unicode word tokens, lowercased, in order of appearance, without duplicates."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.lower()):
        seen.setdefault(match.group(), None)
    return list(seen)


#: Scripts written without spaces between words: Han, Hiragana, Katakana, Hangul, Thai, Lao,
#: Khmer, Myanmar.
UNSPACED = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    r"\uac00-\ud7af\uf900-\ufaff]"
)


def trigram_terms(query: str) -> list[str]:
    """Substrings a substring channel looks for, without duplicates: words of 3+ characters
    (no stopwords); a run of an unspaced script is cut into its overlapping 3-character pieces,
    so a partial overlap between query and memory still matches."""
    terms: dict[str, None] = {}
    for word in words(query):
        if word in STOPWORDS or len(word) < 3:
            continue
        if UNSPACED.search(word) and len(word) > 3:
            for i in range(len(word) - 2):
                terms.setdefault(word[i : i + 3], None)
        else:
            terms.setdefault(word, None)
    return list(terms)


#: Work bound of an OR query, in matching rows. BM25 scores every memory that contains any
#: query term, so on a big store one common term ("project", a speaker's name) costs more than
#: all the others together. When the terms' document frequencies add up to more than this,
#: terms are kept rarest first while they fit and the commoner rest, whose IDF is lowest, is
#: left out (the "common terms" cut of Lucene); when even the rarest term matches more, its
#: newest matches up to the budget are ranked. A query is exact whenever its terms match at
#: most this many memories, so always on a store of up to that size.
MATCH_BUDGET = 2_000
#: A cut query whose hits a narrow filter thins out below k/4 is run once more, with the
#: budget the share of matches that passed asks for, up to this multiple of MATCH_BUDGET.
MATCH_BUDGET_MAX_FACTOR = 16


def bm25_idf(docs: int, df: int) -> float:
    """BM25's IDF of a term found in `df` of `docs` documents (Lucene's form: never negative)."""
    return math.log((docs - df + 0.5) / (df + 0.5) + 1.0)


def coverages(weights: list[float], matched: list[set[int]], doc_ids: list[int]
              ) -> dict[int, float]:
    """Per document, the share of the weights of the phrases it matched (`matched[i]`: the
    documents phrase i matched)."""
    total = sum(weights)
    return {d: (sum(w for w, m in zip(weights, matched, strict=False) if d in m) / total
                if total > 0 else 0.0) for d in doc_ids}
