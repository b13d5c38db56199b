"""A store damaged under a service (a backup copied over the live db, a disk fault): a request
that meets the damage was answered `500 internal error` with a traceback in the log; it is a
503 with the CLI's one line saying what to run, and the log holds that line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_service_support import start_service


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
        damaged = [a for a in answers if a.status_code != 200]
        assert damaged, "no request met the damage"
        for answer in damaged:
            assert answer.status_code == 503, answer.text
            error = answer.json()["error"]
            # Met by a channel's search (each one's failure is said), or past them: both a
            # one-line 503 naming the damage.
            assert ("every channel's search failed (" in error and "malformed" in error) or (
                error.startswith("the store cannot be read (")
                and "memory-mcp restore" in error), error
    finally:
        service.stop()
    log = (tmp_path / "stderr.log").read_text()
    assert "Traceback" not in log and "malformed" in log
