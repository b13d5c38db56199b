"""Service benchmark: cold start to the first /health, and /recall and /ingest latency and
throughput from concurrent clients on loopback at 100k memories.

    uv run --all-packages python bench/bench_service.py                 # defaults below, JSON out
    uv run --all-packages python bench/bench_service.py --memories 20000 --seconds 5 --cold-runs 7

What it measures (medians are quoted; every number comes from this run, on this machine):

- cold start: spawn `memory-mcp` (MEMORY_PORT=0, empty db) -> MEMORY_MCP_LISTENING line ->
  first 200 from /health. Also with only the BM25 plugins loaded and on the 100k db. Baseline in
  the same run: a minimal Starlette app with one /health route on the same uvicorn, so
  `ratio_to_minimal_app` is the service's own start-up cost.
- first recall: on the 100k db, ten hook-like /recall calls (one connection each, the same
  question) right after the listening line; the first against the same run's later ones
  (median of the 6th-10th):
  what the first hook after a restart pays beyond a warm recall (issue 21: within 2x).
- load: a real server on the 100k db (BM25 channels only), 16 concurrent keep-alive clients
  (a light asyncio HTTP/1.1 client in this process, so the server has the other core):
  * recall_saturated: closed loop, LoCoMo questions (natural-language, long OR queries);
  * recall_paced: the same queries at a quarter of the saturated rate (latency when not queueing);
  * recall_keywords: closed loop, two-word keyword queries;
  * recall_no_match: closed loop, queries no memory matches: the service path's own floor;
  * ingest_saturated: closed loop, new LoCoMo-like memories, one per request.
  Baseline in the same run: the same calls straight on `MemoryEngine` in one thread, so
  `ratio_to_engine` (paced HTTP p50 / direct p50) is what the service layer adds.

Targets (issue #3): cold start <= 0.3 s without a model; /recall p50 <= 10 ms at 100k
memories, BM25-only, 16 clients. `targets` in the output says which were met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DEFAULT_DATA, load
from scale import PROJECTS, synthetic
from semantic_memory.config import Settings
from semantic_memory.harness.client import ServiceClient
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
LISTENING = "MEMORY_MCP_LISTENING "
NON_BM25 = {"vector", "llama_cpp"}  # plugins that bring an embedder / vector channel

MINIMAL_APP = """
import socket, sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
async def health(request):
    return JSONResponse({"ok": True})
sock = socket.socket(); sock.bind(("127.0.0.1", 0)); sock.listen(2048)
print("MEMORY_MCP_LISTENING {\\"url\\": \\"http://127.0.0.1:%d\\"}" % sock.getsockname()[1],
      flush=True)
uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/health", health)]),
                              log_level="warning")).run(sockets=[sock])
"""


# --- helpers ----------------------------------------------------------------------------------


def stats_ms(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    if not ms:
        return {}
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2)}


def bm25_plugins() -> str:
    names = sorted({ep.name for ep in entry_points(group="semantic_memory")} - NON_BM25)
    return ",".join(names)


def memory_mcp() -> list[str]:
    script = Path(sys.executable).with_name("memory-mcp")
    return [str(script)] if script.exists() else [
        sys.executable, "-c", "from semantic_memory.cli import main; main()"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    # Measure a normal installation: byte-code caches may be written and used.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(MEMORY_PORT="0", MEMORY_DEVICE="cpu", **extra)
    return env


def spawn(cmd: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(LISTENING):
            return proc, json.loads(line[len(LISTENING):])
    proc.wait()
    raise RuntimeError(f"{cmd[0]} exited with {proc.returncode} before listening")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cold_start(cmd: list[str], env: dict[str, str], runs: int, fresh_db: bool) -> dict[str, Any]:
    """Seconds from spawn to the first 200 of /health, `runs` times (after one warm-up)."""
    samples = []
    for i in range(runs + 1):
        with tempfile.TemporaryDirectory(prefix="cold-") as tmp:
            run_env = dict(env)
            if fresh_db:
                run_env["MEMORY_DB_PATH"] = str(Path(tmp) / "memory.db")
            t0 = time.perf_counter()
            proc, info = spawn(cmd, run_env)
            with urllib.request.urlopen(info["url"] + "/health", timeout=30) as response:
                assert response.status == 200
            elapsed = time.perf_counter() - t0
            stop(proc)
        if i:  # the first run warms the OS and byte-code caches
            samples.append(elapsed)
    samples.sort()
    return {"runs": runs, "median_s": round(statistics.median(samples), 3),
            "min_s": round(samples[0], 3), "p90_s": round(samples[int(0.9 * (len(samples) - 1))], 3)}


def first_recall(cmd: list[str], env: dict[str, str], runs: int,
                 queries: list[str]) -> dict[str, Any]:
    """Per start: the first /recall right after the listening line, and the median of the 6th
    to 10th (the same run's baseline), all ten for the same question (what differs is only
    what the service had done before); medians over `runs` starts, and the worst ratio."""
    firsts, laters, ratios = [], [], []
    for run in range(runs):
        proc, info = spawn(cmd, env)
        try:
            took = []
            body = {"query": queries[run % len(queries)], "k": 10, "budget_chars": 2000,
                    "relevant_only": True}
            for _ in range(10):
                # The hooks' own client: no lazy imports of its own in the first figure
                # (urllib's first request imports the email parser).
                client = ServiceClient(info["url"], time.monotonic() + 60)
                t = time.perf_counter()
                client.post("/recall", body)
                took.append(time.perf_counter() - t)
        finally:
            stop(proc)
        later = statistics.median(took[5:])
        firsts.append(took[0])
        laters.append(later)
        ratios.append(took[0] / later)
    return {"runs": runs, "first_ms": round(statistics.median(firsts) * 1000, 2),
            "later_p50_ms": round(statistics.median(laters) * 1000, 2),
            "ratio_median": round(statistics.median(ratios), 2),
            "ratio_worst": round(max(ratios), 2)}


# --- a light HTTP/1.1 keep-alive client -------------------------------------------------------


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.head = f"Host: {host}:{port}\r\nContent-Type: application/json\r\n".encode()

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: bytes) -> int:
        self.writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\n" + self.head
                          + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        status = int((await self.reader.readline()).split()[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


async def load_phase(url: str, path: str, bodies: list[bytes], clients: int, seconds: float,
                     rate: float | None = None) -> dict[str, Any]:
    """`clients` connections post `bodies` (round robin) for `seconds`; closed loop, or paced to
    `rate` requests/s in total."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conns = [Connection(host, int(port)) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    latencies: list[float] = []
    errors = 0
    counter = iter(range(10**12))
    start = time.perf_counter()
    deadline = start + seconds

    async def client(conn: Connection, index: int) -> None:
        nonlocal errors
        interval = clients / rate if rate else 0.0
        next_at = start + (interval * index / clients if rate else 0.0)
        while True:
            if rate:
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at += interval
            now = time.perf_counter()
            if now >= deadline:
                return
            status = await conn.post(path, bodies[next(counter) % len(bodies)])
            latencies.append(time.perf_counter() - now)
            if status != 200:
                errors += 1

    await asyncio.gather(*(client(c, i) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - start
    for c in conns:
        c.close()
    return {"clients": clients, "seconds": round(elapsed, 2), "requests": len(latencies),
            "errors": errors, "throughput_rps": round(len(latencies) / elapsed, 1),
            **stats_ms(latencies)}


# --- the 100k database ------------------------------------------------------------------------


def build_db(path: Path, texts: list[str], plugins: str) -> float:
    """Fill `path` with `texts` (cached across runs: an existing complete db is reused)."""
    settings = Settings(db_path=str(path), device="cpu", plugins=plugins,
                        maintenance_on_start=False)
    engine = MemoryEngine(settings)
    try:
        if engine.count() >= len(texts):
            return 0.0
        t = time.perf_counter()
        for start in range(engine.count(), len(texts), 2000):
            engine.ingest([NewMemory(x, kind="note", source="import",
                                     project=f"p{(start + i) % PROJECTS}")
                           for i, x in enumerate(texts[start:start + 2000])])
        engine.store.optimize()  # as `memory-mcp import` does after a bulk import
        return time.perf_counter() - t
    finally:
        engine.close()


def direct_baseline(path: Path, plugins: str, questions: list[str], keywords: list[str],
                    new_texts: list[str]) -> dict[str, Any]:
    """The same calls straight on MemoryEngine, one thread (no HTTP, no concurrency)."""
    engine = MemoryEngine(Settings(db_path=str(path), device="cpu", plugins=plugins))
    try:
        def timed(fn: Any, items: list[str]) -> dict[str, float]:
            out = []
            for item in items:
                t = time.perf_counter()
                fn(item)
                out.append(time.perf_counter() - t)
            return stats_ms(out)

        for q in questions[:20]:
            engine.recall(q, 10)
        budget = 2000
        return {
            "recall_questions": timed(lambda q: engine.injection_block(
                q, engine.recall(q, 10), budget), questions[:200]),
            "recall_keywords": timed(lambda q: engine.injection_block(
                q, engine.recall(q, 10), budget), keywords[:300]),
            "ingest": timed(lambda x: engine.store_one(NewMemory(x, project="direct")),
                            new_texts[:300]),
        }
    finally:
        engine.close()


# --- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0, help="per load phase")
    parser.add_argument("--cold-runs", type=int, default=11)
    parser.add_argument("--plugins", default=None,
                        help="MEMORY_PLUGINS for the load phases (default: every installed "
                             "plugin except the vector/embedder ones, i.e. BM25-only)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    plugins = args.plugins or bm25_plugins()
    rng = random.Random(args.seed)
    report: dict[str, Any] = {"memories": args.memories, "clients": args.clients,
                              "plugins": plugins, "python": sys.version.split()[0],
                              # the machine may be shared: context for every number below
                              "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}

    def log(message: str) -> None:
        print(f"[bench_service] {message}", file=sys.stderr, flush=True)

    # 1. cold start --------------------------------------------------------------------------
    log("cold start")
    cold = {
        "service_default_plugins": cold_start(memory_mcp(), clean_env(), args.cold_runs, True),
        "service_bm25_plugins": cold_start(memory_mcp(), clean_env(MEMORY_PLUGINS=plugins),
                                           args.cold_runs, True),
        "minimal_starlette_app": cold_start([sys.executable, "-c", MINIMAL_APP], clean_env(),
                                            args.cold_runs, True),
    }
    floor = cold["minimal_starlette_app"]["median_s"]
    for key in ("service_default_plugins", "service_bm25_plugins"):
        cold[key]["ratio_to_minimal_app"] = round(cold[key]["median_s"] / floor, 2)
    report["cold_start"] = cold

    # 2. the database ------------------------------------------------------------------------
    data = load(DEFAULT_DATA)
    texts = synthetic(args.memories + 20_000, DEFAULT_DATA, args.seed)
    base, extra = texts[:args.memories], texts[args.memories:]
    questions = [q.text for c in data for q in c.questions]
    rng.shuffle(questions)
    vocab = sorted({w.strip(".,!?'\"").lower() for t in base[:5000] for w in t.split()[1:]
                    if len(w) > 4 and w.isalpha()})
    keywords = [" ".join(rng.sample(vocab, 2)) for _ in range(2000)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    db = RESULTS / f"service-{args.memories}-{plugins.replace(',', '+')}.db"
    log(f"database {db.name}")
    build_s = build_db(db, base, plugins)
    report["db"] = {"path": str(db.relative_to(REPO)), "build_s": round(build_s, 1),
                    "reused": build_s == 0.0, "mb": round(db.stat().st_size / 1e6, 1)}
    scratch = tempfile.TemporaryDirectory(prefix="bench-service-")
    work = Path(scratch.name) / "memory.db"
    shutil.copyfile(db, work)  # the load phases write; the cached db stays as built
    db = work
    cold_big = cold_start(memory_mcp(), clean_env(MEMORY_PLUGINS=plugins, MEMORY_DB_PATH=str(db),
                                                  MEMORY_MAINTENANCE_ON_START="1"),
                          max(3, args.cold_runs // 2), False)
    report["cold_start"]["service_bm25_plugins_on_db"] = cold_big
    log("first recall after a start")
    report["first_recall"] = first_recall(
        memory_mcp(), clean_env(MEMORY_PLUGINS=plugins, MEMORY_DB_PATH=str(db),
                                MEMORY_MAINTENANCE_ON_START="0"),
        max(3, args.cold_runs // 2), questions)

    # 3. load through the real server --------------------------------------------------------
    log("load phases")
    proc, info = spawn(memory_mcp(), clean_env(MEMORY_PLUGINS=plugins, MEMORY_DB_PATH=str(db),
                                               MEMORY_MAINTENANCE_ON_START="0"))
    try:
        def recall_body(q: str) -> bytes:
            return json.dumps({"query": q, "k": 10, "budget_chars": 2000}).encode()

        q_bodies = [recall_body(q) for q in questions]
        k_bodies = [recall_body(q) for q in keywords]
        # words found in no memory: the channels return at once, so this is the service's own
        # floor (HTTP, JSON, thread hop, fusion of empty lists)
        n_bodies = [recall_body(f"zqx{i}vbk") for i in range(1000)]
        i_bodies = [json.dumps({"content": x, "project": "bench", "kind": "note"}).encode()
                    for x in extra]
        url = info["url"]

        async def phases() -> dict[str, Any]:
            out: dict[str, Any] = {}
            await load_phase(url, "/recall", q_bodies[:50], args.clients, 1.0)  # warm-up
            out["recall_saturated"] = await load_phase(url, "/recall", q_bodies, args.clients,
                                                       args.seconds)
            rate = max(1.0, out["recall_saturated"]["throughput_rps"] / 4)
            out["recall_paced"] = await load_phase(url, "/recall", q_bodies, args.clients,
                                                   min(30.0, max(args.seconds, 80 / rate)),
                                                   rate=rate)
            out["recall_paced"]["offered_rps"] = round(rate, 1)
            out["recall_keywords"] = await load_phase(url, "/recall", k_bodies, args.clients,
                                                      args.seconds)
            out["recall_no_match"] = await load_phase(url, "/recall", n_bodies, args.clients,
                                                      args.seconds)
            out["ingest_saturated"] = await load_phase(url, "/ingest", i_bodies, args.clients,
                                                       args.seconds)
            return out

        report["http"] = asyncio.run(phases())
    finally:
        stop(proc)

    # 4. baseline: the engine without HTTP ---------------------------------------------------
    log("direct engine baseline")
    direct = direct_baseline(db, plugins, questions, keywords, extra[-1000:])
    report["engine_direct"] = direct
    http = report["http"]
    report["ratios"] = {
        "recall_paced_p50_to_engine_p50": round(
            http["recall_paced"]["p50_ms"] / direct["recall_questions"]["p50_ms"], 2),
        "recall_keywords_p50_to_engine_p50": round(
            http["recall_keywords"]["p50_ms"] / direct["recall_keywords"]["p50_ms"], 2),
        "ingest_p50_to_engine_p50": round(
            http["ingest_saturated"]["p50_ms"] / direct["ingest"]["p50_ms"], 2),
    }
    scratch.cleanup()
    report["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["targets"] = {
        "cold_start_s<=0.3 (bm25 plugins, empty db)": {
            "median": cold["service_bm25_plugins"]["median_s"],
            "met": cold["service_bm25_plugins"]["median_s"] <= 0.3},
        "cold_start_s<=0.3 (all installed plugins, empty db)": {
            "median": cold["service_default_plugins"]["median_s"],
            "met": cold["service_default_plugins"]["median_s"] <= 0.3},
        "first_recall<=2x later (right after the listening line, 100k db)": {
            "ratio_median": report["first_recall"]["ratio_median"],
            "met": report["first_recall"]["ratio_median"] <= 2},
        "recall_p50_ms<=10 (16 clients, saturated, questions)": {
            "p50": http["recall_saturated"]["p50_ms"],
            "met": http["recall_saturated"]["p50_ms"] <= 10},
        "recall_p50_ms<=10 (16 clients, paced, questions)": {
            "p50": http["recall_paced"]["p50_ms"], "met": http["recall_paced"]["p50_ms"] <= 10},
        "recall_p50_ms<=10 (16 clients, saturated, keywords)": {
            "p50": http["recall_keywords"]["p50_ms"],
            "met": http["recall_keywords"]["p50_ms"] <= 10},
        "recall_p50_ms<=10 (16 clients, saturated, no match: service floor)": {
            "p50": http["recall_no_match"]["p50_ms"],
            "met": http["recall_no_match"]["p50_ms"] <= 10},
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
