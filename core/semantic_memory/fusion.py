"""Fusing the channels' rankings: Reciprocal Rank Fusion, or a convex combination of scores.

RRF needs only ranks, so channels whose scores mean different things (BM25, cosine) fuse
without calibration; but it cannot tell a clear winner from a near tie. Score fusion can: each
channel's scores are normalised per query and mixed with fixed shares (each raised by how clearly
the channel's first hit leads), so a strong embedder's cosine gaps and trigram's substring
evidence count, and the neighbour decay knows how sure each hit is. It is the default with or
without an embedder (`MEMORY_FUSION`; docs/retrieval.md, "The guard").
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any


def finite_number(value: Any) -> bool:
    """A finite real number (numpy's included), not a bool: what a score, a weight or a share
    must be (one NaN or infinity makes every fused score NaN, which JSON cannot carry)."""
    if type(value) is float:  # nearly every score: no ABC check (it runs per hit, per recall)
        return math.isfinite(value)
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def range_problem(member: str, value: Any, high: float = math.inf,
                  optional: bool = False, low: float = 0.0) -> str | None:
    """Why `value` cannot be the fusion member `member` (None when it can): a finite number
    within low..high, or None where `optional`."""
    if (value is None and optional) or (finite_number(value) and low <= value <= high):
        return None
    bounds = f">= {low:g}" if high == math.inf else f"within {low:g}..{high:g}"
    return f"{member} must be a number {bounds}{' or None' if optional else ''}, not {value!r}"


@dataclass
class Fused:
    id: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


def rrf(
    rankings: dict[str, list[int]], weights: dict[str, float] | None = None, k: int = 60,
    limit: int | None = None,
) -> list[Fused]:
    """Fuse ranked id lists: score(d) = sum over channels c of w_c / (k + rank_c(d)).

    Ranks are 1-based. A channel without a weight counts 1.0; weight 0 keeps its ranks for
    reporting but adds nothing. Ties keep the order of first appearance. `limit`: only the
    best that many (the engine fuses hundreds of ids per query and keeps its depth).
    """
    weights = weights or {}
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for channel, ids in rankings.items():
        weight = weights.get(channel, 1.0)
        for rank, id_ in enumerate(ids, start=1):
            seen = ranks.get(id_)
            if seen is None:
                ranks[id_] = {channel: rank}
                scores[id_] = weight / (k + rank)
            elif channel not in seen:  # a channel listing an id twice counts once
                seen[channel] = rank
                scores[id_] += weight / (k + rank)
    best = sorted(scores, key=scores.__getitem__, reverse=True)  # stable: ties keep their order
    return [Fused(id_, scores[id_], ranks[id_]) for id_ in best[:limit]]


def score_fusion(
    results: dict[str, list[tuple[int, float]]], weights: dict[str, float],
    limit: int | None = None, lead: float = 0.0,
) -> list[Fused]:
    """Fuse (id, score) lists, best first: score(d) = sum over channels c of
    w_c * (1 + lead * lead_c) * (s_c(d) - min_c) / (max_c - min_c), with the weights scaled
    to sum to 1 over the channels that answered; an id a channel did not return scores 0 there.
    lead_c = (first - second) / (max_c - min_c) is how clearly the channel's first hit leads:
    a channel sure of its answer speaks louder for this query, one with a flat top does not
    outvote another's clear winner. Ranks are kept for reporting, and ties keep the order of
    first appearance."""
    answered = {c: hits for c, hits in results.items() if hits}
    total = sum(weights.get(c, 1.0) for c in answered) or 1.0
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for channel, hits in answered.items():
        top, bottom = max(s for _, s in hits), min(s for _, s in hits)
        spread = top - bottom
        weight = weights.get(channel, 1.0) / total
        if lead > 0 and spread > 0:
            second = heapq.nlargest(2, (s for _, s in hits))[1]
            weight *= 1.0 + lead * (top - second) / spread
        for rank, (id_, score) in enumerate(hits, start=1):
            if channel in ranks.setdefault(id_, {}):
                continue  # a channel listing an id twice counts once
            ranks[id_][channel] = rank
            normalised = (score - bottom) / spread if spread > 0 else 1.0
            scores[id_] = scores.get(id_, 0.0) + weight * normalised
    best = sorted(scores, key=scores.__getitem__, reverse=True)
    return [Fused(id_, scores[id_], ranks[id_]) for id_ in best[:limit]]


def with_share(weights: dict[str, float], expensive: list[str], share: float
               ) -> dict[str, float]:
    """`weights` rescaled so that the expensive (embedding) channels hold `share` of the total
    and the keyword channels the rest, each side keeping its own proportions."""
    cheap_total = sum(w for n, w in weights.items() if n not in expensive)
    dear_total = sum(weights.get(n, 1.0) for n in expensive)
    if not expensive or cheap_total <= 0 or dear_total <= 0:
        return weights
    return {n: (w * share / dear_total if n in expensive else w * (1 - share) / cheap_total)
            for n, w in weights.items()}


def keyword_gated_weights(
    weights: dict[str, float], keyword: list[str], expensive: list[str],
    confidence: float | None, power: float,
) -> dict[str, float]:
    """Confidence-aware weights for one query (RRF keeps its shape).

    When the expensive (embedding) channels lead — their weights sum to more than the keyword
    channels' — a keyword channel only speaks in proportion to its evidence: its weight is
    multiplied by confidence**power (the IDF coverage of the query by the best keyword hit).
    A strong embedder is then not dragged down by keyword noise, yet an exact, complete keyword
    match still counts. When the keyword channels lead, weights are unchanged (the keyword fast
    path covers that side). power <= 0 or no confidence: unchanged.
    """
    if power <= 0 or confidence is None or not expensive:
        return weights
    if keyword_leads(weights, keyword, expensive):
        return weights
    factor = max(0.0, min(1.0, confidence)) ** power
    return {n: (w * factor if n in keyword else w) for n, w in weights.items()}


def keyword_leads(weights: dict[str, float], keyword: list[str], expensive: list[str]) -> bool:
    """True when the keyword channels' weights sum to at least the expensive channels'."""
    return sum(weights.get(n, 1.0) for n in keyword) >= sum(
        weights.get(n, 1.0) for n in expensive)
