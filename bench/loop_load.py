"""Nothing lost under load: real hook processes writing through a loaded (or stopped) service,
checked against the ground truth.

    uv run --all-packages python bench/loop_load.py                         # SQLite, 30 s
    uv run --all-packages python bench/loop_load.py --store postgres        # embedded PostgreSQL
    uv run --all-packages python bench/loop_load.py --cpu-hogs 2            # + busy loops
    uv run --all-packages python bench/loop_load.py --restart-at 10 --down-s 5   # SIGTERM mid-run
    uv run --all-packages python bench/loop_load.py --store postgres \
        --service-env MEMORY_DB_POOL_SIZE=40                               # a larger pool

A real service (`memory-mcp`, BM25 plugins, `--memories` synthetic memories already stored) on a
random 127.0.0.1 port with its own temp db folder. For `--seconds`:

- `--clients` REST clients (keep-alive, closed loop) post LoCoMo questions to /recall and, one
  request in `--ingest-every`, a new memory to /ingest (bench_service.py's client);
- `--hook-workers` threads each play Claude Code sessions one after another, every hook a real
  `memory-mcp hook claude-code <event>` process with the default budget (MEMORY_HOOK_BUDGET_S,
  1.5 s): UserPromptSubmit "remember that <fact>", then PreCompact (auto) flushing the
  transcript so far, then a compaction boundary, more turns and SessionEnd flushing those. The
  transcript is a JSON-lines file in Claude Code's own format; every turn and fact is unique;
- `--cpu-hogs` busy-loop processes (a loaded machine), and with `--restart-at` the service is
  stopped (SIGTERM) that many seconds in and started again on the same port `--down-s` later.

Then the load stops, the service drains the spool (it looks every 3 s; `memory-mcp spool replay`
after `--drain-timeout`), the service stops, and the store is read back. Ground truth: every
flushed chunk (`User: …\\nAssistant: …` of each exchange, a remember prompt and its "Noted."
excepted) and every remembered fact is stored exactly once, and so is every client write the
service acknowledged; `lost`, `duplicated` and `altered` (found by its tag, other text) count the
misses. Also: hook outcomes per event (from the hook log), hook wall time spawn to exit (p50 /
p95; a same-run baseline: `--baseline-sessions` sessions on the idle service before the load),
REST latency, spool depth peak and drain time. Prints one JSON object; exits 1 when anything
was lost or duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_service import Connection, bm25_plugins, clean_env, memory_mcp  # noqa: E402
from locomo import DEFAULT_DATA  # noqa: E402
from semantic_memory import spool  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.harness.transcript import remembered  # noqa: E402

LISTENING = "MEMORY_MCP_LISTENING "
PROJECT = "loop-load"
#: The tag every text of this run carries, and what it names (a turn, a fact, a client note).
TAG = re.compile(r"loop run (\d+) (session \d+ turn \d+|fact \d+|client \d+ note \d+)")
WORDS = ("harbor", "lantern", "granite", "meadow", "cobalt", "willow", "falcon", "ember",
         "quartz", "juniper", "saffron", "tundra", "orchid", "basalt", "cedar", "delta")


def stats_ms(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1),
            "max_ms": round(ms[-1], 1)}


def log(message: str) -> None:
    print(f"[loop_load] {message}", file=sys.stderr, flush=True)


# --- text ------------------------------------------------------------------------------------


class Texts:
    """LoCoMo sentences and questions when the data is there, else made-up sentences: the
    words a turn is made of (uniqueness comes from its tag, not from them)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sentences: list[str] = []
        self.questions: list[str] = []
        if DEFAULT_DATA.exists():
            from locomo import load

            data = load(DEFAULT_DATA)
            # Not a turn that reads as a "remember" prompt ("Remember that epic block in Game
            # 7?"): the flush leaves those out, as the prompt hook stored them when they were
            # typed, but the talk turns here go straight into the transcript, past that hook.
            self.sentences = [s for c in data for _, t in c.turns
                              if remembered(s := t.split(": ", 1)[-1]) is None]
            self.questions = [q.text for c in data for q in c.questions]
        if not self.sentences:
            self.sentences = [" ".join(self.rng.choices(WORDS, k=12)) + "." for _ in range(500)]
            self.questions = [f"what about the {a} and the {b}?"
                              for a in WORDS for b in WORDS if a != b]

    def sentence(self, limit: int = 300) -> str:
        return " ".join(self.rng.choice(self.sentences).split())[:limit].strip()

    def question(self) -> str:
        return self.rng.choice(self.questions)


def synthetic_memories(n: int, seed: int) -> list[str]:
    if n <= 0:
        return []
    if DEFAULT_DATA.exists():
        from scale import synthetic

        return synthetic(n, DEFAULT_DATA, seed)
    rng = random.Random(seed)
    return [f"note {i}: " + " ".join(rng.choices(WORDS, k=14)) for i in range(n)]


# --- the service -----------------------------------------------------------------------------


class Service:
    """`memory-mcp` on 127.0.0.1: first on a random port, restarted on the same one."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder = env, folder
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> float:
        """Start it and wait for its listening line; seconds that took."""
        env = dict(self.env, MEMORY_PORT=str(self.port))
        self.starts += 1
        errors = open(self.folder / f"service-{self.starts}.log", "w")
        began = time.monotonic()
        self.proc = subprocess.Popen(memory_mcp(), env=env, text=True, stdout=subprocess.PIPE,
                                     stderr=errors, stdin=subprocess.DEVNULL)
        errors.close()
        assert self.proc.stdout is not None
        deadline = began + timeout
        for line in self.proc.stdout:
            if line.startswith(LISTENING):
                url = json.loads(line[len(LISTENING):])["url"]
                self.port = int(url.rsplit(":", 1)[1])
                threading.Thread(target=self._drain_stdout, daemon=True).start()
                return time.monotonic() - began
            if time.monotonic() > deadline:
                break
        self.proc.kill()
        self.proc.wait()
        log_text = (self.folder / f"service-{self.starts}.log").read_text(errors="replace")
        raise RuntimeError(f"memory-mcp did not start: {log_text[-1500:]}")

    def _drain_stdout(self) -> None:
        proc = self.proc
        if proc is not None and proc.stdout is not None:
            for _ in proc.stdout:
                pass

    def stop(self, timeout: float = 30.0) -> float:
        """SIGTERM, then SIGKILL after `timeout`; seconds until it was gone."""
        if self.proc is None:
            return 0.0
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        return time.monotonic() - began


# --- REST clients ----------------------------------------------------------------------------


@dataclass
class RestLoad:
    recall: list[float] = field(default_factory=list)
    ingest: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)  # what went wrong, how often
    acked: list[str] = field(default_factory=list)  # client notes the service answered 200 to


async def rest_clients(service: Service, clients: int, stop: threading.Event, run: int,
                       texts: Texts, ingest_every: int, max_requests: int) -> RestLoad:
    """Closed-loop keep-alive clients until `stop`; they reconnect when the service goes away
    (a restart), counting what failed meanwhile as errors."""
    out = RestLoad()
    sent = 0
    bodies = [json.dumps({"query": texts.question(), "k": 10, "budget_chars": 2000}).encode()
              for _ in range(500)]

    async def client(index: int) -> None:
        nonlocal sent
        conn: Connection | None = None
        n = 0
        while not stop.is_set() and sent < max_requests:
            if conn is None:
                conn = Connection("127.0.0.1", service.port)
                try:
                    await asyncio.wait_for(conn.open(), 5)
                except (OSError, asyncio.TimeoutError) as exc:
                    out.errors[f"connect: {type(exc).__name__}"] += 1
                    conn = None
                    await asyncio.sleep(0.2)
                    continue
            n += 1
            sent += 1
            note = None
            if ingest_every and n % ingest_every == 0:
                note = f"{texts.sentence(200)} (loop run {run} client {index} note {n})"
                path, body = "/ingest", json.dumps({"content": note, "project": PROJECT,
                                                    "kind": "note"}).encode()
            else:
                path, body = "/recall", bodies[(index * 31 + n) % len(bodies)]
            began = time.perf_counter()
            try:
                status = await asyncio.wait_for(conn.post(path, body), 30)
            except (OSError, IndexError, ValueError, asyncio.IncompleteReadError,
                    asyncio.TimeoutError) as exc:
                out.errors[f"{path}: {type(exc).__name__}"] += 1
                conn.close()
                conn = None
                await asyncio.sleep(0.2)
                continue
            (out.ingest if note else out.recall).append(time.perf_counter() - began)
            if status != 200:
                out.errors[f"{path}: HTTP {status}"] += 1
            elif note:
                out.acked.append(note)
        if conn is not None:
            conn.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return out


# --- hook sessions ---------------------------------------------------------------------------


@dataclass
class Truth:
    """What the hooks were asked to store, and how each hook run went (bench side)."""

    chunks: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Sessions:
    """Claude Code sessions, each three hook processes: remember, PreCompact, SessionEnd."""

    def __init__(self, folder: Path, env: dict[str, str], run: int, texts: Texts,
                 exchanges: int) -> None:
        self.folder, self.env, self.run, self.texts = folder, env, run, texts
        self.exchanges = exchanges
        self.truth = Truth()
        self._next = 0
        self._lock = threading.Lock()

    def new_id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def play(self, phase: str) -> None:
        n = self.new_id()
        sid = f"loop-{self.run}-{n}"
        path = self.folder / "transcripts" / f"{sid}.jsonl"
        path.parent.mkdir(exist_ok=True)
        base = {"session_id": sid, "transcript_path": str(path), "cwd": str(self.folder)}
        turn = 0
        entries: list[dict[str, Any]] = []
        chunks: list[str] = []

        def exchange(user: str, reply: str) -> None:
            entries.append(_entry(sid, "user", user, len(entries)))
            entries.append(_entry(sid, "assistant", reply, len(entries)))

        def talk(count: int) -> None:
            nonlocal turn
            for _ in range(count):
                turn += 1
                user = (f"{self.texts.sentence(160)} What should we do about it? "
                        f"(loop run {self.run} session {n} turn {turn})")
                reply = f"{self.texts.sentence()} {self.texts.sentence()}"
                exchange(user, reply)
                chunks.append(f"User: {user}\nAssistant: {reply}")

        talk(self.exchanges)
        fact = (f"the {self.texts.rng.choice(WORDS)} rollout of loop run {self.run} fact {n} "
                f"ships on day {self.texts.rng.randrange(1, 29)}")
        _write(path, entries)
        self._hook(phase, sid, "UserPromptSubmit", {**base, "hook_event_name": "UserPromptSubmit",
                                               "prompt": f"remember that {fact}"})
        exchange(f"remember that {fact}", "Noted.")  # left out of the flush: stored as a fact
        talk(1)
        _write(path, entries)
        self._hook(phase, sid, "PreCompact", {**base, "hook_event_name": "PreCompact",
                                         "trigger": "auto", "custom_instructions": ""})
        entries.append({"parentUuid": None, "isSidechain": False, "type": "system",
                        "subtype": "compact_boundary", "content": "Conversation compacted",
                        "isMeta": False, "level": "info",
                        "compactMetadata": {"trigger": "auto", "preTokens": 20000},
                        "uuid": _uuid(len(entries)), "sessionId": sid})
        entries.append({"parentUuid": None, "isSidechain": False, "type": "user",
                        "message": {"role": "user", "content": "Summary: the session so far."},
                        "isVisibleInTranscriptOnly": True, "isCompactSummary": True,
                        "uuid": _uuid(len(entries)), "sessionId": sid})
        talk(self.exchanges)
        _write(path, entries)
        self._hook(phase, sid, "SessionEnd", {**base, "hook_event_name": "SessionEnd",
                                         "reason": "other"})
        with self.truth.lock:
            self.truth.chunks += chunks
            self.truth.facts.append(fact)

    def _hook(self, phase: str, sid: str, event: str, payload: dict[str, Any]) -> None:
        began = time.monotonic()
        done = subprocess.run(memory_mcp() + ["hook", "claude-code", event],
                              input=json.dumps(payload).encode(), env=self.env,
                              capture_output=True, timeout=60)
        wall = time.monotonic() - began
        with self.truth.lock:
            self.truth.runs.append({"phase": phase, "session": sid, "event": event,
                                    "wall_s": wall,
                                    "rc": done.returncode, "at": time.time()})


def _uuid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def _entry(sid: str, role: str, text: str, i: int) -> dict[str, Any]:
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    return {"parentUuid": None, "isSidechain": False, "type": role,
            "message": {"role": role, "content": content}, "uuid": _uuid(i),
            "timestamp": "2026-12-01T09:23:02.000Z", "sessionId": sid, "version": "2.1.332"}


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    """The whole transcript, compact JSON per line as Claude Code writes it (the compaction
    marker is matched as bytes, `"subtype":"compact_boundary"`)."""
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries))


# --- the spool -------------------------------------------------------------------------------


class SpoolWatch(threading.Thread):
    """Samples the spool's depth (queued + claimed writes) every `interval` seconds."""

    def __init__(self, folder: Path, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.folder, self.interval = folder, interval
        self.peak = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.peak = max(self.peak, spool.depth(self.folder).count)
            self.halt.wait(self.interval)


def wait_drained(folder: Path, timeout: float) -> float | None:
    """Seconds until the spool is empty (claims included); None when it still is not."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if spool.depth(folder).count == 0:
            return time.monotonic() - began
        time.sleep(0.1)
    return None


# --- the store, read back --------------------------------------------------------------------


def stored_texts(db_path: Path, db_url: str, run: int) -> list[str]:
    """The content of every live memory carrying this run's tag (read after the service
    stopped, straight from the store)."""
    like = f"%loop run {run} %"
    sql = "SELECT content FROM memories WHERE deleted = 0 AND content LIKE {}"
    if db_url:
        import psycopg

        with psycopg.connect(db_url) as conn:
            return [row[0] for row in conn.execute(sql.format("%s"), (like,))]
    import sqlite3

    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute(sql.format("?"), (like,))]
    finally:
        conn.close()


def check(expected: dict[str, list[str]], rows: list[str]) -> dict[str, Any]:
    """Each expected text stored exactly once: counted by content; a miss found by its tag
    under other text is `altered` (e.g. redacted), one not found at all is `lost`."""
    by_content = Counter(rows)
    by_tag: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        for found in TAG.finditer(row):
            by_tag[found.group(2)].append(row)
    out: dict[str, Any] = {}
    expected_all: set[str] = set()
    for kind, texts in expected.items():
        lost, duplicated, altered = [], [], []
        for text in texts:
            expected_all.add(text)
            count = by_content[text]
            if count > 1:
                duplicated.append(text)
            elif count == 0:
                tag = TAG.search(text)
                (altered if tag and by_tag.get(tag.group(2)) else lost).append(text)
        out[kind] = {"expected": len(texts), "stored_once": len(texts) - len(lost)
                     - len(duplicated) - len(altered), "lost": len(lost),
                     "duplicated": len(duplicated), "altered": len(altered),
                     "examples": [t[:160] for t in (lost + duplicated + altered)[:3]]}
        if altered:  # what was stored instead, for the report
            out[kind]["altered_to"] = [by_tag[tag.group(2)][0][:400] for text in altered[:3]
                                       if (tag := TAG.search(text))]
    # Rows of this run that are no expected text: a fact stored again inside a chunk, a
    # piece of a chunk, a changed copy.
    out["unexpected_rows"] = sum(1 for row in rows if row not in expected_all)
    for key in ("lost", "duplicated", "altered"):
        out[key] = sum(v[key] for k, v in out.items() if isinstance(v, dict))
    return out


# --- outcomes --------------------------------------------------------------------------------


def hook_outcomes(folder: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The hook log's outcomes, per event (the log is this run's alone: its own folder), and
    the hook runs that left no line in it."""
    per_event: dict[str, Counter[str]] = defaultdict(Counter)
    logged: Counter[tuple[str, str]] = Counter()
    failures: Counter[str] = Counter()
    replayed = 0
    for name in ("hooks.jsonl.1", "hooks.jsonl"):
        try:
            lines = (folder / name).read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            per_event[entry.get("event", "?")][entry.get("outcome", "?")] += 1
            logged[(str(entry.get("session", "")).split("+")[0], entry.get("event", ""))] += 1
            if entry.get("outcome") in ("timeout", "error", "service down"):
                failures[f"{entry.get('outcome')}: {entry.get('detail', '')}"[:120]] += 1
            replayed += int(entry.get("replayed", 0))
    total: Counter[str] = Counter()
    for counts in per_event.values():
        total.update(counts)
    return {"total": dict(total), "by_event": {k: dict(v) for k, v in per_event.items()},
            "spool_writes_replayed_by_hooks": replayed,
            "runs_without_a_log_line": max(0, len(runs) - sum(total.values())),
            "sessions_without_a_log_line": sorted({r["session"] for r in runs
                                                   if not logged[(r["session"], r["event"])]})[:5],
            "failure_details": dict(failures.most_common(6))}


# --- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--seconds", type=float, default=30.0, help="load duration")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--hook-workers", type=int, default=6,
                        help="sessions played at once (each hook a process)")
    parser.add_argument("--max-sessions", type=int, default=400, help="at most this many")
    parser.add_argument("--exchanges", type=int, default=4,
                        help="exchanges per flush (each one chunk)")
    parser.add_argument("--ingest-every", type=int, default=5,
                        help="every n-th REST request is an /ingest (0: recall only)")
    parser.add_argument("--max-requests", type=int, default=500_000)
    parser.add_argument("--memories", type=int, default=20_000,
                        help="synthetic memories stored before the service starts")
    parser.add_argument("--cpu-hogs", type=int, default=0, help="busy-loop processes")
    parser.add_argument("--restart-at", type=float, default=0.0,
                        help="SIGTERM the service this many seconds in (0: never)")
    parser.add_argument("--down-s", type=float, default=5.0, help="how long it stays down")
    parser.add_argument("--baseline-sessions", type=int, default=3,
                        help="sessions on the idle service before the load (same-run baseline)")
    parser.add_argument("--drain-timeout", type=float, default=60.0)
    parser.add_argument("--service-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an extra setting for the service only, e.g. "
                             "MEMORY_DB_POOL_SIZE=32 (repeatable)")
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args(argv)
    if any("=" not in item for item in args.service_env):
        parser.error("--service-env takes NAME=VALUE")
    # A SIGTERM (a timeout) still stops the service and the CPU hogs: `finally` below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    run = random.Random().randrange(10**5, 10**6)
    texts = Texts(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="loop-load-"))
    db_path = tmp / "memory.db"
    report: dict[str, Any] = {
        "store": args.store, "seconds": args.seconds, "clients": args.clients,
        "hook_workers": args.hook_workers, "exchanges_per_flush": args.exchanges,
        "cpu_hogs": args.cpu_hogs, "memories": args.memories,
        "restart_at_s": args.restart_at or None,
        "cores": os.cpu_count(), "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}
    hogs: list[subprocess.Popen[bytes]] = []
    service: Service | None = None
    try:
        db_url = ""
        if args.store == "postgres":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
            import pg  # tests/pg.py: an embedded server, stopped at exit

            log("starting PostgreSQL")
            db_url = pg.new_database()
        plugins = bm25_plugins()
        base_env = clean_env(MEMORY_DB_PATH=str(db_path), MEMORY_PLUGINS=plugins,
                             MEMORY_PROJECT=PROJECT, MEMORY_PLUGIN_AUTOSTART="0",
                             MEMORY_DISCOVERY_FILE="off")
        if db_url:
            base_env["MEMORY_DB_URL"] = db_url
        prefill(args.memories, args.seed, db_path, db_url, plugins)
        extra = dict(item.split("=", 1) for item in args.service_env)
        report["service_env"] = extra or None
        service = Service(dict(base_env, MEMORY_MAINTENANCE_ON_START="0", **extra), tmp)
        report["service_start_s"] = round(service.start(), 2)
        hook_env = dict(base_env, MEMORY_PLUGIN_URL=service.url)
        hook_env.pop("MEMORY_DB_URL", None)  # a hook only needs the service and the spool
        report["hook_budget_s"] = Settings.from_env(hook_env).hook_budget_s
        sessions = Sessions(tmp, hook_env, run, texts, args.exchanges)

        log(f"baseline: {args.baseline_sessions} sessions on the idle service")
        for _ in range(args.baseline_sessions):
            sessions.play("baseline")

        log(f"load: {args.seconds} s, {args.clients} clients, {args.hook_workers} hook workers, "
            f"{args.cpu_hogs} CPU hogs")
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(args.cpu_hogs)]
        watch = SpoolWatch(spool_folder(db_path))
        watch.start()
        stop = threading.Event()
        rest: dict[str, RestLoad] = {}
        rest_thread = threading.Thread(target=lambda: rest.setdefault("load", asyncio.run(
            rest_clients(service, args.clients, stop, run, texts, args.ingest_every,
                         args.max_requests))), daemon=True)
        rest_thread.start()
        load_end = time.monotonic() + args.seconds

        def worker() -> None:
            while time.monotonic() < load_end and sessions._next < args.max_sessions:
                sessions.play("load")

        workers = [threading.Thread(target=worker, daemon=True)
                   for _ in range(args.hook_workers)]
        for thread in workers:
            thread.start()
        loads: list[float] = []
        restart: dict[str, Any] = {}
        began = time.monotonic()
        while time.monotonic() < load_end:
            loads.append(os.getloadavg()[0])
            if args.restart_at and not restart and time.monotonic() - began >= args.restart_at:
                restart = restart_service(service, args.down_s)
                restart["at_s"] = round(time.monotonic() - began - restart["down_s"], 1)
            time.sleep(0.5)
        stop.set()
        for thread in workers:
            thread.join()
        rest_thread.join()
        for hog in hogs:
            hog.terminate()
        for hog in hogs:
            hog.wait()
        report["loadavg_1min_max_during_load"] = round(max(loads, default=0.0), 2)
        report["loadavg_at_load_end"] = [round(x, 2) for x in os.getloadavg()]
        log("load stopped; draining the spool")

        at_end = spool.depth(spool_folder(db_path)).count
        drain_s = wait_drained(spool_folder(db_path), args.drain_timeout)
        watch.halt.set()
        watch.join()
        cli_replay = None
        if drain_s is None:
            done = subprocess.run(memory_mcp() + ["spool", "replay"], env=hook_env,
                                  capture_output=True, text=True, timeout=300)
            cli_replay = (done.stdout + done.stderr).strip()[-300:]
        depth = spool.depth(spool_folder(db_path))
        report["spool"] = {"peak_depth": watch.peak, "depth_at_load_end": at_end,
                           "drain_s": None if drain_s is None else round(drain_s, 2),
                           "cli_replay": cli_replay, "left": depth.count,
                           "rejected": depth.rejected}
        service.stop()
        service = None

        truth = sessions.truth
        load_rest = rest["load"]
        report["rest"] = {"recall": stats_ms(load_rest.recall),
                          "ingest": stats_ms(load_rest.ingest),
                          "errors": sum(load_rest.errors.values()),
                          "error_kinds": dict(load_rest.errors.most_common(5)),
                          "client_writes_acked": len(load_rest.acked)}
        report["restart"] = restart or None
        report["hooks"] = hook_report(truth, restart)
        report["hooks"]["outcomes"] = hook_outcomes(tmp, truth.runs)
        rows = stored_texts(db_path, db_url, run)
        report["ground_truth"] = check({"chunks": truth.chunks, "facts": truth.facts,
                                        "client_writes": load_rest.acked}, rows)
        gt = report["ground_truth"]
        report["ok"] = gt["lost"] == 0 and gt["duplicated"] == 0 and gt["altered"] == 0 \
            and depth.count == 0 and depth.rejected == 0
    finally:
        for hog in hogs:
            if hog.poll() is None:
                hog.kill()
        if service is not None:
            service.stop()
        if os.environ.get("LOOP_LOAD_KEEP"):
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


def spool_folder(db_path: Path) -> Path:
    return db_path.with_name("spool")  # Settings.spool_path


def prefill(n: int, seed: int, db_path: Path, db_url: str, plugins: str) -> None:
    """Store `n` synthetic memories straight through the engine, as `memory-mcp import` does."""
    if n <= 0:
        return
    from scale import import_synthetic
    from semantic_memory.pipeline import MemoryEngine

    log(f"storing {n} synthetic memories")
    engine = MemoryEngine(Settings(db_path=str(db_path), db_url=db_url, device="cpu",
                                   plugins=plugins, maintenance_on_start=False))
    try:
        import_synthetic(engine, synthetic_memories(n, seed))
        engine.store.optimize()
    finally:
        engine.close()


def restart_service(service: Service, down_s: float) -> dict[str, Any]:
    """SIGTERM the service, leave it down `down_s`, start it again on the same port."""
    log("stopping the service (SIGTERM)")
    down_at = time.time()
    stop_s = service.stop()
    time.sleep(down_s)
    start_s = service.start()
    log("service back")
    return {"stop_s": round(stop_s, 2), "down_s": round(time.time() - down_at, 2),
            "start_s": round(start_s, 2), "down_from": down_at, "down_until": time.time()}


def hook_report(truth: Truth, restart: dict[str, Any]) -> dict[str, Any]:
    runs = truth.runs
    out: dict[str, Any] = {
        "runs": len(runs), "sessions": len(truth.facts),
        "nonzero_exit": sum(r["rc"] != 0 for r in runs),
        "wall_baseline": stats_ms([r["wall_s"] for r in runs if r["phase"] == "baseline"]),
        "wall_load": stats_ms([r["wall_s"] for r in runs if r["phase"] == "load"]),
        "wall_load_by_event": {e: stats_ms([r["wall_s"] for r in runs
                                            if r["phase"] == "load" and r["event"] == e])
                               for e in ("UserPromptSubmit", "PreCompact", "SessionEnd")},
    }
    base, load = out["wall_baseline"], out["wall_load"]
    if base.get("n") and load.get("n"):
        out["wall_p50_load_vs_baseline"] = round(load["p50_ms"] / base["p50_ms"], 2)
    if restart:
        out["runs_while_down"] = sum(restart["down_from"] <= r["at"] <= restart["down_until"]
                                     for r in runs)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
