"""A compaction in the middle of a turn (Claude Code compacts as the context fills, between two
tool calls of one answer): the question is before the compaction's marker and the rest of the
answer after it. The next flush (PreCompact again, SessionEnd) stored that rest as an answer to
nothing ("Assistant: …" alone), which no question about it finds well; the question now heads
it again. Real Claude Code hook processes, a real service."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness_support import hook_env, hook_log, run_hook
from test_service_support import start_service

QUESTION = "Why does the checkout integration test keep failing on CI?"
FIRST = "Let me look at the fixture setup first; the Redis fixture is shared between workers."
REST = ("Found it: the Redis fixture flushes keys between workers, so pin it to database 7 "
        "and the checkout test passes.")


def entry(role: str, text: str, **extra: Any) -> dict[str, Any]:
    content: Any = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": role, "sessionId": "s1", "message": {"role": role, "content": content},
            **extra}


def test_the_rest_of_an_answer_after_a_mid_turn_compaction_keeps_its_question(
        tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    transcript = tmp_path / "transcript.jsonl"
    lines = [entry("user", QUESTION), entry("assistant", FIRST),
             {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
              "sessionId": "s1"},
             entry("user", "This session is being continued. Summary: …", isCompactSummary=True),
             entry("assistant", REST)]
    transcript.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n"
                                  for line in lines))  # as Claude Code writes it
    service = start_service(tmp_path / "svc", MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    try:
        done = run_hook("claude-code", "SessionEnd", {
            "session_id": "s1", "cwd": str(tmp_path / "repo"), "transcript_path": str(transcript),
            "hook_event_name": "SessionEnd", "reason": "exit"},
            hook_env(tmp_path, service.url, MEMORY_HOOK_BUDGET_S="10"), cwd=tmp_path / "repo")
        assert done.returncode == 0, done.stderr
        assert hook_log(tmp_path)[-1]["outcome"] == "stored", hook_log(tmp_path)[-1]
        with service.client() as http:
            stored = [m["content"] for m in http.get(
                "/api/memories", params={"source": "compaction"}).json()["items"]]
        assert stored == [f"User: {QUESTION}\nAssistant: {REST}"]
    finally:
        service.stop()
