"""Neighbour expansion: a recalled memory brings along the memories next to it in its session.

Evidence is often next door: the answer stored one turn after the question that matched, the
chunk a compaction cut just before the hit. Memories keep their place in their session (the
agent session a harness names, else the ingest batch; `Memory.session` / `seq`). After fusion,
each of the top k hits brings up to `window` memories from each side of it, placed by rank: the
neighbour at distance d of the hit at rank r goes to rank r + gap * d, behind what is already
there, and a memory keeps its best place. Placing by rank works the same over any fusion's
scores. Score fusion's scores also say how sure each hit is, so there (`decay`) a neighbour
goes no higher than a hit scoring its hit's score * decay**d would: a clear winner brings its
neighbours right behind it, a hit in a near tie leaves the next hits before its neighbours.
Neighbours obey the recall's filters and exclusions, carry their hit's score and say whose
neighbour they are (`RecallHit.neighbour_of`). A neighbour that near-duplicates its hit or a
neighbour of that hit placed before it (`neardup`: the fact a "remember" stored, beside the
chunk a flush cut around the same prompt) is left out, and its place goes to the next memory.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from .models import Memory, RecallFilters, RecallHit
from .neardup import Shingles, near_duplicates, shingles
from .stores import MemoryStore


def expand(store: MemoryStore, conn: Any, hits: list[RecallHit], k: int, window: int,
           gap: float, filters: RecallFilters, exclude: Callable[[Memory], bool] | None = None,
           decay: float | None = None) -> list[RecallHit]:
    """The top k of `hits` (best first, by score when `decay` is given) with the neighbours of
    its hits placed among them."""
    if window <= 0:
        return hits[:k]
    # id -> (place, hit); the fraction puts a neighbour behind a hit of the same rank
    placed: dict[int, tuple[float, RecallHit]] = {}
    for rank, hit in enumerate(hits):
        placed.setdefault(hit.memory.id, (rank, hit))
    if decay is not None and decay >= 1:
        decay = None  # by rank alone
    falling = [-h.score for h in hits] if decay is not None else []  # ascending, for bisect
    near = store.adjacent(conn, [hit.memory for hit in hits[:k]], window, filters)
    for rank, hit in enumerate(hits[:k]):
        for distance, memory in near.get(hit.memory.id, []):
            place = rank + gap * distance
            if decay is not None:  # behind every hit scoring at least its decayed score
                place = max(place, bisect_right(falling, -hit.score * decay**distance) - 1)
            place += 0.5
            if memory.id in placed and placed[memory.id][0] <= place:
                continue
            if exclude is not None and exclude(memory):
                continue
            own = placed.get(memory.id)
            placed[memory.id] = (place, RecallHit(
                memory, hit.score, dict(own[1].ranks) if own else {},
                dict(own[1].signals) if own else {}, neighbour_of=hit.memory.uid))
    ordered = sorted(placed.values(), key=lambda entry: entry[0])
    return _first_distinct([hit for _, hit in ordered], k)


def _first_distinct(ordered: list[RecallHit], k: int) -> list[RecallHit]:
    """The first k of `ordered`, less each neighbour that near-duplicates its hit or another
    neighbour of that hit kept before it (the fact and the chunk around it sit side by side in
    their session). Compared within a hit's group only, so the cost stays linear in k;
    near-duplicates that meet across groups are the injection block's to collapse."""
    kept: list[RecallHit] = []
    by_uid: dict[str, RecallHit] = {}
    groups: dict[str, list[Shingles]] = {}  # a hit's uid -> its shingles, its kept neighbours'
    for hit in ordered:
        if len(kept) == k:
            break
        anchor = hit.neighbour_of
        if anchor is not None:
            group = groups.get(anchor)
            if group is None:
                own_hit = by_uid.get(anchor)
                group = groups[anchor] = [shingles(own_hit.memory.content)] if own_hit else []
            own = shingles(hit.memory.content)
            if any(near_duplicates(own, theirs) for theirs in group):
                continue
            group.append(own)
        kept.append(hit)
        by_uid[hit.memory.uid] = hit
    return kept
