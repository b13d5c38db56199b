"""Helpers for the tests of what a flush captures from a transcript (test_fixbatch_j_*.py):
Claude Code transcript lines, a real PreCompact hook over them, the memories it stored, and the
conversations the hooks' and the opencode plugin's flushes are compared on. (No tests here.)"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness_support import hook_env, hook_log, run_hook
from semantic_memory.harness.transcript import Turn, flush_items
from test_opencode_plugin import node_eval, random_text
from test_service_support import Service

DAY = 86_400
MARCH_10 = datetime(2025, 3, 10, 8, 0, 1, tzinfo=UTC).timestamp()


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def claude_line(role: str, text: str, stamp: str | None = None) -> dict[str, Any]:
    """A Claude Code 2.1.332 transcript line (its `timestamp` when `stamp` is given)."""
    message: dict[str, Any] = {"role": role, "content": text} if role == "user" else {
        "role": role, "type": "message", "content": [{"type": "text", "text": text}]}
    line = {"parentUuid": None, "isSidechain": False, "type": role, "message": message,
            "sessionId": "sess-capture", "cwd": "/tmp/repo", "version": "2.1.332"}
    return line if stamp is None else {**line, "timestamp": stamp}


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def hook_flush(service: Service, tmp: Path, lines: list[dict[str, Any]],
               project: str) -> list[dict[str, Any]]:
    """A Claude Code PreCompact hook over a transcript of these lines; the project's stored
    compaction memories, oldest first."""
    transcript = write_jsonl(tmp / "transcript.jsonl", lines)
    env = hook_env(tmp, service.url, MEMORY_PROJECT=project, MEMORY_HOOK_BUDGET_S="20")
    run = run_hook("claude-code", "PreCompact", {
        "session_id": f"sess-{project}", "transcript_path": str(transcript), "cwd": str(tmp),
        "hook_event_name": "PreCompact", "trigger": "manual"}, env, timeout=120)
    assert run.returncode == 0 and run.stdout == "", run.stderr
    assert hook_log(tmp)[-1]["outcome"] == "stored", hook_log(tmp)[-1]
    return stored(service, project)


def stored(service: Service, project: str) -> list[dict[str, Any]]:
    with service.client() as http:
        items = http.get("/api/memories", params={"project": project, "source": "compaction",
                                                  "limit": 500}).json()["items"]
    return list(reversed(items))


def conversations(rng: random.Random, users: list[str], replies: list[str],
                  count: int = 120) -> list[list[Turn]]:
    """Random dated conversations whose turns are, two times in five, one of `users` or
    `replies` (by role), else random text (test_opencode_plugin.py `random_text`)."""
    out = []
    for _ in range(count):
        turns = []
        for _ in range(rng.randint(1, 8)):
            role = rng.choice(["user", "assistant"])
            text = rng.choice(users if role == "user" else replies) if rng.random() < 0.4 \
                else random_text(rng)
            at = rng.choice([None, MARCH_10 + rng.randint(0, 10**6), 1796117668.004])
            turns.append(Turn(role, text, at))
        out.append(turns)
    return out


def plugin_items(cases: list[list[Turn]]) -> list[list[tuple[dict[str, Any], int]]]:
    """The opencode plugin's `flushItems` (the shipped bundle) of each conversation, each
    asserted to be the Python `flush_items`, item for item; the items."""
    want = [flush_items(turns)[0] for turns in cases]
    got = node_eval("flushItems", [[[{"role": t.role, "text": t.text,
                                      **({} if t.at is None else {"at": t.at})}
                                     for t in turns]] for turns in cases])
    for turns, have, items in zip(cases, got, want, strict=True):
        assert have == [[item, n] for item, n in items], turns
    return want
