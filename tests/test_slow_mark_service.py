"""The hooks' slow mark (backoff.py) seen from the service's side: `doctor` shows it beside
the back-off, and a spool replay the store took ends it (the long writer that made the service
slow is done), so the hooks' writes go to the service again within a replay's SCAN_S, not
after the mark's whole length."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness_support import hook_env, run_memory_mcp
from test_service_support import start_service

from semantic_memory import backoff, spool
from semantic_memory.config import Settings


def test_doctor_shows_the_slow_mark_and_a_replay_the_store_took_ends_it(
        tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        settings = Settings(db_path=str(tmp_path / "memory.db"))
        url = service.url
        backoff.mark_slow(settings.backoff_path, url, 600, "POST /ingest did not answer within "
                                                         "the budget; the probe answered")
        env = hook_env(tmp_path, url)
        doctor = run_memory_mcp(env, "doctor")
        assert "slow      writes go straight to the spool until " in doctor, doctor
        report = json.loads(run_memory_mcp(env, "doctor", "--json"))
        assert report["spool"]["slow"]["detail"].startswith("POST /ingest did not answer")

        spool.append(settings.spool_path, "/ingest",
                     {"content": "the release train leaves on tuesdays", "source": "chat"})
        deadline = time.monotonic() + 30  # replays come every 3 s; the mark holds 600
        while backoff.slow(settings.backoff_path, url) is not None:
            assert time.monotonic() < deadline, "the replay left the slow mark in place"
            time.sleep(0.2)
        with service.client() as http:
            listed = http.get("/api/memories").json()["items"]
        assert [m["content"] for m in listed] == ["the release train leaves on tuesdays"]
        assert "slow " not in run_memory_mcp(env, "doctor")
    finally:
        service.stop()
