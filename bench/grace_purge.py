"""The service's grace purge on a big store: N memories forgotten, then the purge its
maintenance runs (`MemoryEngine.purge(STARTUP_RECLAIM_SHARE, …)`: below the reclaim share it
merges each FTS5 index a step at a time, `store.scrub_indexes`). Reports JSON: the whole
purge's seconds and, per index, the merge steps, the longest (the write lock one holds) and
their sum. It works on a copy of `--db` (a store built as bench/large_store.py says).

    uv run --no-sync --all-packages python bench/grace_purge.py --db /tmp/perf1m/1m.db \
        [--forget 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from semantic_memory.config import Settings
from semantic_memory.pipeline import STARTUP_RECLAIM_SHARE, MemoryEngine
from semantic_memory.stores import sqlite


def measure(db: Path, forget: int) -> dict[str, Any]:
    steps: list[tuple[str, float]] = []
    merge_step = sqlite.merge_fts_step

    def timed(conn: Any, table: str, pages: int, first: bool) -> bool:
        start = time.perf_counter()
        try:
            return merge_step(conn, table, pages, first)
        finally:
            steps.append((table, time.perf_counter() - start))

    sqlite.merge_fts_step = timed  # type: ignore[assignment]
    engine = MemoryEngine(Settings(db_path=str(db), device="cpu",
                                   plugins="bm25_porter,bm25_trigram"))
    try:
        middle = engine.counts()["memories"] // 2
        uids = [row[0] for row in engine.store.read().execute(
            "SELECT uid FROM memories WHERE deleted = 0 ORDER BY id LIMIT ? OFFSET ?",
            (forget, middle))]
        for uid in uids:
            engine.store.forget(uid, time.time())
        start = time.perf_counter()
        report = engine.purge(STARTUP_RECLAIM_SHARE, 0)
        total = time.perf_counter() - start
    finally:
        engine.close()
        sqlite.merge_fts_step = merge_step  # type: ignore[assignment]
    by_index: dict[str, list[float]] = {}
    for table, seconds in steps:
        by_index.setdefault(table, []).append(seconds)
    return {"forgotten": len(uids), "purge_s": round(total, 2), "report": report.to_dict(),
            "steps": {table: {"n": len(s), "longest_s": round(max(s), 3),
                              "sum_s": round(sum(s), 2)} for table, s in by_index.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--forget", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.db.parent) as folder:
        copy = Path(folder) / args.db.name
        shutil.copy(args.db, copy)
        print(json.dumps(measure(copy, args.forget), indent=1))


if __name__ == "__main__":
    main()
