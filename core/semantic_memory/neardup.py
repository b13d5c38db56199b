"""Near-duplicate memories: what one recall answer or injection block must not hold twice.

The same fact often lives in two memories: a "remember …" prompt stored as a fact and the
transcript chunk a later flush cut around the same prompt, or a fact stored again in other
words around the same sentence. Injecting both spends the block's budget on the fact twice.

The measure is word-shingle containment, cheap and order-aware: a text's shingles are its
runs of SHINGLE consecutive words (lowercased letters and digits). Two memories are
near-duplicates when at least CONTAINMENT of the smaller one's shingles occur in the other:
identical texts, one text inside the other ("the freeze starts Fridays at noon" inside
"User: remember that the freeze starts Fridays at noon / Assistant: Noted."), or a long
text with a word changed (each changed word takes up to SHINGLE shingles). A memory of fewer
than SHINGLE words is no one's duplicate (three common words say nothing); exact copies of
those are the formatter's to drop.

Two memories from outside the conversation (`supersede.untrusted`: a tool's output, a file, a
web page) whose texts differ only in words holding a digit (numbers, versions, hashes, ids,
build and line numbers) are one text run again, a test run or a build read twice: such
*reruns* count as near-duplicates too (`template`). Sixty tool captures "deploy staging with
./deploy-helper.sh variant N (build M)" otherwise took every slot of a block from the user's
own decision. A family takes one slot, held by its best-ranked member (a query naming `py311`
keeps the py311 run, so parallel jobs stay recallable); only `same_template`, which lets a
write supersede, is narrower: counts may differ, identifiers (`py311`, `:8081`) may not. What
the user said is left alone: "release 1 ships from narwhal-1" and "release 2 ships from
narwhal-2" are two facts. Only digit-free words are compared, so "Postgres" against "MySQL"
stays two texts (`supersede.py`'s wider notion of a volatile token, names included, would
merge them).

Of two near-duplicates (in words) the higher-ranked one stays, unless it is the longer one and adds
little to the other (no more shingles of its own than it shares): then the compact one takes
its place, so the block carries the fact, not the fact wrapped in a chat exchange.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .models import Memory, RecallHit
from .supersede import untrusted

#: Words per shingle.
SHINGLE = 3
#: Share of the smaller text's shingles the other must hold for the two to be near-duplicates.
CONTAINMENT = 0.8

_WORD = re.compile(r"[^\W_]+")
_DIGIT = re.compile(r"\d")

Shingles = frozenset[tuple[str, ...]]


@lru_cache(maxsize=1024)
def shingles(text: str) -> Shingles:
    """The text's runs of SHINGLE (3) consecutive words (empty for a shorter text). Recall
    shingles every neighbour it keeps: spelled out for three (the generic form costs 4x), and
    remembered for the memories recalls keep bringing back."""
    words = _WORD.findall(text.lower())
    return frozenset(zip(words, words[1:], words[2:]))


@lru_cache(maxsize=1024)
def template(text: str) -> Shingles:
    """`shingles` of the text with every word that holds a digit read as one placeholder:
    what two runs of one template share."""
    words = ["#" if _DIGIT.search(w) else w for w in _WORD.findall(text.lower())]
    return frozenset(zip(words, words[1:], words[2:]))


def probe(text: str, words: int) -> str:
    """The text's first `words` words that hold no digit: what every run of its template
    says, as a short search query."""
    return " ".join([w for w in _WORD.findall(text) if not _DIGIT.search(w)][:words])


def variant(a: str, b: str) -> bool:
    """Whether two texts are near-duplicates once their digit-holding words are set aside."""
    return near_duplicates(template(a), template(b))


def rerun(a: Memory, b: Memory) -> bool:
    """Whether two untrusted memories are `variant`s without being near-duplicates in their
    words: the pairs only the digit-blind reading joins."""
    return untrusted(a.source) and untrusted(b.source) and variant(a.content, b.content) \
        and not near_duplicates(shingles(a.content), shingles(b.content))


def same_template(a: str, b: str) -> bool:
    """Whether two texts differ in nothing but counts (word order and repeats aside): one
    template run twice. A differing identifier (`py311`, `python3.12`, `3.11`, `:8081`,
    `port 8082`, `deploy-7.md`) makes them parallel facts, not a rerun: the tox job, the
    instance or the interpreter is what the capture is about."""
    if not template(a) or template(a) != template(b):
        return False
    return all(map(_count, _numbered(a) ^ _numbered(b)))


#: Tokens as a reader splits them: paths, versions and host:port stay one token.
_TOKEN = re.compile(r"[^\s/\\(){}\[\]<>\"'`,;=|]+")
#: A count or a measure: 412, 1,024, 38s, 1.5s, 92.3%, 12ms (a bare 3.11 is a version).
_COUNT = re.compile(r"\d[\d,_]*|\d+(?:\.\d+)?(?:ms|s|sec|min|m|h|%|x|kb|mb|gb)", re.I)
_PORT = re.compile(r"\bports?\W*$", re.I)


def _numbered(text: str) -> frozenset[str]:
    """The text's digit-holding tokens, each with what precedes it marked when that makes
    a number an identifier (":8081", "port 8081")."""
    out = set()
    for match in _TOKEN.finditer(text):
        token = match.group().rstrip(".:!?")
        if _DIGIT.search(token):
            before = text[max(0, match.start() - 8):match.start()]
            out.add("port " + token if _PORT.search(before) else token)
    return frozenset(out)


def _count(token: str) -> bool:
    """Whether a differing token is a count or a measure, not an identifier."""
    return _COUNT.fullmatch(token) is not None


def near_duplicates(a: Shingles, b: Shingles) -> bool:
    """Whether at least CONTAINMENT of the smaller set's shingles are in the other."""
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return bool(small) and len(small & big) >= CONTAINMENT * len(small)


def adds_little(longer: Shingles, shorter: Shingles) -> bool:
    """Whether `longer` has no more shingles of its own than it shares with `shorter`."""
    shared = len(longer & shorter)
    return len(longer) > len(shorter) and len(longer) - shared <= shared


def distinct(hits: Iterable[RecallHit]) -> list[RecallHit]:
    """`hits` in order, less each one that near-duplicates one kept before it, or is a
    `rerun` of it (the compact one of a pair takes the place of a longer one that adds
    little to it)."""
    kept: list[tuple[RecallHit, Shingles]] = []
    for hit in hits:
        own = shingles(hit.memory.content)
        for i, (other, theirs) in enumerate(kept):
            if near_duplicates(own, theirs):
                if adds_little(theirs, own):
                    kept[i] = (hit, own)
                break
            if rerun(hit.memory, other.memory):  # the better-ranked run holds the slot
                break
        else:
            kept.append((hit, own))
    return [hit for hit, _ in kept]
