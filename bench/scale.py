"""Scale benchmark: batched import throughput and recall latency at 10k / 100k / 1M memories.

Synthetic memories are LoCoMo-like: "Speaker: " + 1-3 sentences drawn from the LoCoMo turns,
a few words of each swapped for words drawn from the corpus' own word frequencies (so every
memory is new text with realistic vocabulary statistics), spread over 20 projects; seeded.

    uv run --all-packages python bench/scale.py                            # 10k and 100k
    uv run --all-packages python bench/scale.py --sizes 10000,100000,1000000
    uv run --all-packages python bench/scale.py --sizes 100000 --quality  # what the bound costs
    uv run --all-packages python bench/scale.py --sizes 100000 --globals 200  # + global memories

Import goes through `MemoryEngine.ingest` in batches of the CLI's `memory-mcp import` size,
then merges the FTS5 indexes as that command does (the merge counts in the import time).
Recall runs LoCoMo questions through `MemoryEngine.recall(k=10)` over all memories and filtered
to one project (5% of them), and through each channel's `search` alone. Each of the three runs
gets its own seeded sample of questions, after a warm-up on another sample: channels remember
phrase counts across queries (`fts5.MatchCounts`), so a query is never timed twice and the
timings are those of a service that has answered other questions before.
`--globals N` then stores N more memories without a project and times a hook's recall (k=10,
`relevant_only`) in the project with them (`with_global`) against the same recall without
them, in alternating rounds on the same questions: what global memories cost.
As a yardstick from the same run (the machine is shared, so absolute numbers drift) the same
rows are also bulk-inserted into one plain FTS5 porter table and the questions run on it as
exact BM25 OR queries: `import_vs_plain_fts5` and `recall_fused_vs_plain_p50` are the ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import semantic_memory.keywords as keywords
from locomo import BM25, DEFAULT_DATA, load, mean_recall, question_recalls
from semantic_memory.keywords import STOPWORDS, words
from semantic_memory.stores.fts5 import fts_phrase
from semantic_memory.cli import IMPORT_BATCH
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

PROJECTS = 20
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def synthetic(n: int, data_path: str | Path = DEFAULT_DATA, seed: int = 7) -> list[str]:
    """`n` distinct LoCoMo-like memory texts."""
    rng = random.Random(seed)
    data = load(data_path)
    speakers = sorted({t.split(":", 1)[0] for c in data for _, t in c.turns})
    sentences = [s.split() for c in data for _, t in c.turns
                 for s in _SENTENCE.split(t.split(": ", 1)[1]) if len(s.split()) >= 3]
    counts = Counter(w for s in sentences for w in s)
    vocab, freq = list(counts), list(counts.values())
    draws = rng.choices(vocab, weights=freq, k=65_536)  # recycled pool of corpus-frequency words
    out, seen, d = [], set(), 0
    while len(out) < n:
        words: list[str] = []
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            words += rng.choice(sentences)
        for _ in range(1 + len(words) // 8):  # swap ~12% of the words
            words[rng.randrange(len(words))] = draws[d % len(draws)]
            d += 7 + rng.randrange(3)
        text = f"{rng.choice(speakers)}: {' '.join(words)}"
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2)}


def timed(fn, queries: list[str]) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - t)
    return out


def plain_fts5(texts: list[str], questions: list[str], path: Path) -> tuple[float, list[float]]:
    """The machine's yardstick, measured in the same run: rows/s of a bulk executemany into one
    plain FTS5 porter table, and the latencies of exact BM25 OR queries (LoCoMo baseline) on it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize='porter unicode61')")
    t = time.perf_counter()
    for start in range(0, len(texts), IMPORT_BATCH):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t VALUES (?)",
                         [(x,) for x in texts[start:start + IMPORT_BATCH]])
        conn.execute("COMMIT")
    rate = len(texts) / (time.perf_counter() - t)

    def query(q: str) -> None:
        terms = [w for w in words(q) if w not in STOPWORDS] or words(q)
        conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT 10",
                     (" OR ".join(fts_phrase(w) for w in terms),)).fetchall()

    timed(query, questions[:20])
    latencies = timed(query, questions)
    conn.close()
    return rate, latencies


def import_synthetic(engine: MemoryEngine, texts: list[str]) -> Counter[str]:
    """Ingest `texts` as `memory-mcp import` does (batches of its size, no batch sessions),
    round robin over PROJECTS; the statuses seen."""
    statuses: Counter[str] = Counter()
    for start in range(0, len(texts), IMPORT_BATCH):
        batch = [NewMemory(text, kind="note", source="import", project=f"p{(start + i) % PROJECTS}")
                 for i, text in enumerate(texts[start:start + IMPORT_BATCH])]
        statuses.update(r.status for r in engine.ingest(batch, batch_is_session=False))
    return statuses


def global_cost(engine: MemoryEngine, shared: list[str], questions: list[str],
                rounds: int = 3) -> dict:
    """A hook's project recall with `shared` stored as global memories, against the same
    recall leaving them out, alternating rounds on the same questions (p50 per round)."""
    project = RecallFilters(project="p3")
    engine.ingest([NewMemory(text, kind="note", source="import") for text in shared],
                  batch_is_session=False)

    def p50(with_global: bool) -> float:
        return percentiles(timed(lambda q: engine.recall(
            q, k=10, filters=project, relevant_only=True, with_global=with_global),
            questions))["p50_ms"]

    rows = [(p50(False), p50(True)) for _ in range(rounds)]
    brought = sum(any(h.memory.project is None for h in engine.recall(
        q, k=10, filters=project, relevant_only=True)) for q in questions)
    return {"memories": len(shared), "project_alone_p50_ms": [a for a, _ in rows],
            "with_global_p50_ms": [b for _, b in rows],
            "ratio": round(statistics.median(b / a for a, b in rows), 2),
            "questions": len(questions), "recalls_with_a_global_hit": brought}


def run_size(texts: list[str], samples: dict[str, list[str]], plugins: str, tmp: Path,
             shared: list[str] | None = None) -> dict:
    n = len(texts)
    engine = MemoryEngine(Settings(db_path=str(tmp / f"scale-{n}.db"), device="cpu",
                                   plugins=plugins))
    t = time.perf_counter()
    statuses = import_synthetic(engine, texts)
    merge_t = time.perf_counter()
    engine.store.optimize()  # as `memory-mcp import` does after a bulk import
    merge_s = time.perf_counter() - merge_t
    import_s = time.perf_counter() - t
    plain, plain_latencies = plain_fts5(texts, samples["fused"], tmp / f"plain-{n}.db")
    db_mb = engine.store.size_bytes() / 1e6

    project = RecallFilters(project="p3")
    for q in samples["warmup"]:  # page cache and remembered counts, on other questions
        engine.recall(q, k=10)
    result = {
        "memories": n,
        "import": {"seconds": round(import_s, 2), "per_s": round(n / import_s),
                   "batch": IMPORT_BATCH, "index_merge_s": round(merge_s, 2),
                   "statuses": dict(statuses),
                   "plain_fts5_per_s": round(plain),
                   "import_vs_plain_fts5": round(n / import_s / plain, 2)},
        "db_mb": round(db_mb, 1),
        "recall_fused": percentiles(
            timed(lambda q: engine.recall(q, k=10), samples["fused"])),
        "recall_fused_project": percentiles(
            timed(lambda q: engine.recall(q, k=10, filters=project), samples["project"])),
        "plain_fts5_exact_or": percentiles(plain_latencies),
    }
    result["recall_fused_vs_plain_p50"] = round(
        result["recall_fused"]["p50_ms"] / result["plain_fts5_exact_or"]["p50_ms"], 2)
    depth = max(20, engine.settings.recall_depth)  # as recall(k=10) asks
    for channel in engine.channels:
        def search(q: str, c=channel) -> None:  # type: ignore[no-untyped-def]
            with engine.store.snapshot() as conn:
                c.search(conn, q, depth, RecallFilters())
        result[f"search_{channel.name}"] = percentiles(timed(search, samples["channels"]))
    if shared:
        result["global_memories"] = global_cost(engine, shared, samples["project"])
    engine.close()
    return result


def quality(n: int, plugins: str, data_path: str, seed: int, tmp: Path) -> dict:
    """What the work budget costs: LoCoMo appended to `n` synthetic memories, R@10 of its
    questions filtered to their conversation and unfiltered (the whole store), bounded
    (the default budget) and exact (no budget), with p50 latencies."""
    data = load(data_path)
    engine = MemoryEngine(Settings(db_path=str(tmp / f"quality-{n}.db"), device="cpu",
                                   plugins=plugins))
    import_synthetic(engine, synthetic(n, data_path, seed))
    for conv in data:
        engine.ingest([NewMemory(content, kind="note", project=conv.sample_id)
                       for _, content in conv.turns])
    engine.store.optimize()

    def run(filtered: bool) -> dict:
        def recall(project: str, query: str, k: int) -> list[str]:
            scope = RecallFilters(project=project) if filtered else RecallFilters()
            return [h.memory.content for h in engine.recall(query, k=k, filters=scope)]

        per_sample, latencies = question_recalls(recall, data, ks=(10,))
        return {"r_at_10": mean_recall(per_sample, 10),
                "p50_ms": percentiles(latencies)["p50_ms"]}

    report = {"memories": engine.count(), "bounded": {}, "exact": {}}
    default_budget = keywords.MATCH_BUDGET
    for mode, budget in (("bounded", default_budget), ("exact", 10**12)):
        keywords.MATCH_BUDGET = budget
        report[mode] = {"project_filter": run(True), "whole_store": run(False)}
    keywords.MATCH_BUDGET = default_budget
    engine.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--queries", type=int, default=190,
                        help="questions per timed run (each run its own; at most a quarter)")
    parser.add_argument("--plugins", default=BM25, help="MEMORY_PLUGINS for the engine")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo json (text source)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--globals", type=int, default=0, metavar="N",
                        help="then store N global memories and time project recall with them")
    parser.add_argument("--quality", action="store_true",
                        help="instead: LoCoMo R@10 hidden among each size's synthetic memories, "
                             "bounded vs exact search")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.quality:
        with tempfile.TemporaryDirectory(prefix="scale-quality-") as tmp:
            out = {str(n): quality(n, args.plugins, args.data, args.seed, Path(tmp))
                   for n in sizes}
        json.dump({"plugins": args.plugins, "quality": out}, sys.stdout, indent=2)
        print()
        return 0
    rng = random.Random(args.seed)
    questions = [q.text for c in load(args.data) for q in c.questions]
    rng.shuffle(questions)
    per = min(args.queries, len(questions) // 4)
    samples = {name: questions[i * per:(i + 1) * per]
               for i, name in enumerate(("warmup", "fused", "project", "channels"))}
    t = time.perf_counter()
    texts = synthetic(max(sizes) + args.globals, args.data, args.seed)
    shared = texts[len(texts) - args.globals:] if args.globals else None
    report: dict[str, object] = {
        "plugins": args.plugins,
        "sqlite": sqlite3.sqlite_version,
        "generate_s": round(time.perf_counter() - t, 1),
        "queries": per,
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        for n in sizes:
            sizes_report: dict = report["sizes"]  # type: ignore[assignment]
            sizes_report[str(n)] = run_size(texts[:n], samples, args.plugins, Path(tmp),
                                            shared)
            for leftover in Path(tmp).iterdir():  # keep the disk use to one size at a time
                leftover.unlink()
            print(json.dumps({n: sizes_report[str(n)]}), file=sys.stderr)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
