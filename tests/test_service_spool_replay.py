"""The service's spool replay when the store cannot take the writes: a real `memory-mcp` whose
file writes are capped (RLIMIT_FSIZE, a full disk as far as SQLite can tell) logs one line,
not a traceback every few seconds, and keeps the write queued."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import time
from pathlib import Path

from semantic_memory import spool
from semantic_memory.service.spool_replay import SCAN_S
from test_service_support import memory_mcp_command, service_env

#: Enough for the service to open its store and answer, far too little for the write below.
FILE_LIMIT = 192 * 1024


def test_a_replay_the_store_cannot_write_is_one_line_once(tmp_path: Path) -> None:
    env = service_env(tmp_path, MEMORY_MAINTENANCE_ON_START="0")
    seeded = subprocess.run([*memory_mcp_command(), "store", "seed memory"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert seeded.returncode == 0, seeded.stderr
    words = random.Random(7).choices(["alpha", "bravo", "charlie", "delta", "echo"], k=16_000)
    spool.append(tmp_path / "spool", "/ingest", {"content": " ".join(words)[:99_000]},
                 harness="claude-code", event="PreCompact")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))

    log = tmp_path / "service.log"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(memory_mcp_command(), env=env, stdout=subprocess.PIPE,
                                stderr=stderr, stdin=subprocess.DEVNULL, text=True,
                                preexec_fn=cap)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("MEMORY_MCP_LISTENING"), log.read_text()
        deadline = time.monotonic() + 60
        while "spool: replay failed" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(SCAN_S * 3)  # three more looks at the spool, each failing again
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    failures = [line for line in text.splitlines() if "spool: replay failed" in line]
    assert len(failures) == 1, text[-3000:]
    assert "disk I/O error" in failures[0] and "Traceback" not in text
    assert [json.loads(f.read_text())["event"] for f in spool.pending(tmp_path / "spool")] == [
        "PreCompact"]  # still queued for a later try
