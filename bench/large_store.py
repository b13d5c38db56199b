"""What a large store costs outside recall: `stats`, a list page's count, the JSON and markdown
exports, and a small `import` into it, for this tree and a baseline revision, alternately.

    uv run --no-sync --all-packages python bench/large_store.py --db /tmp/perf1m/1m.db \
        --baseline HEAD~3 [--rounds 3] [--tasks stats,count,export,markdown,import]
    uv run --no-sync --all-packages python bench/large_store.py --db /tmp/perf1m/1m.db \
        --merge-effect 2000,20000,100000        # recall after an import, unmerged and merged

`--db` is a store built with bench/scale.py's helpers (about 4 minutes for 1M):

    .venv/bin/python -c "import sys; sys.path.insert(0, 'bench'); \
        from scale import synthetic, import_synthetic; from locomo import BM25; \
        from semantic_memory.config import Settings; from semantic_memory.pipeline import MemoryEngine; \
        e = MemoryEngine(Settings(db_path='/tmp/perf1m/1m.db', device='cpu', plugins=BM25)); \
        import_synthetic(e, synthetic(1_000_000)); e.store.optimize(); e.close()"

It is never written: each tree reads one shared copy, and every import goes into a fresh copy
of that. `--mixed` edits the shared copy first so that stats has groups to count and counts
have rows to leave out (`MIXED`: four kinds, three sources, 2% global, 1% forgotten, 1.1%
replaced).
Each task runs in its own process with the tree's `core` (and postgres plugin) first on
PYTHONPATH, one tree after the other within a round; the report holds every round's figure
and their median. Tasks:

- stats: `MemoryEngine.stats()` on a freshly opened engine (what `memory-mcp stats` and the
  first stats call after a write pay) and then twice more on the same engine (the browse page
  reloading).
- count: `MemoryEngine.count(filters)` as a list page asks it (REST /api/memories and MCP
  memory_list), unfiltered, for one project (5%), one common and one absent kind; where the
  tree has `count(..., at_most=)`, also bounded to 1,000.
- export: JSON-lines export of the first 100,000 records (the CLI's `to_json`), records/s.
- markdown: `export --markdown` of the whole store: seconds and the process's peak RSS.
- import: `memory-mcp import` of 2,000 new lines into a copy of the store (a process of its
  own, as a person runs it): seconds, then recall p50 over LoCoMo questions on the result.

- purge: `startup_maintenance()` (what every service start runs, inside the write lock) on a
  store with nothing due: seconds, and what it removed (nothing, or the figure is not that).
- pages: a list page (20) and its count as REST /api/memories, MCP memory_list and
  memory://recent/{project} ask them, for the biggest project, a project of 5%, the global
  memories, a rare kind (artifact), a kind no memory has and a source (hook), two filters
  (project p3's notes: QA's store has two memories in p3; the big project's artifacts); and
  the count bounded to 1,000 (`at_most`).
- values: `values(column, prefix)` as MCP resources/list and completion ask it: every
  project (a fresh engine, then again), kinds starting with "d".
- telemetry: `injection_summary()` (its top ten joined to their memories) and `counts()`
  (/health).
- ingest: 2,000 new memories in one batch as `memory-mcp import` does, and a hook's single
  new memory (median of 20), into the shared copy itself: what each tree's indexes cost a
  write into a store of this size (the copy grows by 2,020 memories a round).

When the tree's schema is newer than the baseline's, the baseline cannot open the copy once
the tree has upgraded it: every baseline round runs first, then the tree's upgrade of the copy
(`upgrade`, timed: what the first start of the new release costs), then the tree's rounds.

`--merge-effect N,...` (this tree only): for each N, N new memories ingested into a copy as
the import does, and a second copy of that merged (its seconds); then recall p50/p95 (whole
store and one project) on both, alternately, `--rounds` times on the same questions: what
the merge buys after an import of that size.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TASKS = ("stats", "count", "export", "markdown", "import")
#: Tasks of the big-store paths (QA's 1M-memory store: docs/benchmarks.md, "Big stores").
SCALE_TASKS = ("purge", "pages", "values", "telemetry", "ingest")
PLUGINS = "bm25_porter,bm25_trigram"
IMPORT_LINES = 2_000
#: What `--mixed` does to the shared copy (every id lands in at most one of the last two).
MIXED = (
    "UPDATE memories SET kind = CASE id % 7 WHEN 0 THEN 'fact' WHEN 1 THEN 'decision' "
    "WHEN 2 THEN 'preference' ELSE kind END, source = CASE id % 5 WHEN 0 THEN 'chat' "
    "WHEN 1 THEN 'hook' ELSE source END",
    "UPDATE memories SET project = NULL WHERE id % 50 = 3",
    "UPDATE memories SET deleted = 1 WHERE id % 97 = 5",
    "UPDATE memories SET superseded_by = 'u' || (id + 1) WHERE id % 89 = 7 AND deleted = 0",
)
EXPORT_RECORDS = 100_000


def _engine(db: str) -> Any:
    from semantic_memory.config import Settings
    from semantic_memory.pipeline import MemoryEngine

    return MemoryEngine(Settings(db_path=db, device="cpu", plugins=PLUGINS))


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _questions(n: int, seed: int) -> list[str]:
    sys.path.insert(0, str(BENCH))
    from locomo import DEFAULT_DATA, load

    questions = [q.text for c in load(DEFAULT_DATA) for q in c.questions]
    random.Random(seed).shuffle(questions)
    return questions[:n]


def _recall_p50(engine: Any, questions: list[str], project: str | None = None) -> dict:
    from semantic_memory.models import RecallFilters

    filters = RecallFilters(project=project)
    samples = sorted(_timed(lambda q=q: engine.recall(q, k=10, filters=filters))
                     for q in questions)
    return {"p50_ms": _ms(statistics.median(samples)),
            "p95_ms": _ms(samples[int(0.95 * (len(samples) - 1))])}


# --- workers (one task, one process, the tree's code) ------------------------------------------


def task_stats(db: str) -> dict:
    engine = _engine(db)
    cold = _timed(engine.stats)
    repeat = [_timed(engine.stats) for _ in range(2)]
    engine.close()
    return {"first_ms": _ms(cold), "repeat_ms": _ms(statistics.median(repeat))}


def task_count(db: str) -> dict:
    import inspect

    from semantic_memory.models import RecallFilters

    engine = _engine(db)
    bounded = "at_most" in inspect.signature(engine.count).parameters
    out: dict[str, float] = {}
    for name, filters in (("all", RecallFilters()), ("project", RecallFilters(project="p3")),
                          ("kind_common", RecallFilters(kind="note")),
                          ("kind_absent", RecallFilters(kind="absent"))):
        out[name + "_ms"] = _ms(statistics.median(
            _timed(lambda f=filters: engine.count(f)) for _ in range(3)))
        if bounded:
            out[name + "_at_most_1000_ms"] = _ms(statistics.median(
                _timed(lambda f=filters: engine.count(f, at_most=1000)) for _ in range(3)))
    engine.close()
    return out


def _median_ms(fn: Any, times: int = 3) -> float:
    return _ms(statistics.median(_timed(fn) for _ in range(times)))


def task_purge(db: str) -> dict:
    engine = _engine(db)  # default settings: maintenance on, the default TTLs and grace
    reports: list[dict] = []
    seconds = [_timed(lambda: reports.append(engine.startup_maintenance().to_dict()))
               for _ in range(3)]
    engine.close()
    return {"startup_maintenance_ms": _ms(statistics.median(seconds)),
            "removed": reports[0]}


#: The filters a page is timed with: (name, RecallFilters keywords).
PAGES = (("project_big", {"project": "big"}), ("project_5pc", {"project": "p4"}),
         ("global", {"global_only": True}), ("kind_rare", {"kind": "artifact"}),
         ("kind_absent", {"kind": "nosuch"}), ("source_hook", {"source": "hook"}),
         ("project_tiny_notes", {"project": "p3", "kind": "note"}),
         ("project_big_artifacts", {"project": "big", "kind": "artifact"}))


def task_pages(db: str) -> dict:
    import inspect

    from semantic_memory.models import RecallFilters

    engine = _engine(db)
    bounded = "at_most" in inspect.signature(engine.count).parameters
    out: dict[str, float] = {}
    for name, given in PAGES:
        filters = RecallFilters(**given)
        out[f"{name}_page_ms"] = _median_ms(lambda f=filters: engine.list(f, 20, 0))
        out[f"{name}_count_ms"] = _median_ms(lambda f=filters: engine.count(f))
        if bounded:
            out[f"{name}_count_at_most_1000_ms"] = _median_ms(
                lambda f=filters: engine.count(f, at_most=1000))
    engine.close()
    return out


def task_values(db: str) -> dict:
    engine = _engine(db)
    first = _timed(lambda: engine.values("project", "", 1000))
    again = _median_ms(lambda: engine.values("project", "", 1000))
    kinds = _median_ms(lambda: engine.values("kind", "d", 100))
    engine.close()
    return {"projects_first_ms": _ms(first), "projects_again_ms": again,
            "kinds_d_ms": kinds}


def task_telemetry(db: str) -> dict:
    engine = _engine(db)
    out = {"injection_summary_ms": _median_ms(engine.injection_summary),
           "counts_ms": _median_ms(engine.counts)}

    def top() -> None:
        with engine.store.snapshot() as conn:
            engine.store.top_injected(conn, 10)

    out["top_injected_ms"] = _median_ms(top)
    engine.close()
    return out


def task_ingest(db: str) -> dict:
    from semantic_memory.cli import IMPORT_BATCH
    from semantic_memory.models import NewMemory

    engine = _engine(db)
    tag = f"{os.getpid()}-{time.time()}"  # new text every round and tree
    batch = [NewMemory(f"imported note {i} {tag} about the build pipeline and its cache",
                       kind="fact", source="import", project="p7")
             for i in range(IMPORT_BATCH)]
    seconds = _timed(lambda: engine.ingest(batch, batch_is_session=False))
    single = [_timed(lambda i=i: engine.store_one(NewMemory(
        f"hook note {i} {tag}: the release branch is cut on fridays", kind="fact",
        source="hook", project="p3"))) for i in range(20)]
    engine.close()
    return {"batch_per_s": round(IMPORT_BATCH / seconds),
            "single_p50_ms": _ms(statistics.median(single))}


def task_upgrade(db: str) -> dict:
    """Open the copy with this tree: its schema upgrade, if any, is the time."""
    from semantic_memory.stores.sqlite import SQLiteStore

    seconds = _timed(lambda: SQLiteStore(db).close())
    return {"seconds": round(seconds, 2)}


def task_schema(db: str) -> dict:
    from semantic_memory.stores.sqlite import SCHEMA_VERSION

    return {"version": SCHEMA_VERSION}


def task_export(db: str) -> dict:
    from semantic_memory.cli import to_json

    engine = _engine(db)
    start, n = time.perf_counter(), 0
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for record in engine.export():
            sink.write(to_json(record) + "\n")
            n += 1
            if n >= EXPORT_RECORDS:
                break
    rate = n / (time.perf_counter() - start)
    engine.close()
    return {"records_per_s": round(rate)}


def task_markdown(db: str) -> dict:
    from semantic_memory.importers import export_markdown

    engine = _engine(db)
    with tempfile.TemporaryDirectory(prefix="md-export-") as folder:
        start = time.perf_counter()
        written = export_markdown(engine, Path(folder) / "out")
        seconds = time.perf_counter() - start
    engine.close()
    return {"seconds": round(seconds, 2), "files": len(written),
            "memories": sum(n for _, n in written),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def task_import(db: str, lines: str) -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "semantic_memory", "import", lines],
                          env=dict(os.environ, MEMORY_DB_PATH=db, MEMORY_PLUGINS=PLUGINS,
                                   MEMORY_DEVICE="cpu"),
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    engine = _engine(db)
    questions = _questions(60, seed=3)
    for q in questions[:20]:  # warm-up, on other questions
        engine.recall(q, k=10)
    recall = _recall_p50(engine, questions[20:])
    engine.close()
    return {"seconds": round(seconds, 2), "counts": json.loads(done.stdout.splitlines()[-1]),
            "recall_after": recall}


def merge_effect(db: str, sizes: list[int], rounds: int) -> dict:
    sys.path.insert(0, str(BENCH))
    from scale import synthetic
    from semantic_memory.cli import IMPORT_BATCH
    from semantic_memory.models import NewMemory

    questions = _questions(120, seed=5)
    warm, timed = questions[:20], questions[20:]
    texts = synthetic(max(sizes), seed=101)
    out: dict[str, Any] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="merge-effect-", dir=Path(db).parent) as tmp:
            unmerged, merged = str(Path(tmp) / "unmerged.db"), str(Path(tmp) / "merged.db")
            shutil.copyfile(db, unmerged)
            engine = _engine(unmerged)
            start = time.perf_counter()
            for at in range(0, size, IMPORT_BATCH):
                engine.ingest([NewMemory(t, kind="note", source="import", project="p3")
                               for t in texts[at:at + IMPORT_BATCH]], batch_is_session=False)
            ingest_s = time.perf_counter() - start
            engine.close()
            shutil.copyfile(unmerged, merged)
            engines = {"unmerged": _engine(unmerged), "merged": _engine(merged)}
            merge_s = _timed(engines["merged"].store.optimize)
            for engine in engines.values():
                for q in warm:
                    engine.recall(q, k=10)
            runs: dict[str, list[dict]] = {name: [] for name in engines}
            for _ in range(rounds):  # alternately, on the same questions
                for name, engine in engines.items():
                    runs[name].append({"all": _recall_p50(engine, timed),
                                       "p3": _recall_p50(engine, timed, "p3")})
            for engine in engines.values():
                engine.close()
        out[str(size)] = {
            "ingest_s": round(ingest_s, 2), "merge_s": round(merge_s, 2), "runs": runs,
            **{f"{name}_{scope}_p50_ms": round(statistics.median(
                r[scope]["p50_ms"] for r in runs[name]), 1)
               for name in runs for scope in ("all", "p3")}}
        print(json.dumps({size: {k: v for k, v in out[str(size)].items() if k != "runs"}}),
              file=sys.stderr, flush=True)
    return out


def worker(task: str, db: str, lines: str) -> None:
    if task == "import":
        result = task_import(db, lines)
    else:
        result = globals()[f"task_{task}"](db)
    print(json.dumps(result))


# --- driver ------------------------------------------------------------------------------------


def _tree(rev: str, into: Path) -> Path:
    """`core` and the postgres plugin of `rev`, extracted (no worktree)."""
    archive = subprocess.run(["git", "archive", rev, "core", "plugins/stores/postgres"],
                             cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _run(tree: Path, task: str, db: str, lines: str) -> dict:
    paths = [str(tree / "core"), str(tree / "plugins" / "stores" / "postgres")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    done = subprocess.run([sys.executable, __file__, "--worker", task, "--db", db,
                           "--lines", lines], env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode:
        raise SystemExit(f"{task} in {tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def _round(tree: Path, task: str, shared: str, lines: str, tmp: str) -> dict:
    """One task of one tree; an import goes into a fresh copy of the shared store."""
    if task != "import":
        return _run(tree, task, shared, lines)
    db = str(Path(tmp) / "import.db")
    shutil.copyfile(shared, db)
    try:
        return _run(tree, task, db, lines)
    finally:
        os.unlink(db)


def _median(runs: list[dict]) -> dict:
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        if isinstance(value, (int, float)):
            out[key] = statistics.median(r[key] for r in runs)
        elif isinstance(value, dict) and all(isinstance(v, (int, float)) for v in value.values()):
            out[key] = {k: statistics.median(r[key][k] for r in runs) for k in value}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a store built by bench/scale.py's helper")
    parser.add_argument("--baseline", help="a revision to measure in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help=f"of {', '.join(TASKS + SCALE_TASKS)}")
    parser.add_argument("--mixed", action="store_true", help="edit the copy first (MIXED)")
    parser.add_argument("--merge-effect", help="import sizes: recall unmerged and merged")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--lines", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.db, args.lines)
        return 0
    if args.merge_effect:
        sizes = [int(s) for s in args.merge_effect.split(",")]
        json.dump({"merge_effect": merge_effect(args.db, sizes, args.rounds)}, sys.stdout,
                  indent=2)
        print()
        return 0
    tasks = [t for t in args.tasks.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="large-store-", dir=Path(args.db).parent) as tmp:
        trees = {"tree": REPO}
        if args.baseline:
            (Path(tmp) / "baseline").mkdir()
            trees = {args.baseline: _tree(args.baseline, Path(tmp) / "baseline"), **trees}
        shared = str(Path(tmp) / "read.db")
        shutil.copyfile(args.db, shared)
        if args.mixed:
            conn = sqlite3.connect(shared)
            with conn:  # one transaction
                for statement in MIXED:
                    conn.execute(statement)
            conn.close()
        lines = str(Path(tmp) / "import.jsonl")
        with open(lines, "w", encoding="utf-8") as handle:
            for i in range(IMPORT_LINES):
                handle.write(json.dumps({"content": f"imported note {i} {random.random()} about "
                                                    "the build pipeline and caching",
                                         "project": "p7", "kind": "fact"}) + "\n")
        results: dict[str, dict[str, list[dict]]] = {name: {t: [] for t in tasks}
                                                      for name in trees}
        versions = {name: _run(tree, "schema", shared, lines)["version"]
                    for name, tree in trees.items()}
        upgrade: dict | None = None
        if len(set(versions.values())) == 1:  # alternately, round by round
            phases = [list(trees.items())]
        else:  # the baseline first: it cannot open the copy once the tree upgraded it
            phases = [[(name, tree)] for name, tree in trees.items()]
        for phase in phases:
            if phase[0][0] == "tree" and len(phases) > 1:
                upgrade = _run(REPO, "upgrade", shared, lines)
                print(json.dumps({"upgrade": upgrade}), file=sys.stderr, flush=True)
            for _ in range(args.rounds):
                for task in tasks:
                    for name, tree in phase:
                        results[name][task].append(_round(tree, task, shared, lines, tmp))
                        print(json.dumps({"tree": name, task: results[name][task][-1]}),
                              file=sys.stderr, flush=True)
    report = {name: {task: {"median": _median(runs), "runs": runs} for task, runs in per.items()}
              for name, per in results.items()}
    json.dump({"db": args.db, "mixed": args.mixed, "rounds": args.rounds,
               "schema_versions": versions, "upgrade": upgrade, "results": report},
              sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
