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
neighbour they are (`RecallHit.neighbour_of`).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from .models import Memory, RecallFilters, RecallHit
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
    for rank, hit in enumerate(hits[:k]):
        for distance, memory in store.adjacent(conn, hit.memory, window, filters):
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
    return [hit for _, hit in ordered[:k]]
