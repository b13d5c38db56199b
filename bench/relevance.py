"""The relevance bar of hook injections (MEMORY_INJECT_MIN_COVERAGE), on LoCoMo dev.

A hook injects only what a channel vouches for (`MemoryEngine.recall(relevant_only=True)`):
for BM25, a memory containing at least the bar's share of the query, IDF-weighted. Too low a
bar injects noise into every prompt; too high a bar withholds what was asked about. Two runs
per question and bar, both injections of k = 5 (the hooks' MEMORY_PLUGIN_LIMIT):

- on topic: the question in its own conversation; `r5` = share of its evidence turns
  injected, `injects` = share of questions that inject anything;
- off topic: the same question in the next conversation (other people, other events), where
  nothing is relevant; `off_injects` = share of questions that inject anything anyway.

The bar is chosen by `r5 - off_injects` (a relevant turn recalled is worth as much as an
off-topic injection avoided), with leave-one-conversation-out. Prints JSON.

    uv run --all-packages python bench/relevance.py
    uv run --all-packages python bench/relevance.py --bars 0,0.3,0.5 --plugins bm25_porter
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import BM25, Conversation, engine_system, load  # noqa: E402
from semantic_memory.models import RecallFilters  # noqa: E402

K = 5
BARS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def measure(engine: object, data: list[Conversation], bar: float) -> dict[str, dict[str, float]]:
    """Per conversation: r5, injects, off_injects at this bar."""
    for channel in engine.channels:  # type: ignore[attr-defined]
        if hasattr(channel, "min_coverage"):
            channel.min_coverage = bar
    out = {}
    for i, conv in enumerate(data):
        other = data[(i + 1) % len(data)].sample_id
        by_content: dict[str, set[str]] = {}
        for dia_id, content in conv.turns:
            by_content.setdefault(content, set()).add(dia_id)
        r5, injects, off = [], [], []
        for q in conv.questions:
            hits = engine.recall(q.text, K, RecallFilters(project=conv.sample_id),  # type: ignore[attr-defined]
                                 relevant_only=True)
            found = set().union(*(by_content.get(h.memory.content, set()) for h in hits))
            r5.append(len(found & q.evidence) / len(q.evidence))
            injects.append(bool(hits))
            off.append(bool(engine.recall(q.text, K, RecallFilters(project=other),  # type: ignore[attr-defined]
                                          relevant_only=True)))
        out[conv.sample_id] = {"r5": 100 * statistics.fmean(r5),
                               "injects": 100 * statistics.fmean(injects),
                               "off_injects": 100 * statistics.fmean(off), "n": len(r5)}
    return out


def pooled(per: dict[str, dict[str, float]], keep: set[str]) -> dict[str, float]:
    rows = [v for k, v in per.items() if k in keep]
    n = sum(r["n"] for r in rows)
    return {m: round(sum(r[m] * r["n"] for r in rows) / n, 1)
            for m in ("r5", "injects", "off_injects")}


def score(metrics: dict[str, float]) -> float:
    return metrics["r5"] - metrics["off_injects"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bars", default=",".join(map(str, BARS)))
    parser.add_argument("--plugins", default=BM25)
    args = parser.parse_args()
    bars = [float(b) for b in args.bars.split(",")]
    data = load()
    recall = engine_system(args.plugins)(data)
    engine = recall.engine  # type: ignore[attr-defined]
    per_bar = {bar: measure(engine, data, bar) for bar in bars}
    everyone = {c.sample_id for c in data}
    folds = []
    for held in sorted(everyone):
        train = everyone - {held}
        best = max(bars, key=lambda b: score(pooled(per_bar[b], train)))
        folds.append({"held_out": held, "bar": best, **pooled(per_bar[best], {held})})
    n = {c.sample_id: len(c.questions) for c in data}
    loo = {m: round(sum(f[m] * n[f["held_out"]] for f in folds) / sum(n.values()), 1)
           for m in ("r5", "injects", "off_injects")}
    print(json.dumps({
        "k": K, "plugins": args.plugins,
        "bars": {str(b): pooled(per_bar[b], everyone) for b in bars},
        "best_in_sample": max(bars, key=lambda b: score(pooled(per_bar[b], everyone))),
        "leave_one_out": {"folds": folds, "pooled": loo},
    }, indent=2))


if __name__ == "__main__":
    main()
