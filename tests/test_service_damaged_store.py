"""A store damaged under a service (a backup copied over the live db, a disk fault): a request
that meets the damage was answered `500 internal error` with a traceback in the log; it is a
503 with the CLI's one line saying what to run, and the log holds that line. A recall whose every channel's search met a damaged index said
only that the searches failed: it says what to run too, on REST, as an MCP tool's error and
from `memory-mcp recall`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
from test_service_support import http_session, start_service

ADVICE = "memory-mcp restore"


def test_a_request_meeting_a_damaged_file_says_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    lines = "\n".join(json.dumps({"content": f"note {i}: the build cache lives in /var/c{i}",
                                  "project": f"p{i % 7}"}) for i in range(3000))
    (tmp_path / "notes.jsonl").write_text(lines, encoding="utf-8")
    imported = subprocess.run([sys.executable, "-m", "semantic_memory", "--db", str(db), "import",
                               str(tmp_path / "notes.jsonl")], capture_output=True, text=True,
                              timeout=120)
    assert imported.returncode == 0, imported.stderr
    data = bytearray(db.read_bytes())
    for page in range(20, len(data) // 4096, 20):  # the header page and the schema stay whole
        data[page * 4096 + 100: page * 4096 + 2100] = b"\xa5" * 2000
    db.write_bytes(bytes(data))
    service = start_service(tmp_path, MEMORY_PLUGINS="bm25_porter,bm25_trigram",
                            MEMORY_MAINTENANCE_ON_START="0")
    try:
        with service.client() as http:
            answers = [http.post("/recall", json={"query": f"build cache c{i}"})
                       for i in range(0, 3000, 150)]
            answers.append(http.get("/api/memories", params={"limit": 100, "offset": 2000}))

        async def listed() -> tuple[bool, str]:  # the same page, as an MCP tool's error
            async with http_session(service.mcp_url, service.token) as session:
                result = await session.call_tool("memory_list", {"limit": 100, "offset": 2000})
            return result.is_error, result.content[0].text

        tool_error, tool_text = anyio.run(listed)
        damaged = [a for a in answers if a.status_code != 200]
        assert damaged, "no request met the damage"
        for answer in damaged:
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            # Met by a channel's search or past them: a one-line 503 saying what to run.
            assert error.startswith("the store cannot be read (") and ADVICE in error, error
    finally:
        service.stop()
    assert damaged[-1].request.url.path == "/api/memories"  # a page in every 20 is damaged
    assert tool_error and tool_text.startswith("the store cannot be read (") and \
        ADVICE in tool_text, tool_text
    log = (tmp_path / "stderr.log").read_text()
    assert "Traceback" not in log and "malformed" in log


def test_every_channel_meeting_a_damaged_index_says_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    lines = "\n".join(json.dumps({"content": f"note {i}: the build cache lives in /var/c{i}"})
                      for i in range(300))
    (tmp_path / "notes.jsonl").write_text(lines, encoding="utf-8")
    imported = subprocess.run([sys.executable, "-m", "semantic_memory", "--db", str(db), "import",
                               str(tmp_path / "notes.jsonl")], capture_output=True, text=True,
                              timeout=120)
    assert imported.returncode == 0, imported.stderr
    with sqlite3.connect(db) as conn:  # both keyword indexes' segments overwritten
        for table in ("memories_fts_data", "memories_fts_tri_data"):
            conn.execute(f"UPDATE {table} SET block = randomblob(length(block)) WHERE id > 10")
    # The default channels: the bigram one (CJK) answers a Latin query empty, which made
    # the recall "nothing matched".
    service = start_service(tmp_path, MEMORY_MAINTENANCE_ON_START="0")
    try:
        with service.client() as http:
            answer = http.post("/recall", json={"query": "build cache"})

        async def tool_answer() -> tuple[bool, str]:
            async with http_session(service.mcp_url, service.token) as session:
                result = await session.call_tool("memory_recall", {"query": "build cache"})
            return result.is_error, result.content[0].text

        is_error, text = anyio.run(tool_answer)
    finally:
        service.stop()
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error.startswith("the store cannot be read (") and ADVICE in error, error
    assert is_error and text.startswith("the store cannot be read (") and ADVICE in text, text
    recalled = subprocess.run([sys.executable, "-m", "semantic_memory", "--db", str(db), "recall",
                               "build cache"], capture_output=True, text=True, timeout=60)
    assert recalled.returncode == 1 and "Traceback" not in recalled.stderr
    last = recalled.stderr.strip().splitlines()[-1]  # after each channel's warning
    assert last.startswith("Error: the store cannot be read (") and ADVICE in last, last
