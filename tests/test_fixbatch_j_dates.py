"""An exchange a flush stores is dated by its first user turn, the time the harness wrote in the
transcript (Claude Code's and Codex's `timestamp`, Kimi Code's `time`, opencode's
`time.created`): it was dated by the flush, so a conversation of 2025-03-10 was stored, and
injected, as today's (a QA pass: /tmp/qa-capture/repro_timestamps.sh). A time more than a day
ahead of the clock, which the service refuses, or none: the time it is stored. The opencode
plugin's `flushItems` (the shipped bundle) sends the same dated items."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from semantic_memory.harness.transcript import Turn, flush_items, read_jsonl, transcript_time
from semantic_memory_claude_code import ClaudeCodeAdapter
from semantic_memory_codex import CodexAdapter
from semantic_memory_kimi_code import KimiCodeAdapter
from test_fixbatch_j_support import (
    DAY,
    MARCH_10,
    claude_line,
    conversations,
    iso,
    plugin_items,
    stored,
    write_jsonl,
)
from test_service_support import Service, start_service

GOLDEN = Path(__file__).parent / "harness_golden"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("dates"))
    yield svc
    svc.stop()


def test_transcript_time_reads_each_harness_clock_and_refuses_what_the_service_would() -> None:
    now = time.time()
    assert transcript_time("2025-03-10T08:00:01.000Z") == MARCH_10  # Claude Code, Codex
    assert transcript_time("2025-03-10T09:00:01+01:00") == MARCH_10
    assert transcript_time("2025-03-10T08:00:01") == MARCH_10  # no offset: UTC
    assert transcript_time(1796117668004) == 1796117668.004  # Kimi Code, opencode: ms
    assert transcript_time(MARCH_10 * 1000) == MARCH_10
    ahead = transcript_time((now + 23 * 3600) * 1000)  # clock skew the service takes
    assert ahead is not None and ahead > now
    # More than a day ahead is refused by the service (422): the flush dates it instead.
    assert transcript_time((now + 2 * DAY) * 1000) is None
    assert transcript_time(iso(now + 2 * DAY)) is None
    for unreadable in ("yesterday", "", None, True, [], {}, -5, float("nan"), float("inf"),
                       10 ** 400, "1741593601"):
        assert transcript_time(unreadable) is None, unreadable


@pytest.mark.parametrize(("adapter", "fixture", "field"), [
    (ClaudeCodeAdapter(), "claude-code.jsonl", "timestamp"),
    (CodexAdapter(), "codex-rollout.jsonl", "timestamp"),
    (KimiCodeAdapter(), "kimi-code-wire.jsonl", "time")])
def test_every_reader_dates_its_turns_from_the_transcript(adapter: Any, fixture: str,
                                                          field: str) -> None:
    """Each adapter's turns of its golden transcript (what the real harness wrote) carry the
    time of their line; the first exchange's item the time of its user turn."""
    turns = [(entry, turn) for entry in read_jsonl(GOLDEN / fixture)
             if (turn := adapter.transcript_turn(entry)) is not None]
    assert len(turns) >= 6
    for entry, turn in turns:
        assert turn.at == transcript_time(entry[field]) and turn.at is not None
        assert iso(turn.at).startswith("2026-12-01T09:"), (turn, entry[field])
    first_user = next(turn for _, turn in turns if turn.role == "user")
    items, _ = flush_items([turn for _, turn in turns])
    assert items[0][0]["created_at"] == first_user.at


def test_a_flush_is_stored_with_the_time_its_exchanges_began(service: Service,
                                                             tmp_path: Path) -> None:
    """The items a flush makes of a Claude Code transcript of 2025-03-10, stored by the
    service: each memory, a long exchange's pieces too, dated by its first user turn. A line
    dated more than a day ahead, or not dated, is stored as of now (not refused)."""
    def stamp(seconds: float) -> str:  # Claude Code's form
        return iso(seconds).replace("Z", ".000Z")

    long_reply = "The migration failed because a long transaction held the lock. " * 60
    lines = [claude_line("user", "Why did the checkout test fail on CI?", stamp(MARCH_10)),
             claude_line("assistant", "The Redis fixture flushes keys between workers.",
                         stamp(MARCH_10 + 5)),
             claude_line("user", "What went wrong with migration 0042?", stamp(MARCH_10 + 60)),
             claude_line("assistant", long_reply, stamp(MARCH_10 + 70)),
             claude_line("user", "Which cluster hosts staging?", iso(time.time() + 3 * DAY)),
             claude_line("assistant", "Staging runs on kube-stg-eu-west-1."),
             claude_line("user", "Where do the nightly backups go?"),
             claude_line("assistant", "Nightly backups go to s3://acme-backups/nightly.")]
    turns = ClaudeCodeAdapter().turns({"transcript_path": str(
        write_jsonl(tmp_path / "t.jsonl", lines))})
    items, _ = flush_items(turns)
    assert [item.get("created_at") for item, _ in items] == [MARCH_10, MARCH_10 + 60, None, None]
    before = time.time()
    with service.client() as http:
        answer = http.post("/ingest", json={"items": [
            {**item, "kind": "note", "source": "compaction", "project": "dated"}
            for item, _ in items]}).json()
    assert answer["rejected"] == 0 and answer["new"] > 4, answer
    days = [(m["content"].split("\n")[0], m["created_at"][:10])
            for m in stored(service, "dated")]
    today = datetime.fromtimestamp(before, UTC).date().isoformat()
    assert days[0] == ("User: Why did the checkout test fail on CI?", "2025-03-10")
    migration = days[1:-2]  # the long exchange's pieces, the later ones headed by its question
    assert len(migration) > 2 and {day for _, day in migration} == {"2025-03-10"}
    question = "What went wrong with migration 0042?"
    assert {line for line, _ in migration} == {f"User: {question}", f"(User asked: {question})"}
    assert days[-2:] == [("User: Which cluster hosts staging?", today),
                         ("User: Where do the nightly backups go?", today)]


def test_the_plugin_dates_what_the_hooks_date() -> None:
    """The first user turn dates its exchange (without one, the first reply), both sides."""
    cases = conversations(random.Random(20261206),
                          ["Which port does the metrics exporter use?", "and the admin one"],
                          ["It listens on 9464.", "Resuming the work on the billing exporter."])
    cases.append([Turn("assistant", "Resuming the earlier work on the billing exporter.", 1),
                  Turn("user", "Which port does it use?", 2),
                  Turn("user", "the metrics one", 3), Turn("assistant", "9464, see otel.yaml.", 4)])
    items = plugin_items(cases)
    assert sum("created_at" in item for found in items for item, _ in found) > 50
    assert [item["created_at"] for item, _ in items[-1]] == [1, 2]
