"""A data folder copied with its service running (a move, a restored folder snapshot, a second
profile) carries the service's discovery file, which names that service and its db. The
hooks of the copy trusted it: a "remember" there was stored in the original's db, and a
service started on the copy said another served its db. A discovery file now counts only
for the db it names."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from harness_support import closed_port, hook_env, hook_log, run_hook
from test_service_support import start_service


def test_a_copied_folders_hooks_do_not_write_into_the_originals_service(tmp_path: Path) -> None:
    original, copy = tmp_path / "original", tmp_path / "copy"
    service = start_service(original, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        shutil.copytree(original, copy)
        assert (copy / "memory.db.server.json").exists()
        env = hook_env(copy, None, MEMORY_PORT=str(closed_port()), MEMORY_HOOK_BUDGET_S="5")
        done = run_hook("claude-code", "UserPromptSubmit", {
            "session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
            "prompt": "remember: the copy's release train leaves on fridays"}, env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert hook_log(copy)[-1]["outcome"] == "spooled", hook_log(copy)[-1]
        assert list((copy / "spool").glob("*.json"))  # for the copy's own service
        with service.client() as http:
            contents = [m["content"] for m in http.get("/api/memories").json()["items"]]
        assert not any("fridays" in c for c in contents)

        second = start_service(copy, MEMORY_PLUGINS="bm25_porter,bm25_trigram")
        try:
            assert "serves this db too" not in (copy / "stderr.log").read_text()
            deadline = time.monotonic() + 30
            while True:  # its spool replayed into the copy's db
                with second.client() as http:
                    items = http.get("/api/memories").json()["items"]
                if any("fridays" in m["content"] for m in items):
                    break
                assert time.monotonic() < deadline, "the copy's spool was not replayed"
                time.sleep(0.2)
        finally:
            second.stop()
    finally:
        service.stop()
