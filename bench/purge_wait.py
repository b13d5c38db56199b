"""How long `memory-mcp purge` holds other writers off: a store with a share of its memories
forgotten, purged by this tree and by a baseline revision, alternately on identical copies,
while another process ingests one small memory at a time in a loop. Reports JSON: per tree and
task, every round's figures and their median (the purge's seconds, the longest wait of one
write that overlapped it, the seconds of all those writes, how many), the purge's phases
(delete, merge, VACUUM, WAL cut) and the tree / baseline ratios.

    uv run --no-sync --all-packages python bench/purge_wait.py --db /tmp/fix_purge/100k.db \
        [--baseline HEAD] [--rounds 3] [--forget 0.01]

Tasks: `purge` (`MemoryEngine.purge()`, what `memory-mcp purge` runs: reclaim, every forgotten
memory) and `matching` (`purge --matching`: `holding(text)` then `purge_matching`, a text that
~`--forget` of the memories hold). After each purge the bench checks that no file of the copy
holds the purged marker word and that each FTS5 index passes its 'integrity-check'.
`--db` is a store built with bench/scale.py's helpers (bench/large_store.py says how); it is
only read: the forgotten ones are set on a copy of it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PLUGINS = "bm25_porter,bm25_trigram"
#: In the memories the purge removes, and nowhere else: the file must not hold it after.
GONE = "zyxwvutsrq"
MATCH = "qwvxzkjhgf"
WRITE_PAUSE_S = 0.02


def _engine(db: str) -> Any:
    from semantic_memory.config import Settings
    from semantic_memory.pipeline import MemoryEngine

    return MemoryEngine(Settings(db_path=db, device="cpu", plugins=PLUGINS))


def _unlink_journal(db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def prepare(source: Path, into: Path, share: float) -> dict[str, int]:
    """A copy of `source` with `share` of its memories forgotten (a few hold GONE) and as many
    new ones holding MATCH, its journal folded in."""
    from semantic_memory.models import NewMemory

    shutil.copyfile(source, into)
    _unlink_journal(into)
    engine = _engine(str(into))
    try:
        uids = [r[0] for r in engine.store.read().execute(
            "SELECT uid FROM memories WHERE deleted = 0")]
        n = max(int(len(uids) * share), 1)
        marked = engine.ingest([NewMemory(f"Customer {GONE} Holdings note {i}", project="p0")
                                for i in range(10)], batch_is_session=False)
        doomed = random.Random(3).sample(uids, n - 10) + [r.uid for r in marked]
        for uid in doomed:
            engine.forget(uid)
        engine.ingest([NewMemory(f"Vendor {MATCH} invoice {i} for the build cache", project="p1")
                       for i in range(n)], batch_is_session=False)
        engine.store.flush_journal()
    finally:
        engine.close()
    _unlink_journal(into)
    return {"memories": len(uids), "forgotten": n, "matching": n}


# --- workers (each a process of its own, the tree's `core` first on PYTHONPATH) -----------------


def work_write(db: str) -> None:
    """Ingest one small memory at a time until stdin closes; print each write's start and
    end (CLOCK_MONOTONIC, the same in every process)."""
    import threading

    from semantic_memory.models import NewMemory

    engine = _engine(db)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    spans: list[tuple[float, float]] = []
    print("ready", flush=True)
    i = 0
    while not stop.is_set():
        start = time.monotonic()
        engine.ingest([NewMemory(f"writer note {i} about the deploy pipeline", project="p2")],
                      batch_is_session=False)
        spans.append((start, time.monotonic()))
        i += 1
        time.sleep(WRITE_PAUSE_S)
    engine.close()
    print(json.dumps(spans))


def _phases(engine: Any) -> dict[str, list[float]]:
    """Seconds each phase of a purge took, timed around the store's methods: the delete,
    one-transaction merges, merge steps, the VACUUM and the WAL cut."""
    from semantic_memory.stores import sqlite

    took: dict[str, list[float]] = {}

    def timed(name: str, call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return call(*args, **kwargs)
            finally:
                took.setdefault(name, []).append(time.monotonic() - start)
        return run

    store = engine.store
    store.purge = timed("delete", store.purge)
    store.flush_journal = timed("wal_cut", store.flush_journal)
    take = store._take_lock
    store._take_lock = lambda conn, statement, deadline: (
        timed("vacuum", take) if statement == "VACUUM" else take)(conn, statement, deadline)
    sqlite.merge_fts_indexes = timed("merge_one_transaction", sqlite.merge_fts_indexes)
    sqlite.merge_fts_step = timed("merge_step", sqlite.merge_fts_step)
    return took


def work_purge(db: str) -> None:
    engine = _engine(db)
    engine.counts()  # opened and warm, as the CLI's engine is
    took = _phases(engine)
    start = time.monotonic()
    report = engine.purge()
    end = time.monotonic()
    engine.close()
    print(json.dumps({"start": start, "end": end, "report": report.to_dict(), "phases": {
        name: {"n": len(s), "sum_s": round(sum(s), 3), "longest_s": round(max(s), 3)}
        for name, s in took.items()}}))


def work_matching(db: str) -> None:
    engine = _engine(db)
    engine.counts()
    start = time.monotonic()
    report = engine.purge_matching(engine.holding(MATCH), MATCH)
    end = time.monotonic()
    engine.close()
    print(json.dumps({"start": start, "end": end, "report": report.to_dict()}))


# --- driver ------------------------------------------------------------------------------------


def _tree(rev: str, into: Path) -> Path:
    """`core` of `rev`, extracted (no worktree)."""
    archive = subprocess.run(["git", "archive", rev, "core"], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree / "core"))


def _checks(db: Path, word: str) -> dict[str, Any]:
    """Whether any file of the store holds `word`, and each FTS5 index's integrity-check."""
    import sqlite3

    holding = sorted(f.name for f in db.parent.glob(f"{db.name}*")
                     if f.is_file() and word.encode() in f.read_bytes().lower())
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]
        whole = {}
        for table in tables:
            try:
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                whole[table] = "ok"
            except sqlite3.DatabaseError as exc:
                whole[table] = str(exc)
    finally:
        conn.close()
    return {"files_holding": holding, "integrity": whole}


def _round(tree: Path, task: str, prepared: Path, folder: Path) -> dict[str, Any]:
    """One purge (`task`) by `tree` on a fresh copy of `prepared`, this tree's writer beside."""
    db = folder / "run.db"
    _unlink_journal(db)
    shutil.copyfile(prepared, db)
    writer = subprocess.Popen([sys.executable, __file__, "--worker", "write", "--db", str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=_env(REPO))
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        done = subprocess.run([sys.executable, __file__, "--worker", task, "--db", str(db)],
                              env=_env(tree), capture_output=True, text=True, cwd=tree)
        if done.returncode:
            raise SystemExit(f"{task} in {tree}: {done.stderr[-2000:]}")
        purge = json.loads(done.stdout.splitlines()[-1])
        out, _ = writer.communicate("", timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
    spans = json.loads(out.splitlines()[-1])
    during = [end - start for start, end in spans
              if end > purge["start"] and start < purge["end"]]
    checks = _checks(db, GONE if task == "purge" else MATCH)
    return {"purge_s": round(purge["end"] - purge["start"], 2),
            "longest_write_wait_s": round(max(during, default=0.0), 3),
            "write_wait_sum_s": round(sum(during), 2),
            "writes_during": len(during), "phases": purge.get("phases"), "ok": not checks["files_holding"] and all(
                v == "ok" for v in checks["integrity"].values()), "checks": checks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--baseline", default="HEAD", help="a revision to measure in the same run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--forget", type=float, default=0.01, help="share of memories forgotten")
    parser.add_argument("--tasks", default="purge,matching")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        globals()[f"work_{args.worker}"](str(args.db))
        return
    with tempfile.TemporaryDirectory(prefix="purge-wait-", dir=args.db.parent) as tmp:
        folder = Path(tmp)
        (folder / "baseline").mkdir()
        trees = {args.baseline: _tree(args.baseline, folder / "baseline"), "tree": REPO}
        prepared = folder / "prepared.db"
        result: dict[str, Any] = {"store": prepare(args.db, prepared, args.forget)}
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            task: {name: [] for name in trees} for task in args.tasks.split(",")}
        for _ in range(args.rounds):
            for task in runs:
                for name, tree in trees.items():
                    runs[task][name].append(_round(tree, task, prepared, folder))
        for task, by_tree in runs.items():
            medians = {name: {key: statistics.median(r[key] for r in rounds) for key in (
                "purge_s", "longest_write_wait_s", "write_wait_sum_s", "writes_during")}
                for name, rounds in by_tree.items()}
            tree, base = medians["tree"], medians[args.baseline]
            result[task] = {"median": medians, "rounds": by_tree, "ratio_tree_vs_baseline": {
                key: round(tree[key] / base[key], 2) if base[key] else None
                for key in ("purge_s", "longest_write_wait_s", "write_wait_sum_s")}}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
