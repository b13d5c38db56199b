"""A `<private>` left open at the end of a user message carries into the next CARRY_MESSAGES
user messages only: a person who merely mentions the tag ("does wrapping text in <private>
keep it out?") turned capture, recall and "remember" off for the rest of the session, unseen.
Within the bound a prompt read inside the span is told to the model (memory paused until
`</private>`); past it the tag was a mention and nothing later is hidden. And the span state of
a long transcript is kept beside the db, so a prompt reads only what was appended since.
Real Claude Code hook processes, a real transcript and a real service."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from harness_support import (
    claude_hook,
    hook_log,
    stored_contents,
    transcript_entry,
    write_transcript,
)
from semantic_memory.private import CARRY_MESSAGES, NO_CARRY, carry_private
from semantic_memory_claude_code import ClaudeCodeAdapter
from test_service_support import Service, start_service

MENTION = "Quick question about this memory tool: does wrapping text in <private> keep it out?"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    svc = start_service(tmp_path_factory.mktemp("mentions"),
                        MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    with svc.client() as client:
        client.post("/ingest", json={"content": "The invoice rounding bug lives in billing.py",
                                     "project": "p-mention"})
    yield svc
    svc.stop()


def transcript(path: Path, texts: list[str]) -> Path:
    """User and assistant turns, alternating, from the first user message."""
    return write_transcript(path, [transcript_entry("user" if i % 2 == 0 else "assistant", text, i)
                                   for i, text in enumerate(texts)])


def prompt_hook(tmp: Path, service: Service, path: Path, prompt: str) -> tuple[str, dict[str, Any]]:
    done = claude_hook(tmp, service.url, "UserPromptSubmit", path, "p-mention", prompt=prompt)
    return done.stdout, hook_log(tmp)[-1]


# --- the rule ---------------------------------------------------------------------------------


def test_an_unclosed_tag_carries_into_two_messages_then_is_a_mention() -> None:
    assert CARRY_MESSAGES == 2
    kept, carry = carry_private(MENTION, NO_CARRY)
    assert kept.endswith("does wrapping text in ") and carry == (1, 0)  # its own rest hidden
    assert carry_private("which port does the proxy use?", carry) == ("", (1, 1))
    assert carry_private("we use pnpm", (1, 1)) == ("", NO_CARRY)  # lapsed: a mention
    assert carry_private("where is the bug?", NO_CARRY) == ("where is the bug?", NO_CARRY)
    # Closed within the bound: hidden up to the closing tag, as before.
    assert carry_private("Phone 0207</private> fix the bug", (1, 1)) == (" fix the bug", NO_CARRY)
    # Closed and opened again: the new span is counted from this message.
    assert carry_private("a</private> b <private>c", (1, 1)) == (" b ", (1, 0))
    assert carry_private("<private>a <private>b", NO_CARRY) == ("", (2, 0))


# --- the hooks ----------------------------------------------------------------------------------


def test_a_mention_pauses_recall_for_two_messages_and_says_so(service: Service,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    query = "where is the invoice rounding bug?"
    for later, paused in ((0, True), (1, True), (2, False)):
        texts = [MENTION, "No: it hides the rest of the message."]
        for i in range(later):
            texts += [f"unrelated question {i}", f"answer {i}"]
        stdout, log = prompt_hook(tmp_path, service, transcript(path, texts), query)
        if paused:
            context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
            assert "semantic-memory is paused" in context and "</private>" in context, context
            assert "billing.py" not in context and len(context.splitlines()) == 1, context
            assert log["outcome"] == "skipped" and "paused" in log["detail"], log
        else:
            assert "billing.py" in stdout and log["outcome"] == "injected", (stdout, log)
    # The prompt itself in the transcript already (written before the hook ran): not counted.
    stdout, log = prompt_hook(tmp_path, service, transcript(path, [
        MENTION, "No.", "unrelated question", "answer", query]), query)
    assert "semantic-memory is paused" in stdout, (stdout, log)


def test_a_resumed_session_is_not_told_memory_is_paused_at_its_start(
        service: Service, tmp_path: Path) -> None:
    """Claude Code and Codex resume a session with a SessionStart hook that recalls for the
    last user message: read inside a carried span, it told the model "this message" was
    paused, beside the block the next prompt's hook gave (the prompt closed the span) or
    alone (the prompt was past the bound: recalled for and stored). The QA's real binaries."""
    path = transcript(tmp_path / "t.jsonl", [MENTION, "No: it hides the rest.",
                                             "where is the invoice rounding bug?"])
    done = claude_hook(tmp_path, service.url, "SessionStart", path, "p-mention",
                       source="resume")
    assert done.stdout.strip() == "", done.stdout
    log = hook_log(tmp_path)[-1]
    assert log["outcome"] == "skipped" and "paused" in log["detail"], log
    # the next prompt, still inside the span, is told
    stdout, log = prompt_hook(tmp_path, service, path, "and the invoice rounding bug?")
    assert "semantic-memory is paused" in stdout and log["outcome"] == "skipped", (stdout, log)


def test_a_remember_inside_a_carried_span_says_it_was_not_remembered(
        service: Service, tmp_path: Path) -> None:
    path = transcript(tmp_path / "t.jsonl", [f"Should the README say `{MENTION[-40:]}`?", "Yes."])
    stdout, log = prompt_hook(tmp_path, service, path,
                              "remember: the staging proxy listens on port 8443")
    context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    assert "did NOT store this" in context and "<private>" in context, context
    assert log["outcome"] == "skipped", log
    contents = stored_contents(service, "p-mention")
    assert not any("8443" in content for content in contents), contents


def test_a_compaction_stores_the_exchanges_after_a_mention(service: Service,
                                                          tmp_path: Path) -> None:
    path = transcript(tmp_path / "t.jsonl", [
        MENTION, "It hides the rest of that message.",
        "which port does the staging proxy listen on?", "It listens on 8443.",
        "and the lockfile?", "pnpm-lock.yaml.",
        "We decided to use pnpm for the monorepo.", "Noted: pnpm it is.",
        "Fix the invoice rounding in billing.py please.", "Fixed the rounding in billing.py."])
    claude_hook(tmp_path, service.url, "PreCompact", path, "p-mention-flush",
                session_id="cc-compact", trigger="manual")
    text = "\n".join(stored_contents(service, "p-mention-flush"))
    assert "pnpm for the monorepo" in text and "rounding in billing.py" in text, text
    assert "8443" not in text and "lockfile" not in text, text  # hidden then, hidden now
    assert "keep it out" not in text, text  # the mention's own rest stays hidden


# --- a long transcript: read from where the last read stopped ----------------------------------


def test_a_long_transcript_is_read_from_where_the_last_prompt_stopped(tmp_path: Path) -> None:
    """`private_carry` with a cache folder reads only what was appended since it last read
    (timed as a ratio, wide); appended tags are still seen, and a replaced file is read anew."""
    path = tmp_path / "t.jsonl"
    line = "Step {}: \u2713 ran the tests \u2192 412 passed; caf\u00e9 r\u00e9sum\u00e9 " + "x" * 400
    with open(path, "w", encoding="utf-8") as out:
        for i in range(80_000):  # ~36 MB, every line non-ASCII
            out.write(json.dumps(transcript_entry("user" if i % 2 == 0 else "assistant",
                                                  line.format(i), i % 60),
                                 ensure_ascii=False) + "\n")
    adapter, payload, cache = ClaudeCodeAdapter(), {"transcript_path": str(path)}, \
        str(tmp_path / "private-carry")

    def timed(**kwargs: Any) -> tuple[float, Any]:
        started = time.perf_counter()
        carry = adapter.private_carry(payload, **kwargs)
        return time.perf_counter() - started, carry

    whole = min(timed()[0] for _ in range(3))  # no cache: the whole file each time
    assert timed(cache=cache)[1] == NO_CARRY  # reads it whole, keeps where it stopped
    assert os.listdir(cache), "nothing kept"
    kept = min(timed(cache=cache)[0] for _ in range(3))
    assert kept * 5 < whole, (kept, whole)

    def append(*texts: str) -> None:
        with open(path, "a", encoding="utf-8") as out:
            for text in texts:
                out.write(json.dumps(transcript_entry("user", text, 1)) + "\n")

    append(MENTION)
    assert adapter.private_carry(payload, cache=cache) == (1, 0)
    assert adapter.private_carry(payload, cache=cache, latest=MENTION) == NO_CARRY
    assert adapter.private_carry(payload, cache=cache) == (1, 0)  # the same, asked again
    append("untagged, inside the span")
    assert adapter.private_carry(payload, cache=cache) == (1, 1)
    append("also untagged")
    assert adapter.private_carry(payload, cache=cache) == NO_CARRY  # lapsed
    assert adapter.private_carry(payload) == NO_CARRY  # as a read from the top finds
    # A new file at the same path (a new inode): read from its top, not from the kept offset.
    replaced = tmp_path / "t2.jsonl"
    with open(path, "rb") as source, open(replaced, "wb") as copy:
        copy.write(source.read(5 << 20))
        copy.write(b"\n" + json.dumps(transcript_entry("user", "a <private>b", 1)).encode()
                   + b"\n")
    os.replace(replaced, path)
    assert adapter.private_carry(payload, cache=cache) == (1, 0)
