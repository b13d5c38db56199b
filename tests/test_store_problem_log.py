"""A store problem met by request after request is logged once a STORE_PROBLEM_LOG_S, the next
line counting the requests it stood for (the service side is in test_postgres_refusals.py)."""

from __future__ import annotations

import logging
import time

import pytest
from semantic_memory.service import errors
from semantic_memory.service.errors import StoreProblemLog


def test_one_line_a_spell_then_a_count_of_the_requests_it_stood_for(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(errors, "STORE_PROBLEM_LOG_S", 0.3)
    said = StoreProblemLog()
    down = "postgresql://memory:***@db/team is unavailable: no answer from the server within 5 s"
    with caplog.at_level(logging.WARNING, "semantic_memory.service"):
        for _ in range(5):
            said.warn("GET", "/health", down)
        said.warn("POST", "/recall", "another problem")
        time.sleep(0.4)
        said.warn("POST", "/ingest", down)
    assert [r.getMessage() for r in caplog.records] == [
        f"GET /health: {down}",
        "POST /recall: another problem",
        f"POST /ingest: {down} (4 more requests met it since the last line)",
    ]
