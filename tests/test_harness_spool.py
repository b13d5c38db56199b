"""Nothing a hook writes is lost: the write spool, its replay (by the service and by hooks),
the hooks' shared back-off, and truthful outcomes, against real hook processes and a real
service."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness_support import hanging_server, hook_env, hook_log, run_hook, run_memory_mcp
from semantic_memory import backoff, spool
from semantic_memory.harness.transcript import memories_of
from test_service_support import Service, memory_mcp_command, start_service

BUDGET_S = "1.0"
#: For a test that needs its first hook to start the back-off: a hook starved past its budget
#: on a loaded machine never starts one (its request was not sent, or no full probe was left).
BACKOFF_BUDGET_S = "2.0"
SESSION = {"session": "s1", "cwd": "/tmp"}
FACT = "the staging database listens on port 6543"


def remember(env: dict[str, str], fact: str = FACT) -> Any:
    return run_hook("example", "prompt", {**SESSION, "prompt": f"remember that {fact}"}, env)


def compact(env: dict[str, str], n: int = 3) -> Any:
    history = []
    for i in range(n):
        history += [{"role": "user", "text": f"How do we restart worker {i} after a deploy?"},
                    {"role": "assistant", "text": f"Run `systemctl restart worker@{i}` and "
                                                  f"watch the queue drain for worker {i}."}]
    return run_hook("example", "compact", {**SESSION, "history": history}, env)


def live_memories(service: Service) -> list[dict[str, Any]]:
    with service.client() as client:
        return client.get("/api/memories", params={"limit": 200}).json()["items"]


def wait_for(predicate: Any, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# --- the spool itself -------------------------------------------------------------------------


def test_append_is_atomic_and_sorted_oldest_first(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    files = [spool.append(folder, "/ingest", {"content": f"m{i}"}, harness="h", event="e")
             for i in range(5)]
    assert spool.pending(folder) == files
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temp file left
    record = spool.read(files[0])
    assert record is not None and record["body"] == {"content": "m0"}
    assert record["harness"] == "h" and record["v"] == spool.VERSION
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert spool.depth(folder).count == 5


def test_replay_stops_at_the_first_retry_and_keeps_order(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    for i in range(4):
        spool.append(folder, "/ingest", {"content": f"m{i}"})
    sent: list[str] = []

    def send(path: str, body: dict[str, Any]) -> None:
        if body["content"] == "m2":
            raise spool.Retry("down")
        sent.append(body["content"])

    done = spool.replay(folder, send)
    assert sent == ["m0", "m1"] and done == spool.Replayed(2, 0, 2)
    assert [spool.read(f)["body"]["content"] for f in spool.pending(folder)] == ["m2", "m3"]


def test_refused_writes_are_kept_with_their_reason(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"content": ""})
    (folder / "00000000000000000001-1-deadbeef.json").write_text("{broken")

    def send(path: str, body: dict[str, Any]) -> None:
        raise spool.Refused("content: must not be empty")

    assert spool.replay(folder, send) == spool.Replayed(0, 2, 0)
    kept = {f.name: spool.read(f) for f in spool.pending(folder / spool.REJECTED)}
    assert len(kept) == 2 and spool.depth(folder) == spool.Depth(0, None, 2)
    reasons = [r["rejected"] for r in kept.values() if r]
    assert reasons == ["content: must not be empty"]


def test_concurrent_replayers_send_each_write_once(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    for i in range(200):
        spool.append(folder, "/ingest", {"content": f"m{i}"})
    sent: list[str] = []
    lock = threading.Lock()

    def send(path: str, body: dict[str, Any]) -> None:
        time.sleep(0.0005)
        with lock:
            sent.append(body["content"])

    threads = [threading.Thread(target=spool.replay, args=(folder, send)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(sent) == sorted(f"m{i}" for i in range(200))  # each exactly once
    assert spool.pending(folder) == []


REPLAYER = """
import os, sys, time
from pathlib import Path
from semantic_memory import spool

def send(path, body):
    time.sleep(0.001)
    fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, (body["content"] + "\\n").encode())
    os.close(fd)

spool.replay(Path(sys.argv[1]), send)
"""


def test_replayer_processes_and_a_releaser_send_each_write_once(tmp_path: Path) -> None:
    """Three replayer processes and the service's claim release at once: a live replayer's
    claim (another pid) is never put back while it is sending."""
    folder, log = tmp_path / "spool", tmp_path / "sent.log"
    for i in range(300):
        spool.append(folder, "/ingest", {"content": f"m{i}"})
    replayers = [subprocess.Popen([sys.executable, "-c", REPLAYER, str(folder), str(log)])
                 for _ in range(3)]
    while any(p.poll() is None for p in replayers):
        spool.release_stale(folder)
    assert [p.returncode for p in replayers] == [0, 0, 0]
    assert sorted(log.read_text().split()) == sorted(f"m{i}" for i in range(300))
    assert spool.depth(folder).count == 0


def test_a_dead_replayers_claim_goes_back_to_the_queue(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    claimed = spool.claim(spool.append(folder, "/ingest", {"content": "m"}))
    assert claimed is not None and spool.pending(folder) == []
    assert spool.depth(folder).count == 1  # still counted while claimed
    assert spool.release_stale(folder) == 0  # fresh: its replayer may still be working
    assert spool.release_stale(folder, now=time.time() + spool.CLAIM_STALE_S + 1) == 1
    assert len(spool.pending(folder)) == 1


def claim_as(file: Path, pid: int, age_s: float = 0) -> Path:
    """`file` claimed the way a replayer `pid` claims it, `age_s` seconds ago."""
    claimed = file.with_name(f"{file.name}{spool.CLAIM}{pid}")
    file.rename(claimed)
    then = time.time() - age_s
    os.utime(claimed, (then, then))
    return claimed


def gone_pid() -> int:
    """The pid of a process that ran and was reaped: no process has it now."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that is no replayer: its pid in a claim must not free the claim early."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_claim_whose_replayer_is_gone_goes_back_at_once(
        tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    folder = tmp_path / "spool"
    dead = claim_as(spool.append(folder, "/ingest", {"content": "dead"}), gone_pid())
    foreign = claim_as(spool.append(folder, "/ingest", {"content": "foreign"}), stranger.pid)
    ours = spool.claim(spool.append(folder, "/ingest", {"content": "ours"}))
    assert ours is not None
    # A dead replayer can never finish its claim: it is queued again without waiting.
    assert spool.release_stale(folder) == 1 and not dead.exists()
    # A live pid may be the replayer at work (or a stranger that reused the pid): only age
    # frees it, so a write being sent is never sent twice.
    assert foreign.exists() and ours.exists()
    assert spool.release_stale(folder, now=time.time() + spool.CLAIM_STALE_S + 1) == 2
    assert len(spool.pending(folder)) == 3


def test_replay_counts_the_writes_another_replayer_still_holds(
        tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    folder = tmp_path / "spool"
    for i in range(3):
        spool.append(folder, "/ingest", {"content": f"m{i}"})
    held = claim_as(spool.pending(folder)[1], stranger.pid)
    sent: list[str] = []
    done = spool.replay(folder, lambda path, body: sent.append(body["content"]))
    assert sent == ["m0", "m2"] and done == spool.Replayed(2, 0, 1)  # m1 is not stored yet
    held.unlink()
    assert spool.replay(folder, lambda path, body: None) == spool.Replayed(0, 0, 0)


def test_backoff_expires_and_is_cleared(tmp_path: Path) -> None:
    path, url = tmp_path / "hooks.backoff.json", "http://127.0.0.1:9"
    assert backoff.active(path, url) is None
    backoff.start(path, url, 30, "timeout", "http://x did not answer")
    state = backoff.active(path, url)
    assert state is not None and state.outcome == "timeout"
    assert backoff.active(path, url, now=state.until + 1) is None
    backoff.start(path, url, 0, "timeout", "off")  # 0 = never back off: the old state stays
    backoff.clear(path)
    assert backoff.active(path, url) is None and not path.exists()


def test_a_backoff_holds_for_the_url_that_failed_only(tmp_path: Path) -> None:
    path, dead, live = tmp_path / "hooks.backoff.json", "http://127.0.0.1:9", "http://h:1"
    backoff.start(path, dead, 30, "service down", "nothing listens")
    assert backoff.active(path, live) is None and backoff.active(path, dead) is not None
    backoff.clear(path, live)  # an answer from another URL does not end it
    assert backoff.active(path, dead) is not None
    backoff.clear(path, dead)
    assert not path.exists()
    path.write_text('{"until": 9e12, "outcome": "timeout"}')  # an older release's: for all
    assert backoff.active(path, live) is not None


def test_a_dead_plugin_url_in_one_shell_does_not_silence_another_shells_service(
        tmp_path: Path) -> None:
    """Two shells, one db folder: one points MEMORY_PLUGIN_URL at a service that is gone, the
    other reaches the running one. The dead URL's back-off silenced the live one's hooks too
    (every recall empty, every write spooled), and the live one's next answer ended the dead
    one's back-off, so its hooks paid their whole budget again."""
    service = start_service(tmp_path)
    try:
        dead = hook_env(tmp_path, dead_url(), MEMORY_HOOK_BUDGET_S=BUDGET_S)
        live = hook_env(tmp_path, service.url)
        assert remember(dead).returncode == 0
        assert (tmp_path / "hooks.backoff.json").exists()
        said = remember(live, "the queue is drained by worker 7")
        assert said.returncode == 0
        assert remember(dead, "the cache lives on redis-2").returncode == 0
        log = hook_log(tmp_path)
        assert [e["outcome"] for e in log] == ["spooled", "stored", "spooled"], log
        assert "backing off" in log[2]["detail"], log  # the live answer left it in force
        assert "the queue is drained by worker 7" in [
            m["content"] for m in live_memories(service)]
    finally:
        service.stop()


def test_writes_made_while_the_service_is_down_are_stored_once_it_is_back(
        tmp_path: Path) -> None:
    env = hook_env(tmp_path, dead_url(), MEMORY_HOOK_BUDGET_S=BUDGET_S)
    said = remember(env)
    assert said.returncode == 0 and "will store this as a memory" in said.stdout
    assert compact(env).returncode == 0
    log = hook_log(tmp_path)
    assert [e["outcome"] for e in log] == ["spooled", "spooled"], log
    assert "3 spooled" in log[1]["detail"]
    assert len(spool.pending(tmp_path / "spool")) == 2
    # The first failure started the back-off: the second hook made no request.
    assert "backing off" in log[1]["detail"]

    service = start_service(tmp_path)  # same db folder: it drains the spool at start
    try:
        assert wait_for(lambda: spool.depth(tmp_path / "spool").count == 0)
        contents = [m["content"] for m in live_memories(service)]
        assert contents.count(FACT) == 1 and len(contents) == 4, contents
        assert not (tmp_path / "hooks.backoff.json").exists()  # the service ended it
        # Replaying the same writes again (a hook that spooled a write that had landed)
        # stores nothing twice.
        remember(hook_env(tmp_path, service.url))
        assert [m["content"] for m in live_memories(service)].count(FACT) == 1
        found = run_hook("example", "prompt",
                         {**SESSION, "session": "s2", "prompt": "which port does the staging "
                                                                "database listen on?"},
                         hook_env(tmp_path, service.url))
        assert "6543" in found.stdout
    finally:
        service.stop()


def test_a_spooled_secret_is_redacted_when_the_service_replays_it(tmp_path: Path) -> None:
    env = hook_env(tmp_path, dead_url(), MEMORY_HOOK_BUDGET_S=BUDGET_S)
    key = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    remember(env, f"the CI token is {key}")
    [file] = spool.pending(tmp_path / "spool")
    assert oct(file.stat().st_mode & 0o777) == "0o600"  # the user's own, like a transcript
    service = start_service(tmp_path)
    try:
        assert wait_for(lambda: spool.depth(tmp_path / "spool").count == 0)
        [stored] = [m["content"] for m in live_memories(service)]
    finally:
        service.stop()
    assert key not in stored and "[REDACTED:" in stored


def test_a_hung_service_costs_one_budget_then_hooks_skip_it(tmp_path: Path) -> None:
    with hanging_server() as url:
        env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=BACKOFF_BUDGET_S)
        first = remember(env)
        second = remember(env, "the queue is drained by worker 7")
        recall = run_hook("example", "prompt", {**SESSION, "prompt": "which port?"}, env)
    log = hook_log(tmp_path)
    assert [e["outcome"] for e in log] == ["spooled", "spooled", "timeout"], log
    assert all(run.returncode == 0 for run in (first, second, recall))
    assert "will store this" in first.stdout and "will store this" in second.stdout
    # The first hook waited for the hung service; the next ones made no request at all (what
    # that saves in seconds is bench/no_stall.py's to measure, not a loaded test machine's).
    assert "did not answer" in log[0]["detail"]
    assert all("backing off" in e["detail"] and "no request made" in e["detail"]
               for e in log[1:]), log
    assert len(spool.pending(tmp_path / "spool")) == 2


#: A flush of this many exchanges, each one chunk, fills every batch of the most one flush
#: writes (adapter.FLUSH_MAX chunks in FLUSH_BATCH-chunk requests).
LONG_FLUSH = 5_000


def long_history(n: int = LONG_FLUSH) -> list[dict[str, str]]:
    """`n` distinct exchanges of ~1 KB, each one chunk (transcript.CHUNK_CHARS)."""
    history = []
    for i in range(n):
        history += [{"role": "user", "text": f"What does step {i} of the rollout change?"},
                    {"role": "assistant", "text": f"Step {i} moves shard {i} to the new "
                                                  "cluster. " + "It drains, copies, verifies "
                                                  "and switches over. " * 20}]
    return history


def long_exchanges(n: int = 1_000) -> list[dict[str, str]]:
    """`n` distinct exchanges a flush sends whole (the service cuts each into 3 chunks)."""
    history = []
    for i in range(n):
        history += [{"role": "user", "text": f"What does step {i} of the rollout change?"},
                    {"role": "assistant", "text": f"Step {i} moves shard {i} to the new "
                                                  "cluster. " + "It drains, copies, verifies "
                                                  "and switches over. " * 60}]
    return history


def spooled_items(folder: Path) -> list[dict[str, Any]]:
    return [item for file in spool.pending(folder) for item in spool.read(file)["body"]["items"]]


def spooled_chunks(folder: Path) -> list[str]:
    return [item["content"] for item in spooled_items(folder)]


def flush_paused_while_spooling(tmp_path: Path, pause_s: float, budget_s: float,
                                history: list[dict[str, str]] | None = None) -> None:
    """A compaction flush of LONG_FLUSH chunks (or of `history`) against a hung service: its
    first request waits out the budget, then the process is stopped (SIGSTOP: a machine too
    loaded to run it) from its first spool file for `pause_s`."""
    with hanging_server() as url:
        env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=str(budget_s))
        proc = subprocess.Popen([*memory_mcp_command(), "hook", "example", "compact"], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({**SESSION, "history": history or long_history()}).encode())
        proc.stdin.close()
        folder = tmp_path / "spool"
        deadline = time.monotonic() + 60
        while not spool.pending(folder) and time.monotonic() < deadline \
                and proc.poll() is None:
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(pause_s)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(30) == 0


def test_a_long_flush_paused_past_its_budget_spools_every_chunk_once(tmp_path: Path) -> None:
    """The budget ends while the flush spools what the hung service did not take: the rest is
    spooled within the write grace (the pause is well inside it), none lost, none twice, and
    each is stored once when the spool is replayed."""
    flush_paused_while_spooling(tmp_path, pause_s=0.5, budget_s=3.0)
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "spooled", entry
    chunks = spooled_chunks(tmp_path / "spool")
    assert len(chunks) == LONG_FLUSH and len(set(chunks)) == LONG_FLUSH, entry

    env = hook_env(tmp_path, dead_url())  # no service: replay goes into the store
    assert "replayed 10 write(s) into the store" in run_memory_mcp(env, "spool", "replay")
    stats = json.loads(run_memory_mcp(env, "stats", "--json"))
    assert stats["memories"] == LONG_FLUSH, stats


def test_a_flush_paused_past_its_write_grace_says_what_it_did_not_write(
        tmp_path: Path) -> None:
    """Stopped from its first spool file until past the budget and the write grace, the
    flush writes no further file (the harness may kill it any moment now) and its log line
    is an error naming how many chunks it did not write: never `spooled` for a part."""
    flush_paused_while_spooling(tmp_path, pause_s=2.0, budget_s=1.0)
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "error", entry
    chunks = spooled_chunks(tmp_path / "spool")
    assert 0 < len(chunks) < LONG_FLUSH and len(set(chunks)) == len(chunks)
    assert f"{LONG_FLUSH - len(chunks)} not written" in entry["detail"], entry


def test_a_flush_of_long_exchanges_counts_their_chunks_spooled_and_not_written(
        tmp_path: Path) -> None:
    """A flush sends each long exchange whole: what it spooled and what it did not write are
    counted in the chunks the service will cut them into, as the chunks of short ones are."""
    flush_paused_while_spooling(tmp_path, pause_s=2.0, budget_s=1.0, history=long_exchanges())
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "error", entry
    items = spooled_items(tmp_path / "spool")
    assert items and all(set(item) & {"content", "exchange"} == {"exchange"} for item in items)
    total, spooled = 3 * 1_000, sum(map(memories_of, items))
    assert spooled == 3 * len(items) < total
    # The flush's own line, or, where the machine kept it past its budget before it could
    # write that, the watchdog's: either counts memories, not requests.
    assert entry["detail"].startswith(f"{total} chunks: 0 new, 0 already stored, 0 refused, "
                                      f"{spooled} spooled (") or \
        f"; {spooled} spooled in {len(spool.pending(tmp_path / 'spool'))} write(s)" \
        in entry["detail"], entry
    assert f"{total - spooled} not written" in entry["detail"], entry


class _LateProxy:
    """Forwards each request to the real service, then holds the answer past the hook's
    budget: a write that lands but whose answer comes too late."""

    def __init__(self, target: str, delay: float) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.delay = delay
        self.sock = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.target) as upstream:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            upstream.sendall(head + b"\r\n\r\n" + body)
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
            time.sleep(self.delay)
            try:
                conn.sendall(answer)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    svc = start_service(tmp_path / "service")
    yield svc
    svc.stop()


def test_a_write_that_landed_late_is_spooled_and_replays_as_a_duplicate(
        tmp_path: Path, service: Service) -> None:
    late = _LateProxy(service.url, delay=2.5)
    try:
        env = hook_env(tmp_path, late.url, MEMORY_HOOK_BUDGET_S=BUDGET_S)
        run = remember(env)
    finally:
        late.close()
    assert run.returncode == 0
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "spooled", entry  # never "timeout" for a write
    # It did land (the proxy relays the request at once and only holds the answer back).
    assert wait_for(lambda: [m["content"] for m in live_memories(service)] == [FACT])
    out = run_memory_mcp(hook_env(tmp_path, service.url), "spool", "replay")
    assert "replayed 1 write(s) into the service" in out
    assert [m["content"] for m in live_memories(service)] == [FACT]  # and only once


def test_a_hook_that_finds_the_service_up_replays_the_spool(
        tmp_path: Path, service: Service) -> None:
    with service.client() as client:  # a service that has been up a while (warm)
        client.post("/ingest", json={"content": "an earlier memory", "project": "q"})
    folder = tmp_path / "spool"
    spool.append(folder, "/ingest", {"content": "spooled while the service was away",
                                     "project": "p"})
    env = hook_env(tmp_path, service.url)
    run_hook("example", "prompt", {**SESSION, "prompt": "anything about deploys?"}, env)
    assert spool.pending(folder) == [], hook_log(tmp_path)
    assert hook_log(tmp_path)[-1].get("replayed") == 1
    assert "spooled while the service was away" in [m["content"] for m in live_memories(service)]


# --- seeing and handling the spool ------------------------------------------------------------


def test_spool_cli_lists_replays_into_the_store_and_clears(tmp_path: Path) -> None:
    env = hook_env(tmp_path, dead_url(), MEMORY_HOOK_BUDGET_S=BACKOFF_BUDGET_S)
    remember(env)
    listed = json.loads(run_memory_mcp(env, "spool", "list", "--json"))
    assert [r["preview"] for r in listed["pending"]] == [FACT]
    assert "1 write(s) waiting" in run_memory_mcp(env, "spool")
    doctor = json.loads(run_memory_mcp_allow_fail(env, "doctor", "--json"))
    assert doctor["spool"]["pending"] == 1 and doctor["spool"]["backoff"] is not None

    # No service answers: replay goes straight into the store.
    out = run_memory_mcp(env, "spool", "replay")
    assert "replayed 1 write(s) into the store" in out
    stored = json.loads(run_memory_mcp(env, "list", "--json"))
    assert [m["content"] for m in stored] == [FACT]

    remember(env, "another fact for the spool")
    refused = run_memory_mcp_allow_fail(env, "spool", "clear")
    assert "add --yes" in refused
    assert "deleted 1 spooled write(s)" in run_memory_mcp(env, "spool", "clear", "--yes")
    assert spool.depth(tmp_path / "spool").count == 0


def run_memory_mcp_allow_fail(env: dict[str, str], *args: str) -> str:
    import subprocess

    from test_service_support import memory_mcp_command

    done = subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout + done.stderr


def test_stats_show_the_spool(tmp_path: Path, service: Service) -> None:
    spool.append(service.tmp / "spool", "/ingest", {"content": ""})  # refused: kept aside
    assert wait_for(lambda: spool.depth(service.tmp / "spool").count == 0)
    with service.client() as client:
        state = client.get("/api/stats").json()["spool"]
    assert state["pending"] == 0 and state["rejected"] == 1


# --- a replayer killed mid-write --------------------------------------------------------------


class _StuckService(ThreadingHTTPServer):
    """Answers /health like the service and never answers a write: a replayer that sends one
    waits, holding its claim, until it is killed."""

    daemon_threads = True

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__(("127.0.0.1", 0), _StuckHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


class _StuckHandler(BaseHTTPRequestHandler):
    server: _StuckService

    def do_GET(self) -> None:  # http.server's name
        data = b'{"status": "ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.server.release.wait(120)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_write_claimed_by_a_killed_replayer_is_stored_once_the_service_runs(
        tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    facts = [f"the nightly export number {i} lands in bucket b{i}" for i in range(12)]
    for fact in facts:
        spool.append(folder, "/ingest", {"content": fact, "project": "p"})
    stuck = _StuckService()
    try:
        replayer = subprocess.Popen([*memory_mcp_command(), "spool", "replay"],
                                    env=hook_env(tmp_path, stuck.url),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            claimed = f"{spool.CLAIM}{replayer.pid}"
            assert wait_for(lambda: any(claimed in f.name for f in folder.iterdir()))
        finally:
            replayer.kill()  # SIGKILL: it never puts its claim back
            replayer.wait()
    finally:
        stuck.close()
    assert [f.name for f in folder.iterdir() if spool.CLAIM in f.name] != []
    assert len(spool.pending(folder)) == len(facts) - 1

    service = start_service(tmp_path)  # same db folder: it drains the spool
    try:
        # The claim is minutes from stale, but its replayer is gone: the write is not left.
        assert wait_for(lambda: spool.depth(folder).count == 0, timeout=20), \
            list(folder.iterdir())
        stored = [m["content"] for m in live_memories(service)]
    finally:
        service.stop()
    assert sorted(stored) == sorted(facts)  # each exactly once


def test_the_service_frees_claims_when_nothing_else_is_queued(
        tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    """Only claims in the spool: one stale, one held by a live process. The service frees the
    stale one, leaves the live one until its process is gone, then stores it too."""
    folder = tmp_path / "spool"
    stale = claim_as(spool.append(folder, "/ingest", {"content": "a stale claim", "project": "p"}),
                     stranger.pid, age_s=spool.CLAIM_STALE_S + 5)
    held = claim_as(spool.append(folder, "/ingest", {"content": "a held claim", "project": "p"}),
                    stranger.pid)
    service = start_service(tmp_path)
    try:
        assert wait_for(lambda: [m["content"] for m in live_memories(service)]
                        == ["a stale claim"], timeout=15)
        assert not stale.exists()
        # Its pid is alive and the claim fresh: the service must not send it behind its back.
        assert held.exists()
        stranger.kill()
        stranger.wait()
        assert wait_for(lambda: spool.depth(folder).count == 0, timeout=15)
        stored = sorted(m["content"] for m in live_memories(service))
        with service.client() as client:
            waiting = client.get("/api/stats").json()["spool"]["pending"]
    finally:
        service.stop()
    assert stored == ["a held claim", "a stale claim"] and waiting == 0


def test_spool_replay_exits_1_while_a_claimed_write_waits(
        tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    folder = tmp_path / "spool"
    env = hook_env(tmp_path, dead_url())  # no service: replay goes into the store
    spool.append(folder, "/ingest", {"content": "a queued write", "project": "p"})
    claim_as(spool.append(folder, "/ingest", {"content": "a dead replayer's write",
                                              "project": "p"}), gone_pid())
    claim_as(spool.append(folder, "/ingest", {"content": "a live replayer's write",
                                              "project": "p"}), stranger.pid)
    first = subprocess.run([*memory_mcp_command(), "spool", "replay"], env=env, check=False,
                           capture_output=True, text=True, timeout=60)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "replayed 2 write(s) into the store" in first.stdout
    assert first.stdout.rstrip().endswith("; 1 still waiting")
    assert "1 write(s) waiting" in run_memory_mcp(env, "spool", "list")

    stranger.kill()  # the replayer that held it died
    stranger.wait()
    out = run_memory_mcp(env, "spool", "replay")
    assert "replayed 1 write(s) into the store" in out and "waiting" not in out
    stored = json.loads(run_memory_mcp(env, "list", "--json"))
    assert sorted(m["content"] for m in stored) == [
        "a dead replayer's write", "a live replayer's write", "a queued write"]


def test_a_remember_spooled_when_the_budget_ends_mid_request_tells_the_model(
        tmp_path: Path) -> None:
    """A machine too loaded to run the hook (SIGSTOP) while its "remember" waits on a hung
    service: the watchdog spools the write in flight, and the model is told it will be stored,
    as when the request itself times out; never silence, which reads as not remembered."""
    accepted: list[socket.socket] = []
    with hanging_server(accepted) as url:
        env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=BACKOFF_BUDGET_S)
        proc = subprocess.Popen([*memory_mcp_command(), "hook", "example", "prompt"], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({**SESSION, "prompt": f"remember that {FACT}"}).encode())
        proc.stdin.close()
        assert wait_for(lambda: bool(accepted) or proc.poll() is not None, 60)
        os.kill(proc.pid, signal.SIGSTOP)  # its request sent, the service silent
        time.sleep(float(BACKOFF_BUDGET_S) + 0.5)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(30) == 0
    assert proc.stdout is not None
    out = proc.stdout.read()
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "spooled", entry
    assert "will store this" in out.decode(), (entry, out)
    [file] = spool.pending(tmp_path / "spool")
    assert FACT in json.dumps(spool.read(file)["body"])
