"""Nothing lost under load: bench/loop_load.py at a tiny scale (real service, real hook
processes, a restart mid-run) finds every write stored exactly once, and a hook starved of CPU
past its budget while its write waits on the service still spools that write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness_support import hanging_server, hook_env, hook_log
from semantic_memory import spool
from test_service_support import memory_mcp_command

REPO = Path(__file__).resolve().parent.parent
BUDGET_S = 1.0
FACT = "the nightly export runs from the replica in zone b"


def test_the_loop_under_load_and_a_restart_loses_and_duplicates_nothing() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "loop_load.py"), "--seconds", "6", "--clients", "2",
         "--hook-workers", "2", "--max-sessions", "40", "--exchanges", "2", "--memories", "0",
         "--baseline-sessions", "1", "--restart-at", "1.5", "--down-s", "2",
         "--drain-timeout", "60"],
        capture_output=True, text=True, timeout=400)
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    truth = report["ground_truth"]
    assert truth["lost"] == 0 and truth["duplicated"] == 0 and truth["altered"] == 0, truth
    assert truth["chunks"]["expected"] > 0 and truth["facts"]["expected"] > 0, truth
    assert report["spool"]["left"] == 0 and report["spool"]["rejected"] == 0, report["spool"]
    assert report["hooks"]["nonzero_exit"] == 0
    # Hooks ran while the service was down: their writes were spooled, then replayed.
    assert report["hooks"]["runs_while_down"] > 0, report["hooks"]
    assert report["hooks"]["outcomes"]["total"].get("spooled", 0) > 0, report["hooks"]
    assert done.returncode == 0


def test_a_hook_starved_past_its_budget_mid_write_spools_the_write(tmp_path: Path) -> None:
    """The watchdog fires while the write waits on the network (the process got no CPU until
    after its budget: SIGSTOP/SIGCONT): the write it was making goes to the spool."""
    accepted: list = []
    with hanging_server(accepted) as url:
        env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
        proc = subprocess.Popen([*memory_mcp_command(), "hook", "example", "prompt"], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"session": "s1", "cwd": "/tmp",
                                     "prompt": f"remember that {FACT}"}).encode())
        proc.stdin.close()
        deadline = time.monotonic() + 60
        while not accepted and time.monotonic() < deadline:  # the write reached the service
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(BUDGET_S + 0.5)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(30) == 0
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "spooled", entry
    [file] = spool.pending(tmp_path / "spool")
    record = spool.read(file)
    assert record is not None and record["body"]["content"] == FACT
    assert not [p for p in (tmp_path / "spool").iterdir() if p.name.endswith(".tmp")]


def test_a_hook_starved_before_it_made_its_write_makes_it_into_the_spool(
        tmp_path: Path) -> None:
    """The machine is so loaded the hook process gets no CPU until its budget is spent
    (SIGSTOP from its start to past the budget): the flush it had not started yet is made
    offline, into the spool, instead of being dropped as a timeout."""
    with hanging_server() as url:
        env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
        history = [{"role": "user", "text": "How do we rotate the signing certificate?"},
                   {"role": "assistant", "text": "Run the rotate-cert job, then restart the "
                                                 "edge proxies one zone at a time."}]
        proc = subprocess.Popen([*memory_mcp_command(), "hook", "example", "compact"], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        os.kill(proc.pid, signal.SIGSTOP)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"session": "s1", "cwd": "/tmp",
                                     "history": history}).encode())
        proc.stdin.close()
        time.sleep(BUDGET_S + 0.3)
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait(30) == 0
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == "spooled", entry
    assert "before the write was made" in entry["detail"], entry
    [file] = spool.pending(tmp_path / "spool")
    record = spool.read(file)
    assert record is not None
    assert [item["content"] for item in record["body"]["items"]] == [
        f"User: {history[0]['text']}\nAssistant: {history[1]['text']}"]
