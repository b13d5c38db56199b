"""Reciprocal Rank Fusion with per-channel weights."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Fused:
    id: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(
    rankings: dict[str, list[int]], weights: dict[str, float] | None = None, k: int = 60
) -> list[Fused]:
    """Fuse ranked id lists: score(d) = sum over channels c of w_c / (k + rank_c(d)).

    Ranks are 1-based. A channel without a weight counts 1.0; weight 0 keeps its ranks for
    reporting but adds nothing. Ties keep the order of first appearance.
    """
    weights = weights or {}
    fused: dict[int, Fused] = {}
    for channel, ids in rankings.items():
        weight = weights.get(channel, 1.0)
        for rank, id_ in enumerate(ids, start=1):
            entry = fused.get(id_)
            if entry is None:
                entry = fused[id_] = Fused(id_, 0.0)
            if channel in entry.ranks:  # a channel listing an id twice counts once
                continue
            entry.ranks[channel] = rank
            entry.score += weight / (k + rank)
    return sorted(fused.values(), key=lambda f: f.score, reverse=True)
