"""A compaction flush of a transcript holding one pasted log of megabytes keeps every exchange:
cutting it costs time in proportion to its length, and a budget that runs out mid-flush sends
the run on offline into the spool instead of starting it again (which ran out of the write
grace too and kept nothing). Real hook processes, a real service, the real spool."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import closed_port, hook_env, hook_log, run_hook, run_memory_mcp
from semantic_memory import spool
from semantic_memory.harness.runner import WRITE_GRACE_S
from semantic_memory.harness.transcript import (
    CHUNK_CHARS,
    HEAD_CHARS,
    exchange_chunks,
    split_text,
)
from test_service_support import Service, service_env, start_service

#: Lines of the pasted log: about 7 MB (cutting it took 4 s, past the budget, before).
PASTE_LINES = 62_000
EXCHANGES = 100
LOG_LINE = ("2025-03-10 ERROR worker-7 ConnectionResetError: peer reset while reading response "
            "body from upstream payments-api\n")
PASTE_REPLY = "The root cause is the upstream payments-api resetting idle connections; " \
              "raise keepalive_timeout in nginx to 75s."
TOPICS = ("worker pool", "retry policy", "connection cap", "queue depth", "log rotation",
          "cache size", "batch window", "lease time", "shard count", "probe delay")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    # The pasted exchange goes whole (the service redacts it before it cuts it): a body of
    # 7 MB, over the 4 MiB a service takes by default (it would be kept in spool/rejected/).
    svc = start_service(tmp_path_factory.mktemp("paste-flush"),
                        MEMORY_MAX_BODY_BYTES=str(64 * 1024 * 1024))
    yield svc
    svc.stop()


def dead_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


def question(i: int) -> str:
    return f"[q{i:03d}] what should the {TOPICS[i % len(TOPICS)]} be for consumer {i}?"


def answer(i: int) -> str:
    return f"[a{i:03d}] set it to {i + 2} in deploy/values-{i}.yaml for the consumer {i}."


def paste_transcript(path: Path, paste_lines: int = PASTE_LINES) -> None:
    """A Claude Code transcript: one user message pasting `paste_lines` lines of log (~7 MB),
    its answer, then EXCHANGES ordinary question-and-answer exchanges."""
    def line(role: str, text: str) -> str:
        return json.dumps({"type": role, "message": {"role": role, "content": text}}) + "\n"

    with path.open("w") as out:
        out.write(line("user", "Here is the full crash log, find the root cause:\n"
                               + LOG_LINE * paste_lines))
        out.write(line("assistant", PASTE_REPLY))
        for i in range(EXCHANGES):
            out.write(line("user", question(i)))
            out.write(line("assistant", answer(i)))


def flush(tmp: Path, service: Service, budget_s: float, project: str) -> dict:
    """One PreCompact hook over the pasted transcript; its log line, once what it spooled is
    replayed (and replaying again finds nothing left)."""
    transcript = tmp / "session.jsonl"
    paste_transcript(transcript)
    env = hook_env(tmp / "hook", service.url, MEMORY_HOOK_BUDGET_S=str(budget_s),
                   MEMORY_PROJECT=project)
    (tmp / "hook").mkdir()
    payload = {"session_id": project, "transcript_path": str(transcript), "cwd": str(tmp),
               "hook_event_name": "PreCompact", "trigger": "auto"}
    assert run_hook("claude-code", "PreCompact", payload, env, timeout=60).returncode == 0
    entry = hook_log(tmp / "hook")[-1]
    run_memory_mcp(env, "spool", "replay")
    assert not spool.pending(tmp / "hook" / "spool")
    assert not list((tmp / "hook" / "spool").glob("rejected/*")), "a write was refused"
    # Replayed once, not twice.
    assert run_memory_mcp(env, "spool", "replay").startswith("replayed 0 write(s)")
    return entry


def stored(service: Service, project: str) -> list[str]:
    lines = run_memory_mcp(service_env(service.tmp), "export", "-o", "-").splitlines()
    return [m["content"] for m in map(json.loads, lines) if m.get("project") == project]


def assert_every_exchange_once(contents: list[str]) -> None:
    for i in range(EXCHANGES):
        found = [c for c in contents if f"[q{i:03d}]" in c]
        assert found == [f"User: {question(i)}\nAssistant: {answer(i)}"], (i, found)
    first = [c for c in contents if c.startswith("User: Here is the full crash log")]
    assert len(first) == 1, first
    assert sum(PASTE_REPLY in c for c in contents) == 1


def test_a_pasted_log_of_megabytes_loses_no_exchange(service: Service, tmp_path: Path) -> None:
    """The QA repro: 7 MB pasted, then 100 exchanges. The flush cut the paste in quadratic
    time (6 s), ran out of its budget, did it all again offline, ran out of the grace, and
    logged `timeout` with nothing stored or spooled. Now it is stored, or spooled and
    replayed once, within the budget and its write grace."""
    budget_s = 1.5
    entry = flush(tmp_path, service, budget_s, "paste-default-budget")
    assert entry["outcome"] in ("stored", "spooled"), entry
    # Measured by the hook from its own process start; the watchdog ends it at budget + grace.
    assert entry["ms"] < budget_s * 2.5 * 1000, entry
    assert_every_exchange_once(stored(service, "paste-default-budget"))


def test_a_budget_spent_mid_flush_goes_on_into_the_spool(service: Service,
                                                          tmp_path: Path) -> None:
    """A budget about as long as reading and counting 7 MB of transcript: the watchdog fires
    while the flush still reads or counts (the run goes on offline from there, its write
    straight to the spool) or while its request waits on the service (the request is
    spooled). Either way the write is in the spool inside the write grace, and the spool is
    replayed once. It was stopped and made again from the start, and ran out of the grace.
    (A flush keeps the paste's head and tail only, MESSAGE_CHARS: it takes ~0.15 s now.)"""
    budget_s = 0.1
    entry = flush(tmp_path, service, budget_s, "paste-short-budget")
    assert entry["outcome"] == "spooled", entry
    assert entry["ms"] < (budget_s + WRITE_GRACE_S) * 1.5 * 1000, entry
    assert_every_exchange_once(stored(service, "paste-short-budget"))


#: Loaded into the hook process (PYTHONPATH): notes each opening of the transcript, and holds
#: up the SLOW_READ_AT-th for SLOW_READ_S (a read the machine starves past the hook's budget).
SLOW_READ = """
import os, sys, time
_path, _log = os.environ["SLOW_READ_PATH"], os.environ["SLOW_READ_LOG"]
_opened = [0]
def _audit(event, args):
    if event == "open" and args[0] == _path:
        with open(_log, "a") as log:
            log.write("open\\n")
        _opened[0] += 1
        if _opened[0] == int(os.environ["SLOW_READ_AT"]):
            time.sleep(float(os.environ["SLOW_READ_S"]))
sys.addaudithook(_audit)
"""


def test_a_flush_stopped_mid_read_reads_its_transcript_once(service: Service,
                                                             tmp_path: Path) -> None:
    """The budget runs out as the flush opens its transcript to read the turns (after it
    counted the compaction markers and found the last): the run goes on from there, offline,
    and spools what it read. It was stopped and started again from the beginning, reading
    (and counting) the whole transcript a second time inside the write grace."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_READ)
    transcript = tmp_path / "session.jsonl"
    paste_transcript(transcript, paste_lines=10_000)
    payload = {"session_id": "slow-read", "transcript_path": str(transcript),
               "cwd": str(tmp_path), "hook_event_name": "PreCompact", "trigger": "auto"}

    def opens(run: str, budget_s: float, slow_at: int = 0) -> tuple[int, dict]:
        log = tmp_path / f"{run}.opens"
        env = hook_env(tmp_path / run, dead_url(), MEMORY_HOOK_BUDGET_S=str(budget_s),
                       PYTHONPATH=str(tmp_path / "site"), SLOW_READ_PATH=str(transcript),
                       SLOW_READ_LOG=str(log), SLOW_READ_AT=str(slow_at),
                       SLOW_READ_S=str(budget_s))
        (tmp_path / run).mkdir()
        assert run_hook("claude-code", "PreCompact", payload, env, timeout=60).returncode == 0
        return len(log.read_text().splitlines()), hook_log(tmp_path / run)[-1]

    once, entry = opens("ample", 30)  # one flush, start to end: how often it opens it
    assert entry["outcome"] == "spooled", entry
    budget_s = 1.0
    count, entry = opens("starved", budget_s, slow_at=once)  # the last: reading the turns
    assert entry["outcome"] == "spooled" and "before the write was made" in entry["detail"], entry
    assert count == once, (count, once)
    assert entry["ms"] < (budget_s + WRITE_GRACE_S) * 1.5 * 1000, entry
    env = hook_env(tmp_path / "starved", service.url)
    # One write: the paste keeps its head and tail (MESSAGE_CHARS), some 30 pieces.
    assert run_memory_mcp(env, "spool", "replay").startswith("replayed 1 write(s)")


def test_split_text_cuts_as_it_always_did() -> None:
    """The walk along the text cuts where re-slicing the rest did: paragraphs, lines,
    sentences (CJK stops too), words, hard cuts; whitespace runs of any length between."""
    rng = random.Random(5)
    parts = ["alpha", "beta gamma", " ", "  ", "\n", "\n\n", ". ", "\u3002", "\uff01", "\t",
             "\u3000", "x" * 40, "\u00a0", "\n \n", " " * 5000, "done."]
    for _ in range(400):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 120)))
        limit = rng.randint(-1, 90)
        assert split_text(text, limit) == reference_split(text, limit), (text, limit)
    log = LOG_LINE * 2_000
    assert split_text(log, CHUNK_CHARS) == reference_split(log, CHUNK_CHARS)


def test_the_head_of_a_long_question_is_as_before() -> None:
    """The later pieces of a long exchange are headed by its question, its words joined by
    single spaces, cut at HEAD_CHARS: read from the question's start only, whatever spaces
    and line breaks run through it."""
    reply = "A reply of many words. " * 200
    for user in ("short question?", "word " * 30, "a" + " " * 3000 + "b " * 200,
                 "\n\n".join(f"line {i}\twith\u00a0tabs" for i in range(40)),
                 "x" * 500, "Here is the log:\n" + LOG_LINE * 20_000):
        question = " ".join(user.split())
        if len(question) > HEAD_CHARS:
            question = question[: HEAD_CHARS - 1].rstrip() + "\u2026"
        pieces = exchange_chunks(user, reply, lambda text: text)
        assert pieces[1].startswith(f"(User asked: {question})\n"), (user[:80], pieces[1][:200])


def test_split_text_takes_time_in_proportion_to_the_text() -> None:
    """Four times the text costs about four times the time (it cost over 16 times: every piece
    re-sliced and re-stripped the rest); a ratio, with a wide margin. Both texts are megabytes,
    past the CPU's caches: a text that fits there is cut faster per character."""
    import time

    def seconds(lines: int) -> float:
        text = LOG_LINE * lines
        start = time.perf_counter()
        split_text(text, CHUNK_CHARS)
        return time.perf_counter() - start

    small, large = [], []  # the best of several, taken in turns: what load adds is noise
    for _ in range(4):
        small.append(seconds(20_000))  # 2.3 MB
        large.append(seconds(80_000))  # 9 MB
    assert min(large) < min(small) * 4 * 3, (small, large)


def reference_split(text: str, limit: int) -> list[str]:
    """split_text as it was (re-slicing the rest after every piece): what it must still cut."""
    boundaries = (("\n\n",), ("\n",), (". ", "\u3002", "\uff01", "\uff1f"), (" ",))
    limit = max(limit, 1)
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[: limit + 1]
        cut = -1
        for level in boundaries:
            cut, boundary = max((window.rfind(stop), stop) for stop in level)
            if cut > limit // 3:
                cut += len(boundary.rstrip()) if boundary.strip() else 0
                break
            cut = -1
        if cut <= 0:
            cut = limit
        piece = rest[:cut].strip()
        if piece:
            pieces.append(piece)
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return pieces
