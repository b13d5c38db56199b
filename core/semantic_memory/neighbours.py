"""Neighbour expansion: a recalled memory brings along the memories next to it in its session.

Evidence is often next door: the answer stored one turn after the question that matched, the
chunk a compaction cut just before the hit. Memories keep their place in their session (the
agent session a harness names, else the ingest batch; `Memory.session` / `seq`). After fusion,
each of the top k hits brings up to `window` memories from each side of it, placed by rank: the
neighbour at distance d of the hit at rank r goes to rank r + gap * d, behind what is already
there, and a memory keeps its best place. Placing by rank rather than by score works the same
over any fusion's scores. Neighbours obey the recall's filters and exclusions, carry their
hit's score and say whose neighbour they are (`RecallHit.neighbour_of`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .models import Memory, RecallFilters, RecallHit
from .store import MEMORY_COLUMNS, row_to_memory

_COLUMNS = ", ".join(f"m.{column}" for column in MEMORY_COLUMNS.split(", "))


def adjacent(conn: Any, memory: Memory, window: int, filters: RecallFilters
             ) -> list[tuple[int, Memory]]:
    """(distance, memory) of the nearest `window` live memories on each side of `memory` in
    its session that pass `filters`: gaps left by forgotten or filtered memories are skipped."""
    if memory.session is None or memory.seq is None:
        return []
    where, params = filters.sql("m")
    found = []
    for op, order in (("<", "DESC"), (">", "ASC")):
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM memories m WHERE m.session = ? AND m.seq {op} ? AND {where} "
            f"ORDER BY m.seq {order} LIMIT ?", [memory.session, memory.seq, *params, window])
        found += [(distance, row_to_memory(row)) for distance, row in enumerate(rows, start=1)]
    return found


def expand(conn: Any, hits: list[RecallHit], k: int, window: int, gap: float,
           filters: RecallFilters, exclude: Callable[[Memory], bool] | None = None
           ) -> list[RecallHit]:
    """The top k of `hits` (best first) with the neighbours of its hits placed among them."""
    if window <= 0:
        return hits[:k]
    # id -> (place, hit); the fraction puts a neighbour behind a hit of the same rank
    placed: dict[int, tuple[float, RecallHit]] = {}
    for rank, hit in enumerate(hits):
        placed.setdefault(hit.memory.id, (rank, hit))
    for rank, hit in enumerate(hits[:k]):
        for distance, memory in adjacent(conn, hit.memory, window, filters):
            place = rank + gap * distance + 0.5
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
