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

Of two near-duplicates the higher-ranked one stays, unless it is the longer one and adds
little to the other (no more shingles of its own than it shares): then the compact one takes
its place, so the block carries the fact, not the fact wrapped in a chat exchange.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .models import RecallHit

#: Words per shingle.
SHINGLE = 3
#: Share of the smaller text's shingles the other must hold for the two to be near-duplicates.
CONTAINMENT = 0.8

_WORD = re.compile(r"[^\W_]+")

Shingles = frozenset[tuple[str, ...]]


@lru_cache(maxsize=1024)
def shingles(text: str) -> Shingles:
    """The text's runs of SHINGLE (3) consecutive words (empty for a shorter text). Recall
    shingles every neighbour it keeps: spelled out for three (the generic form costs 4x), and
    remembered for the memories recalls keep bringing back."""
    words = _WORD.findall(text.lower())
    return frozenset(zip(words, words[1:], words[2:]))


def near_duplicates(a: Shingles, b: Shingles) -> bool:
    """Whether at least CONTAINMENT of the smaller set's shingles are in the other."""
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    return bool(small) and len(small & big) >= CONTAINMENT * len(small)


def adds_little(longer: Shingles, shorter: Shingles) -> bool:
    """Whether `longer` has no more shingles of its own than it shares with `shorter`."""
    shared = len(longer & shorter)
    return len(longer) > len(shorter) and len(longer) - shared <= shared


def distinct(hits: Iterable[RecallHit]) -> list[RecallHit]:
    """`hits` in order, less each one that near-duplicates one kept before it (the compact
    one of a pair takes the place of a longer one that adds little to it)."""
    kept: list[tuple[RecallHit, Shingles]] = []
    for hit in hits:
        own = shingles(hit.memory.content)
        for i, (other, theirs) in enumerate(kept):
            if near_duplicates(own, theirs):
                if adds_little(theirs, own):
                    kept[i] = (hit, own)
                break
        else:
            kept.append((hit, own))
    return [hit for hit, _ in kept]
