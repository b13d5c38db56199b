"""Scale benchmark: batched import throughput and recall latency at 10k / 100k / 1M memories.

Synthetic memories are LoCoMo-like: "Speaker: " + 1-3 sentences drawn from the LoCoMo turns,
a few words of each swapped for words drawn from the corpus' own word frequencies (so every
memory is new text with realistic vocabulary statistics), spread over 20 projects; seeded.

    uv run --all-packages python bench/scale.py                            # 10k and 100k
    uv run --all-packages python bench/scale.py --sizes 10000,100000,1000000

Import goes through `MemoryEngine.ingest` in batches of the CLI's `memory-mcp import` size.
Recall runs the LoCoMo questions (a seeded sample) through `MemoryEngine.recall(k=10)` over all
memories and filtered to one project (5% of them), and through each channel's `search` alone.
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

from locomo import BM25, DEFAULT_DATA, load
from semantic_memory.channels import STOPWORDS, fts_phrase, words
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


def run_size(texts: list[str], questions: list[str], plugins: str, tmp: Path) -> dict:
    n = len(texts)
    engine = MemoryEngine(Settings(db_path=str(tmp / f"scale-{n}.db"), device="cpu",
                                   plugins=plugins))
    statuses: Counter[str] = Counter()
    t = time.perf_counter()
    for start in range(0, n, IMPORT_BATCH):
        batch = [NewMemory(text, kind="note", source="import", project=f"p{(start + i) % PROJECTS}")
                 for i, text in enumerate(texts[start:start + IMPORT_BATCH])]
        statuses.update(r.status for r in engine.ingest(batch))
    import_s = time.perf_counter() - t
    plain, plain_latencies = plain_fts5(texts, questions, tmp / f"plain-{n}.db")
    db_mb = engine.store.size_bytes() / 1e6

    project = RecallFilters(project="p3")
    for q in questions[:20]:  # warm the page cache
        engine.recall(q, k=10)
    result = {
        "memories": n,
        "import": {"seconds": round(import_s, 2), "per_s": round(n / import_s),
                   "batch": IMPORT_BATCH, "statuses": dict(statuses),
                   "plain_fts5_per_s": round(plain),
                   "import_vs_plain_fts5": round(n / import_s / plain, 2)},
        "db_mb": round(db_mb, 1),
        "recall_fused": percentiles(timed(lambda q: engine.recall(q, k=10), questions)),
        "recall_fused_project": percentiles(
            timed(lambda q: engine.recall(q, k=10, filters=project), questions)),
        "plain_fts5_exact_or": percentiles(plain_latencies),
    }
    result["recall_fused_vs_plain_p50"] = round(
        result["recall_fused"]["p50_ms"] / result["plain_fts5_exact_or"]["p50_ms"], 2)
    depth = max(10, engine.settings.recall_depth)
    for channel in engine.channels:
        def search(q: str, c=channel) -> None:  # type: ignore[no-untyped-def]
            with engine.store.snapshot() as conn:
                c.search(conn, q, depth, RecallFilters())
        result[f"search_{channel.name}"] = percentiles(timed(search, questions))
    engine.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts")
    parser.add_argument("--queries", type=int, default=200, help="recall queries per size")
    parser.add_argument("--plugins", default=BM25, help="MEMORY_PLUGINS for the engine")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo json (text source)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rng = random.Random(args.seed)
    questions = [q.text for c in load(args.data) for q in c.questions]
    questions = rng.sample(questions, min(args.queries, len(questions)))
    t = time.perf_counter()
    texts = synthetic(max(sizes), args.data, args.seed)
    report: dict[str, object] = {
        "plugins": args.plugins,
        "sqlite": sqlite3.sqlite_version,
        "generate_s": round(time.perf_counter() - t, 1),
        "queries": len(questions),
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        for n in sizes:
            sizes_report: dict = report["sizes"]  # type: ignore[assignment]
            sizes_report[str(n)] = run_size(texts[:n], questions, args.plugins, Path(tmp))
            for leftover in Path(tmp).iterdir():  # keep the disk use to one size at a time
                leftover.unlink()
            print(json.dumps({n: sizes_report[str(n)]}), file=sys.stderr)
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
