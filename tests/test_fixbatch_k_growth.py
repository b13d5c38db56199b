"""An exchange that grows between two flushes is one memory, not one per flush. Claude Code's
PreCompact(auto) may fire mid-turn and again once the assistant has finished, with no
compaction between; a SessionEnd later flushes the exchange grown further. Each flush stored
the exchange as it then stood, so the store held the question with the first line of the
answer, the same with the real answer, and a third copy. Now a flush memory whose text starts
with a current flush memory of its session (whitespace aside) replaces it: the shorter copy is
history (superseded), which recall and injection leave out. Real hooks, a real service, on
both stores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness_support import hook_env, hook_log, run_hook
from semantic_memory.config import Settings
from semantic_memory.harness.transcript import exchange_chunks
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety.redaction import redact
from test_service_support import Service, start_service

pytestmark = pytest.mark.both_stores

QUESTION = "Fix the flaky LOGINWORD test please"
FIRST = "Looking at tests/test_login.py first."
ANSWER = ("The LOGINWORD test was flaky because the TOTP code depends on wall-clock time; I froze "
          "time with freezegun in tests/test_login.py so the 2FA window is deterministic.")
LATER = "I also ran the suite three times in a row: all green."


def service_for(tmp: Path, store_kind: str) -> Service:
    if store_kind == "postgresql":
        import pg

        return start_service(tmp, MEMORY_DB_URL=pg.new_database())
    return start_service(tmp, MEMORY_PLUGINS="bm25_porter,bm25_trigram")


class Transcript:
    """A Claude Code transcript (JSON lines) that grows as the agent writes it."""

    def __init__(self, path: Path) -> None:
        self.path, self.calls = path, 0

    def add(self, kind: str, content: Any) -> None:
        with self.path.open("a") as out:
            out.write(json.dumps({"type": kind, "sessionId": "s1",
                                  "message": {"role": kind, "content": content}}) + "\n")

    def ask(self, question: str) -> None:
        self.add("user", question)

    def say(self, text: str, *, then_tool: bool = False) -> None:
        """An assistant message: text, and a tool call when `then_tool` (the turn goes on)."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if then_tool:
            self.calls += 1
            blocks.append({"type": "tool_use", "id": f"t{self.calls}", "name": "Read",
                           "input": {"file_path": "tests/test_login.py"}})
        self.add("assistant", blocks)
        if then_tool:
            self.add("user", [{"type": "tool_result", "tool_use_id": f"t{self.calls}",
                               "content": "def test_login(): ..."}])


def hook(tmp: Path, url: str, transcript: Transcript, event: str) -> dict[str, Any]:
    """Claude Code's `event` hook (PreCompact fired automatically, or SessionEnd) for session
    `s1` of the repository `repo`; its hook-log line."""
    payload: dict[str, Any] = {"session_id": "s1", "cwd": str(tmp / "repo"),
                               "transcript_path": str(transcript.path),
                               "hook_event_name": event}
    payload |= {"trigger": "auto"} if event == "PreCompact" else {"reason": "exit"}
    # 10 s: the first write to a new PostgreSQL database, on a loaded machine
    done = run_hook("claude-code", event, payload,
                    hook_env(tmp, url, MEMORY_HOOK_BUDGET_S="10"), timeout=60)
    assert done.returncode == 0, done.stderr
    return hook_log(tmp)[-1]


def flushed(service: Service, word: str, *, history: bool = False) -> list[dict[str, Any]]:
    """The flush memories holding `word`: the current ones, or with `history` every live one."""
    params: dict[str, Any] = {"limit": 100, "source": "compaction"}
    if history:
        params["include_superseded"] = "true"
    with service.client() as http:
        items = http.get("/api/memories", params=params).json()["items"]
    return [m for m in items if word in m["content"]]


def recalled(service: Service, query: str) -> list[str]:
    with service.client() as http:
        answer = http.post("/recall", json={"query": query, "project": "repo", "k": 10})
        assert answer.status_code == 200, answer.text
        return [item["content"] for item in answer.json()["items"]]


def test_an_exchange_flushed_mid_turn_and_twice_more_is_one_current_memory(
        tmp_path: Path, store_kind: str) -> None:
    (tmp_path / "repo").mkdir()
    transcript = Transcript(tmp_path / "transcript.jsonl")
    transcript.ask("How do we rotate the GROWWORD signing keys for the auth service?")
    transcript.say("Rotation uses scripts/rotate_keys.sh which writes a new JWK to vault.")
    transcript.ask(QUESTION)
    transcript.say(FIRST, then_tool=True)
    service = service_for(tmp_path / "svc", store_kind)
    try:
        assert "2 new" in hook(tmp_path, service.url, transcript, "PreCompact")["detail"]
        transcript.say(ANSWER, then_tool=True)  # PreCompact fires again, the turn going on
        line = hook(tmp_path, service.url, transcript, "PreCompact")
        assert "1 new, 1 already stored" in line["detail"], line
        transcript.say(LATER)
        line = hook(tmp_path, service.url, transcript, "SessionEnd")
        assert "1 new, 1 already stored" in line["detail"], line

        whole = f"User: {QUESTION}\nAssistant: {FIRST}\n\n{ANSWER}\n\n{LATER}"
        current = flushed(service, "LOGINWORD")
        assert [m["content"] for m in current] == [whole]
        copies = {m["content"]: m for m in flushed(service, "LOGINWORD", history=True)}
        assert len(copies) == 3  # the shorter two are history, kept
        shortest = copies[f"User: {QUESTION}\nAssistant: {FIRST}"]
        middle = copies[f"User: {QUESTION}\nAssistant: {FIRST}\n\n{ANSWER}"]
        assert shortest["superseded_by"] == middle["uid"]
        assert middle["superseded_by"] == current[0]["uid"]
        # recall (and so injection) hands out the whole exchange, once
        assert [c for c in recalled(service, "flaky LOGINWORD test") if "LOGINWORD" in c] \
            == [whole]
        # the exchange before it never grew: untouched
        assert len(flushed(service, "GROWWORD", history=True)) == 1
    finally:
        service.stop()


def test_a_long_exchange_that_grows_keeps_only_its_latest_pieces(
        tmp_path: Path, store_kind: str) -> None:
    """An exchange cut into pieces: the pieces before the one that grew are cut alike (the
    same memories, refreshed); the grown last piece replaces its shorter copy."""
    (tmp_path / "repo").mkdir()
    transcript = Transcript(tmp_path / "transcript.jsonl")
    # two long paragraphs make two pieces; the short third one joins the second piece
    paragraphs = [f"Step {n} of the LONGWORD migration: " + " ".join(
        f"table{n}_{i} moves to the new schema with its indexes rebuilt." for i in range(11))
        for n in range(1, 3)] + ["Step 3 of the LONGWORD migration: drop the old schema once "
                                 "every reader has moved, after a day of both."]
    transcript.ask("Walk me through the LONGWORD schema migration")
    transcript.say(paragraphs[0])
    transcript.say(paragraphs[1], then_tool=True)
    service = service_for(tmp_path / "svc", store_kind)
    try:
        hook(tmp_path, service.url, transcript, "PreCompact")
        before = {m["uid"] for m in flushed(service, "LONGWORD")}
        assert len(before) == 2  # cut in two
        transcript.say(paragraphs[2])
        hook(tmp_path, service.url, transcript, "SessionEnd")
        pieces = exchange_chunks("Walk me through the LONGWORD schema migration",
                                 "\n\n".join(paragraphs), redact)
        current = flushed(service, "LONGWORD")
        assert sorted(m["content"] for m in current) == sorted(pieces)
        history = [m for m in flushed(service, "LONGWORD", history=True)
                   if m.get("superseded_by") is not None]
        assert len(history) == 1 and history[0]["uid"] in before
        assert history[0]["superseded_by"] in {m["uid"] for m in current} - before
    finally:
        service.stop()


def flush(engine: MemoryEngine, content: str, *, session: str = "claude-code:s1",
          source: str = "compaction", project: str = "repo") -> str:
    result = engine.ingest([NewMemory(content, kind="note", source=source, project=project,
                                      session=session)])[0]
    assert result.status == "new", result
    return result.uid  # type: ignore[return-value]


def current(engine: MemoryEngine) -> set[str]:
    return {m.uid for m in engine.list(RecallFilters(), limit=100)}


def test_only_a_flush_of_the_same_session_replaces_what_it_grew(settings: Settings) -> None:
    """Another session, another project, an explicit store or a tool capture that starts with
    a flushed exchange is a memory of its own; a text that only starts with the same letters
    (not a whole word) is another exchange."""
    engine = MemoryEngine(settings)
    short = f"User: {QUESTION}\nAssistant: {FIRST}"
    try:
        first = flush(engine, short)
        others = [flush(engine, f"{short} {ANSWER}", session="claude-code:s2"),
                  flush(engine, f"{short} {ANSWER}", project="web"),
                  flush(engine, f"{short}\n\nremember this", source="chat"),
                  flush(engine, f"{short}\n\n{LATER}", source="tool"),
                  flush(engine, f"{short}ly")]
        assert current(engine) == {first, *others}
    finally:
        engine.close()


def test_growth_replaces_with_the_supersession_rule_off(settings: Settings) -> None:
    """MEMORY_SUPERSEDE=0 turns off the rule for facts whose value changed; two copies of one
    exchange are no such value."""
    engine = MemoryEngine(replace(settings, supersede=False))
    short = f"User: {QUESTION}\nAssistant: {FIRST}"
    try:
        first = flush(engine, short)
        grown = engine.ingest([NewMemory(f"{short}\n\n{ANSWER}", kind="note",
                                         source="compaction", project="repo",
                                         session="claude-code:s1")])[0]
        assert grown.status == "new" and grown.supersedes == [first]
        assert current(engine) == {grown.uid}
        assert engine.get(first).superseded_by == grown.uid
    finally:
        engine.close()
