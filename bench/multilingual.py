"""Multilingual retrieval benchmark: what each BM25 channel and the fusion find, per language,
with and without the CJK bigram channel plugin.

The data set (`bench/data/multilingual.json`) holds short coding-agent memories in Chinese,
Japanese, Korean, Thai, German and English, stored in ONE index (as in real use), and queries
tagged with their language and kind (2char, term, compound, mixed, paraphrase) that list the
memories they should recall. recall@k of a query = share of its relevant memories in the top k;
the report averages it per language, per kind and overall.

    uv run --all-packages python bench/multilingual.py              # JSON report on stdout
    uv run --all-packages python bench/multilingual.py --markdown   # the docs/multilingual.md tables
    uv run --all-packages python bench/multilingual.py -k 10 --weights 0.5,1,2

Per-channel numbers come from each channel's own `search` (its top k); "fused" is
`MemoryEngine.recall` (weighted RRF and post-processing). Engines are built with
`Settings(plugins=...)`, the MEMORY_PLUGINS allowlist, so other installed channels (vector)
stay out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "multilingual.json"
WITHOUT = "bm25_porter,bm25_trigram"
WITH = "bm25_porter,bm25_trigram,bigram"
LANGS = ("zh", "ja", "ko", "th", "de", "en")
CJK = ("zh", "ja", "ko")
MRR_DEPTH = 10

Ranker = Callable[[str, int], list[str]]  # (query, k) -> dataset memory ids, best first


def load(path: Path = DEFAULT_DATA) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    known = {m["id"] for m in data["memories"]}
    for query in data["queries"]:
        missing = set(query["relevant"]) - known
        if missing:
            raise ValueError(f"{query['id']}: unknown relevant ids {sorted(missing)}")
    return data


def build(data: dict[str, Any], db_path: Path, plugins: str, weights: str = "") -> MemoryEngine:
    """An engine over a fresh db holding every memory of the data set (one batch)."""
    engine = MemoryEngine(
        Settings(db_path=str(db_path), device="cpu", plugins=plugins, channel_weights=weights)
    )
    results = engine.ingest(
        [NewMemory(m["content"], project="bench", tags=[m["id"]]) for m in data["memories"]]
    )
    if any(r.status != "new" for r in results):
        raise RuntimeError(f"ingest did not store every memory: {results}")
    return engine


def rankers(engine: MemoryEngine) -> dict[str, Ranker]:
    """One ranker per channel (its own `search`) plus "fused" (`recall`)."""
    def dataset_ids(memory_tags: list[list[str]]) -> list[str]:
        return [tags[0] for tags in memory_tags]

    def channel_ranker(channel: Any) -> Ranker:
        def rank(query: str, k: int) -> list[str]:
            with engine.store.snapshot() as conn:
                hits = channel.search(conn, query, k, RecallFilters())
            memories = engine.store.load(engine.store.read(), [h.id for h in hits])
            return dataset_ids([memories[h.id].tags for h in hits if h.id in memories])
        return rank

    out: dict[str, Ranker] = {c.name: channel_ranker(c) for c in engine.channels}
    out["fused"] = lambda query, k: dataset_ids([h.memory.tags for h in engine.recall(query, k)])
    return out


def score(data: dict[str, Any], rank: Ranker, k: int) -> dict[str, Any]:
    """recall@k overall, per language and per query kind, and MRR@10 (all in %, one decimal).

    MRR@10 (1 / rank of the first relevant memory, 0 past rank 10) shows ordering differences
    that recall@k cannot, e.g. between fusion weights.
    """
    per_query: dict[str, float] = {}
    reciprocal: dict[str, float] = {}
    for query in data["queries"]:
        ranked = rank(query["query"], max(k, MRR_DEPTH))
        top = set(ranked[:k])
        relevant = query["relevant"]
        per_query[query["id"]] = sum(r in top for r in relevant) / len(relevant)
        first = next((i for i, id_ in enumerate(ranked[:MRR_DEPTH], 1) if id_ in relevant), None)
        reciprocal[query["id"]] = 1 / first if first else 0.0

    def mean(ids: list[str], values: dict[str, float] = per_query) -> float | None:
        return round(100 * statistics.fmean(values[i] for i in ids), 1) if ids else None

    queries = data["queries"]
    kinds = sorted({q["kind"] for q in queries})
    cjk = [q["id"] for q in queries if q["lang"] in CJK]
    return {
        "overall": mean([q["id"] for q in queries]),
        "cjk": mean(cjk),
        "by_lang": {lang: mean([q["id"] for q in queries if q["lang"] == lang]) for lang in LANGS},
        "by_kind": {kind: mean([q["id"] for q in queries if q["kind"] == kind]) for kind in kinds},
        "mrr10": mean([q["id"] for q in queries], reciprocal),
        "mrr10_cjk": mean(cjk, reciprocal),
        "per_query": per_query,
    }


def run(data: dict[str, Any], k: int, sweep: list[float], tmp: Path) -> dict[str, Any]:
    report: dict[str, Any] = {
        "dataset": {
            "memories": len(data["memories"]),
            "queries": len(data["queries"]),
            "queries_by_lang": {
                lang: sum(q["lang"] == lang for q in data["queries"]) for lang in LANGS
            },
            "queries_by_kind": {
                kind: sum(q["kind"] == kind for q in data["queries"])
                for kind in sorted({q["kind"] for q in data["queries"]})
            },
        },
        "k": k,
    }
    for label, plugins in (("without_bigram", WITHOUT), ("with_bigram", WITH)):
        engine = build(data, tmp / f"{label}.db", plugins)
        try:
            report[label] = {name: score(data, r, k) for name, r in rankers(engine).items()}
            report[f"{label}_weights"] = dict(engine.weights)
        finally:
            engine.close()
    report["bigram_weight_sweep"] = {}
    for weight in sweep:
        engine = build(data, tmp / f"w{weight}.db", WITH, weights=f"bigram={weight}")
        try:
            fused = score(data, rankers(engine)["fused"], k)
        finally:
            engine.close()
        fused.pop("per_query")
        report["bigram_weight_sweep"][str(weight)] = fused
    fused = report["with_bigram"]["fused"]["per_query"]
    report["fused_misses_with_bigram"] = [
        {"id": q["id"], "kind": q["kind"], "query": q["query"], "recall": round(fused[q["id"]], 2)}
        for q in data["queries"]
        if fused[q["id"]] < 1
    ]
    for label in ("without_bigram", "with_bigram"):
        for result in report[label].values():
            result.pop("per_query")
    return report


def markdown(report: dict[str, Any]) -> str:
    k = report["k"]
    cols = ("overall", "cjk", *LANGS)
    weights = ", ".join(f"{n} {w:g}" for n, w in report["with_bigram_weights"].items())
    lines = [
        f"Channel weights: {weights}.",
        "",
        f"| recall@{k} | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for label, title in (("without_bigram", "without bigram"), ("with_bigram", "with bigram")):
        for name, result in report[label].items():
            values = [result["overall"], result["cjk"], *(result["by_lang"][c] for c in LANGS)]
            lines.append(
                f"| {name} ({title}) | "
                + " | ".join("–" if v is None else f"{v:.1f}" for v in values) + " |"
            )
    kinds = list(report["dataset"]["queries_by_kind"])
    lines += ["", f"| fused recall@{k} by query kind | " + " | ".join(kinds) + " |",
              "|---|" + "---:|" * len(kinds)]
    for label, title in (("without_bigram", "without bigram"), ("with_bigram", "with bigram")):
        by_kind = report[label]["fused"]["by_kind"]
        lines.append(f"| {title} | " + " | ".join(f"{by_kind[c]:.1f}" for c in kinds) + " |")
    lines += ["", f"| bigram weight | fused R@{k} overall | cjk | "
              + " | ".join(LANGS) + " | MRR@10 overall | MRR@10 cjk |",
              "|---:|---:|---:|" + "---:|" * (len(LANGS) + 2)]
    for weight, result in report["bigram_weight_sweep"].items():
        lines.append(
            f"| {weight} | {result['overall']:.1f} | {result['cjk']:.1f} | "
            + " | ".join(f"{result['by_lang'][c]:.1f}" for c in LANGS)
            + f" | {result['mrr10']:.1f} | {result['mrr10_cjk']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("-k", type=int, default=5, help="cut-off for recall@k (default 5)")
    parser.add_argument(
        "--weights", default="0.05,0.15,0.5,1,2,3",
        help="bigram fusion weights to sweep (comma-separated)",
    )
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    sweep = [float(w) for w in args.weights.split(",") if w.strip()]
    with tempfile.TemporaryDirectory(prefix="multilingual-bench-") as tmp:
        report = run(load(args.data), args.k, sweep, Path(tmp))
    if args.markdown:
        print(markdown(report))
    else:
        json.dump(report, sys.stdout, ensure_ascii=False, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
