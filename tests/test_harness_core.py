"""The harness machinery that every adapter shares: transcripts cut into memories, the
project name, the hook log, the one-shot client, and the hook runner's fail-open budget."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from semantic_memory.config import Settings
from semantic_memory.harness import outcomes
from semantic_memory.harness.adapter import FLUSH_BATCH, HarnessAdapter, HookCall
from semantic_memory.harness.client import (
    ServiceClient,
    ServiceDown,
    ServiceFailed,
    ServiceTimeout,
    resolve_address,
)
from semantic_memory.harness.project import detect_project, normalise_remote
from semantic_memory.harness.settings import HookSettings
from semantic_memory.harness.transcript import (
    Turn,
    chunk_turns,
    clean,
    count_in_file,
    flush_chunks,
    flush_items,
    memories_of,
    remembered,
    split_text,
    unquote,
)
from test_service_support import Service, memory_mcp_command, start_service

# --- transcripts -----------------------------------------------------------------------------


def test_each_exchange_becomes_one_memory() -> None:
    turns = [Turn("user", "Why does the checkout test fail on CI?"),
             Turn("assistant", "The Redis fixture flushes keys between workers."),
             Turn("assistant", "Pin it to database 7."),
             Turn("user", "ok"), Turn("assistant", "Done.")]
    assert chunk_turns(turns) == [
        "User: Why does the checkout test fail on CI?\n"
        "Assistant: The Redis fixture flushes keys between workers.\n\nPin it to database 7."]
    # "User: ok / Assistant: Done." is below MIN_CHUNK_CHARS: not worth a memory.


def test_injected_blocks_and_harness_wrappers_are_not_conversation() -> None:
    text = ("<semantic-memory>\nRecalled memories …\n<memory uid=\"x\">old</memory>\n"
            "</semantic-memory>\nWhat is the deploy command?<system-reminder>be brief"
            "</system-reminder><command-name>/compact</command-name>")
    assert clean(text) == "What is the deploy command?"
    assert chunk_turns([Turn("user", "<local-command-stdout>Compacted</local-command-stdout>"),
                        Turn("assistant", "")]) == []


def test_long_exchange_is_split_and_each_piece_names_the_question() -> None:
    question = "How do we rotate the staging database credentials?"
    answer = "\n\n".join(f"Step {i}: " + "rotate the key and restart the pods. " * 6
                         for i in range(12))
    chunks = chunk_turns([Turn("user", question), Turn("assistant", answer)], max_chars=600)
    assert len(chunks) > 3 and all(len(c) <= 600 for c in chunks)
    assert chunks[0].startswith(f"User: {question}\nAssistant: Step 0")
    assert all(c.startswith(f"(User asked: {question})\n") for c in chunks[1:])
    text = " ".join(c.split(")\n", 1)[-1] for c in chunks[1:])
    assert "Step 11:" in text and "Step 5:" in text
    # Deterministic: the same turns give the same memories (the store's dedup relies on it).
    assert chunk_turns([Turn("user", question), Turn("assistant", answer)], max_chars=600) == chunks


def test_a_chinese_or_japanese_reply_is_cut_after_a_sentence_not_inside_a_word() -> None:
    """Their sentences end in `。` `！` `？` with no space: a long reply was cut at the limit,
    mid-word (部|署), each half a memory that its word's search cannot find."""
    reply = "".join(f"第{i}步：先备份数据库，然后运行迁移脚本并部署新版本。" for i in range(60))
    pieces = split_text(reply, 200)
    assert len(pieces) > 5 and all(len(p) <= 200 for p in pieces)
    assert all(p.endswith("\u3002") for p in pieces[:-1]), pieces
    assert "".join(pieces) == reply
    assert split_text("ビルドは成功しました！次にテストを実行しますか？はい。" * 9, 60)[0].endswith(
        ("\uff01", "\uff1f", "\u3002"))


def test_split_text_prefers_paragraphs_then_sentences_then_words() -> None:
    assert split_text("aaaa bbbb\n\ncccc dddd", 12) == ["aaaa bbbb", "cccc dddd"]
    assert split_text("One sentence here. Another one there.", 25) == [
        "One sentence here.", "Another one there."]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


@pytest.mark.parametrize(("typed", "prompt"), [
    # `opencode run "…"`: an argument holding a space arrives wrapped in quotes, inner ones
    # escaped; `opencode run '"…"'` wraps the quotes the user typed once more.
    ('"remember that the freeze starts Fridays"', "remember that the freeze starts Fridays"),
    ('"\\"remember that the freeze starts Fridays\\""',
     "remember that the freeze starts Fridays"),
    ("  \u201cwhich service holds our feature flags?\u201d\n",
     "which service holds our feature flags?"),
    ('"say \\"hi\\" to C:\\tmp"', 'say "hi" to C:\\tmp'),
    # Quotes that are not around the whole prompt are the prompt's own.
    ('"deploy" and "rollback" differ how?', '"deploy" and "rollback" differ how?'),
    ('remember "pnpm, not npm"', 'remember "pnpm, not npm"'), ('""', '""'), ('"a\\"', '"a\\"'),
    # Single quotes, as a shell user may type them, ASCII or curly: only with none of their
    # kind inside (an apostrophe is one), so two quoted words stay as they are.
    ("'remember the queue is sqs'", "remember the queue is sqs"),
    (" \u2018remember the queue is sqs\u2019 ", "remember the queue is sqs"),
    ("'\"remember the queue is sqs\"'", "remember the queue is sqs"),
    ("'x' and 'y'", "'x' and 'y'"), ("'it's sqs'", "'it's sqs'"),
    ("\u2018it\u2019s sqs\u2019", "\u2018it\u2019s sqs\u2019"), ("''", "''"), ("'a", "'a"),
])
def test_wrapping_quotes_are_not_the_prompt(typed: str, prompt: str) -> None:
    assert unquote(typed) == prompt


def test_remember_prompts_quoted_or_not() -> None:
    assert remembered("Remember: use pnpm, not npm") == "use pnpm, not npm"
    assert remembered('"remember that the freeze starts Fridays"') == "the freeze starts Fridays"
    assert remembered('remember "pnpm, not npm"') == "pnpm, not npm"
    assert remembered('"which service holds our feature flags?"') is None
    assert remembered("I remember that test") is None


@pytest.mark.parametrize(("prompt", "fact"), [
    # Nothing to remember: an ordinary prompt.
    ("remember:", None), ("remember that", None), ("Remember that.", None), ("remember", None),
    ("remember \u2014 \U0001f642", None), ('remember ""', None),
    # Separators after the word: ASCII, dashes, fullwidth.
    ("REMEMBER \u2014 use pnpm not npm", "use pnpm not npm"),
    ("remember \u2013 use pnpm", "use pnpm"),
    ("remember\uff1athe port is 5433", "the port is 5433"),
    ("remember\uff0c\u3001the port is 5433", "the port is 5433"),
    ("remember that: the port is 5433", "the port is 5433"),
    ("remember that's the port", "that's the port"),
    # A question about memory, not a fact: recalled for, not stored.
    ("remember what port we chose for redis?", None), ("remember \u7aef\u53e3\uff1f", None),
    ('remember "which port?"', None), ("remember what? the port is 5433", None),
    # ... and so is one whose first sentence asks, or that opens with what/which/whether and
    # has no colon: the question was stored and the agent never saw the answer.
    ("Remember the staging port we picked? Put it in config/staging.yaml.", None),
    ("remember what port the staging database listens on.", None),
    ("remember which port we chose", None), ("remember \u7aef\u53e3\uff1f\u7528\u54ea\u4e2a", None),
    ("remember what we decided: use pnpm", "what we decided: use pnpm"),
    ("remember whatever happens, never force-push main",
     "whatever happens, never force-push main"),
    ("remember the URL is https://x.io/a?b=1", "the URL is https://x.io/a?b=1"),
    ("remember the port is 5433. Why? 5432 is taken.", "the port is 5433. Why? 5432 is taken."),
    ("Remember to run the tests before you commit.", "to run the tests before you commit."),
    # The word in the other languages the filters read; a CJK one needs a separator after it.
    ("\u8bb0\u4f4f\uff1a\u90e8\u7f72\u7528 make release", "\u90e8\u7f72\u7528 make release"),
    ("\u8a18\u4f4f\uff0c\u7aef\u53e3\u662f5433", "\u7aef\u53e3\u662f5433"),
    ("\u899a\u3048\u3066\u304a\u3044\u3066\uff1a\u30dd\u30fc\u30c8\u306f5433",
     "\u30dd\u30fc\u30c8\u306f5433"),
    ("\uae30\uc5b5\ud574\uc918: \ud3ec\ud2b8\ub294 5433", "\ud3ec\ud2b8\ub294 5433"),
    ("Merk dir, dass der Port 5433 ist", "der Port 5433 ist"),
    ("Retiens que le port est 5433", "le port est 5433"),
    ("Recuerda que el puerto es 5433", "el puerto es 5433"),
    ("Lembre-se: a porta \u00e9 5433", "a porta \u00e9 5433"),
    ("Ricorda che la porta \u00e8 5433", "la porta \u00e8 5433"),
    ("\u0417\u0430\u043f\u043e\u043c\u043d\u0438, \u0447\u0442\u043e \u043f\u043e\u0440\u0442 5433",
     "\u043f\u043e\u0440\u0442 5433"),
    ("\u8bb0\u4f4f\u4e86", None), ("\u899a\u3048\u3066\u306a\u3044", None),
    ("\uae30\uc5b5\ud574\uc57c \ud574", None),
    ("Recuerda c\u00f3mo configuramos el puerto?", None), ("Merkel said so", None),
    # Wrapped in single quotes.
    ("'remember the queue is sqs'", "the queue is sqs"),
    ("\u2018remember the queue is sqs\u2019", "the queue is sqs"),
    ("'remember' and 'forget'", None),
])
def test_what_a_remember_prompt_stores(prompt: str, fact: str | None) -> None:
    assert remembered(prompt) == fact


def test_a_remember_prompt_and_its_acknowledgement_are_not_flushed_again() -> None:
    """The fact was stored when the prompt was made: the flush keeps the rest of the session,
    and a reply that is more than an acknowledgement."""
    fact = "the deploy freeze starts on Fridays at noon"
    question = "Why does the checkout test fail on CI?"
    answer = "The Redis fixture flushes keys between workers."
    long_reply = ("Noted. Separately, scripts/deploy.sh never checks the calendar, so a deploy "
                  "started at 11:55 would still run into the freeze window; a guard that reads "
                  "the release calendar before tagging would catch that, and CI could enforce "
                  "it too.")
    turns = [Turn("user", question), Turn("assistant", answer),
             Turn("user", f'"remember that {fact}"'),
             Turn("assistant", f"Got it: I'll keep in mind that {fact}."),
             Turn("user", f"Remember: {fact}"), Turn("assistant", long_reply)]
    chunks = chunk_turns(turns)
    assert chunks == [f"User: {question}\nAssistant: {answer}", f"Assistant: {long_reply}"]
    assert not any(fact in chunk for chunk in chunks)
    # A quoted question is stored as the words inside the quotes.
    assert chunk_turns([Turn("user", f'"{question}"'), Turn("assistant", answer)]) == [
        f"User: {question}\nAssistant: {answer}"]


def long_exchange(i: int, repeat: int = 60) -> list[Turn]:
    """An exchange a flush cuts into pieces (3 at the default `repeat`)."""
    return [Turn("user", f"How is shard {i} moved to the new cluster?"),
            Turn("assistant", f"Shard {i}: " + "It drains, copies, verifies and switches "
                                               "over. " * repeat)]


def short_exchange(i: int) -> list[Turn]:
    return [Turn("user", f"Which port does service {i} listen on?"),
            Turn("assistant", f"Service {i} listens on port {8000 + i}.")]


def test_a_flush_sends_an_exchange_it_would_cut_whole() -> None:
    """`flush_items`: an exchange cut into pieces is one item, which the service redacts and
    then cuts, counted as its pieces; any other exchange is its memory, each once, none too
    short to be worth one. The memories they make are `chunk_turns`' (before redaction)."""
    turns = [*short_exchange(0), *long_exchange(1), *short_exchange(0),
             Turn("user", "ok"), Turn("assistant", "Done.")]
    pieces = chunk_turns(long_exchange(1))
    assert len(pieces) == 3
    items, left_out = flush_items(turns)
    assert items == [({"content": chunk_turns(short_exchange(0))[0]}, 1),
                     ({"exchange": {"user": turns[2].text, "reply": turns[3].text.strip()}}, 3)]
    assert left_out == 0
    assert flush_chunks(turns)[0] == chunk_turns(turns) == [
        chunk_turns(short_exchange(0))[0], *pieces]
    assert memories_of(items[1][0]) == 3 and memories_of(items[0][0]) == 1
    assert flush_items(turns) == (items, 0)  # deterministic


def test_a_flush_keeps_the_newest_exchanges_and_counts_what_it_left_out() -> None:
    """The newest exchanges whose memories make up `newest`: one the limit cuts through goes
    whole (the service cuts it, not the hook), and the memories of the older exchanges are
    counted as left out."""
    turns = [*short_exchange(0), *long_exchange(1), *short_exchange(2), *long_exchange(3),
             *short_exchange(4)]
    items, left_out = flush_items(turns, newest=2)
    assert [n for _, n in items] == [3, 1] and "exchange" in items[0][0]
    assert left_out == 1 + 3 + 1
    assert [n for _, n in flush_items(turns, newest=1)[0]] == [1]
    assert flush_items(turns, newest=1)[1] == 1 + 3 + 1 + 3
    assert flush_items(turns, newest=100) == flush_items(turns) == (
        [(item, n) for item, n in flush_items(turns)[0]], 0)
    assert len(flush_items(turns)[0]) == 5


class _Taking:
    """A ServiceClient stand-in that takes every /ingest batch, answering as the service does
    (an exchange item's result holds its pieces'; the counts count memories)."""

    def __init__(self) -> None:
        self.deadline = time.monotonic() + 120
        self.bodies: list[dict] = []

    def post(self, path: str, body: dict, deadline: float | None = None) -> dict:
        self.bodies.append(body)
        results = [{"status": "new", "pieces": [{"status": "new"}] * memories_of(item)}
                   if "exchange" in item else {"status": "new"} for item in body["items"]]
        return {"results": results, "new": sum(map(memories_of, body["items"])),
                "duplicate": 0, "rejected": 0}


def test_a_flush_request_holds_flush_batch_chunks_an_exchange_counting_its_pieces(
        tmp_path: Path) -> None:
    """An exchange item counts as its pieces toward FLUSH_BATCH, so a request weighs what the
    same chunks sent one by one would; an exchange of more pieces goes alone. The hook log
    counts the pieces."""
    turns = [turn for i in range(300) for turn in long_exchange(i)]
    # More pieces than FLUSH_BATCH: a reply of many messages (a flush cuts each one to
    # MESSAGE_CHARS, so one message alone makes some 30 pieces at most).
    turns += [long_exchange(300)[0], *(long_exchange(300, repeat=600)[1:] * 25)]
    turns += [turn for i in range(5) for turn in short_exchange(i)]
    items = flush_items(turns)[0]
    assert items[300][1] > FLUSH_BATCH
    service = _Taking()
    call = HookCall("example", "compact", {}, HookSettings(
        db_path=str(tmp_path / "memory.db"), project="batches"), service,  # type: ignore[arg-type]
        str(tmp_path))
    HarnessAdapter().flush(call, turns)
    sent = [item for body in service.bodies for item in body["items"]]
    assert [{k: item[k] for k in ("content", "exchange") if k in item} for item in sent] == \
        [item for item, _ in items]
    sizes = [sum(map(memories_of, body["items"])) for body in service.bodies]
    assert sizes == [498, 3 * 300 - 498, items[300][1], 5]  # 166 exchanges of 3, the rest
    total = sum(n for _, n in items)
    assert (call.outcome, call.detail) == (
        "stored", f"{total} chunks: {total} new, 0 already stored, 0 refused")


def test_count_in_file_across_read_boundaries(tmp_path: Path) -> None:
    marker = b'"subtype":"compact_boundary"'
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"x" * ((1 << 20) - 10) + marker + b"y" * 100 + marker)
    assert count_in_file(path, marker) == 2
    assert count_in_file(tmp_path / "missing", marker) == 0
    assert count_in_file(None, marker) == 0


# --- project ---------------------------------------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.parametrize("url", [
    "git@github.com:Acme/web.git", "https://github.com/Acme/web", "https://user:tok@GitHub.com:443/Acme/web.git/",
    "ssh://git@github.com/Acme/web.git"])
def test_remote_urls_of_one_repository_agree(url: str) -> None:
    assert normalise_remote(url) == "github.com/acme/web"  # GitHub's names are caseless


def test_two_checkouts_of_one_repository_share_a_project(tmp_path: Path) -> None:
    for name, url in (("a", "git@github.com:acme/web.git"), ("b", "https://github.com/acme/web")):
        (tmp_path / name / "src").mkdir(parents=True)
        git(tmp_path / name, "init", "-q")
        git(tmp_path / name, "remote", "add", "origin", url)
    assert detect_project(tmp_path / "a" / "src") == "github.com/acme/web"
    assert detect_project(tmp_path / "b") == "github.com/acme/web"


def test_worktree_uses_the_main_repository_remote(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q")
    git(main, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty",
        "-m", "init")
    git(main, "remote", "add", "origin", "git@gitlab.com:team/api.git")
    git(main, "worktree", "add", "-q", str(tmp_path / "feature"))
    assert detect_project(tmp_path / "feature") == "gitlab.com/team/api"


def test_without_a_remote_the_top_level_folder_names_the_project(tmp_path: Path) -> None:
    (tmp_path / "tool" / "deep" / "er").mkdir(parents=True)
    git(tmp_path / "tool", "init", "-q")
    assert detect_project(tmp_path / "tool" / "deep" / "er") == "tool"
    (tmp_path / "plain").mkdir()
    assert detect_project(tmp_path / "plain") == "plain"


# --- the hook log ----------------------------------------------------------------------------


def test_hook_log_keeps_last_success_and_failure(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(db_path=str(tmp_path / "memory.db"))
    monkeypatch.setattr(outcomes, "MAX_LOG_BYTES", 400)
    for i in range(6):
        outcomes.record(settings, {"harness": "h", "event": "E", "outcome": "injected",
                                   "detail": str(i)})
    outcomes.record(settings, {"harness": "h", "event": "E", "outcome": "service down"})
    latest = outcomes.latest(settings)[("h", "E")]
    assert latest["success"]["detail"] == "5" and latest["failure"]["outcome"] == "service down"
    outcomes.record(settings, {"harness": "h", "event": "E", "outcome": "spooled"})
    assert outcomes.latest(settings)[("h", "E")]["failure"]["outcome"] == "spooled"
    assert outcomes.latest(settings)[("h", "E")]["success"]["detail"] == "5"
    assert (tmp_path / "hooks.jsonl.1").exists()  # rotated, one generation kept
    assert (tmp_path / "hooks.jsonl").stat().st_size < 400


# --- the client ------------------------------------------------------------------------------


class _Hanging:
    """A TCP server that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        for conn in self.conns:
            conn.close()
        self.sock.close()


class _Failing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b'{"error": "database is on fire"}'
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hanging() -> Iterator[_Hanging]:
    server = _Hanging()
    yield server
    server.close()


@pytest.fixture
def failing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_client_tells_down_from_slow_from_failing(hanging: _Hanging, failing: str) -> None:
    with pytest.raises(ServiceDown):
        ServiceClient(f"http://127.0.0.1:{free_port()}", time.monotonic() + 2).get("/health")

    def timed_out_after(budget: float) -> float:
        start = time.monotonic()
        with pytest.raises(ServiceTimeout):
            ServiceClient(hanging.url, time.monotonic() + budget).get("/health")
        return time.monotonic() - start

    # The client's own deadline ends the wait (not a socket default): a deadline 4x as long
    # waits longer (a ratio within one run, with room for a loaded machine).
    short, long = timed_out_after(0.3), timed_out_after(1.2)
    assert long >= 1.2 and short < 0.75 * long, (short, long)
    with pytest.raises(ServiceFailed, match="database is on fire"):
        ServiceClient(failing, time.monotonic() + 2).post("/recall", {"query": "x"})


def test_service_url_from_env_then_discovery_then_default(tmp_path: Path) -> None:
    settings = Settings(db_path=str(tmp_path / "memory.db"))
    assert resolve_address(settings)[:2] == ("http://127.0.0.1:8765", "default")
    discovery = tmp_path / "memory.db.server.json"
    discovery.write_text(json.dumps({"url": "http://127.0.0.1:41000", "pid": 999_999_999}))
    assert resolve_address(settings).origin == "default"  # a stale file (dead pid) is ignored
    import os

    discovery.write_text(json.dumps({"url": "http://127.0.0.1:41000", "pid": os.getpid()}))
    assert resolve_address(settings)[:2] == ("http://127.0.0.1:41000",
                                             f"discovery file {discovery}")
    explicit = Settings(db_path=str(tmp_path / "memory.db"), plugin_url="http://h:1/")
    assert resolve_address(explicit)[:2] == ("http://h:1", "MEMORY_PLUGIN_URL")
    # no live discovery file: the service's own MEMORY_PORT, not a port the user never chose
    discovery.unlink()
    for settings in (Settings(db_path=str(tmp_path / "memory.db"), port=44913),
                     HookSettings.from_env({"MEMORY_DB_PATH": str(tmp_path / "memory.db"),
                                            "MEMORY_PORT": "44913"})):
        assert resolve_address(settings)[:2] == ("http://127.0.0.1:44913", "MEMORY_PORT")
    os_picked = Settings(db_path=str(tmp_path / "memory.db"), port=0)  # only discovery knows
    assert resolve_address(os_picked)[:2] == ("http://127.0.0.1:8765", "default")


# --- the runner: fail-open within the budget -------------------------------------------------

PROMPT = {"session": "s1", "cwd": "/tmp", "prompt": "which port does staging use?"}
BUDGET_S = 1.0


def assert_failed_open(tmp_path: Path, run: object, outcome: str) -> dict:
    assert run.returncode == 0 and run.stdout == "", run.stderr  # type: ignore[attr-defined]
    entry = hook_log(tmp_path)[-1]
    assert entry["outcome"] == outcome, entry
    # The hook's own clock, from process start: within its budget, with room for a watchdog
    # that a loaded machine wakes late (a ratio to the setting, not seconds).
    assert entry["ms"] <= 1.5 * BUDGET_S * 1000, entry
    return entry


def test_a_hook_is_not_given_what_its_harness_loads_itself(tmp_path: Path) -> None:
    """A memory imported from a file the harness loads into every session (tag
    `loaded-by:<harness>`, `memory-mcp import`) is already in its context: the hook names its
    harness (X-Memory-Harness) and the service leaves it out; another harness gets it."""
    service = start_service(tmp_path / "svc")
    try:
        with service.client() as http:
            for content, tags in (("Staging uses port 5433 for the database",
                                   ["loaded-by:example"]),
                                  ("Staging uses port 8080 for the docs", [])):
                assert http.post("/ingest", json={"content": content,
                                                  "tags": tags}).status_code == 200
            asked = {"query": "which port does staging use?", "relevant_only": True}
            for harness, expected in (("example", 1), ("codex", 2)):
                found = http.post("/recall", json=asked, headers={"X-Memory-Harness": harness})
                assert found.json()["count"] == expected, (harness, found.text)
            refused = http.post("/recall", json=asked, headers={"X-Memory-Harness": "a b"})
            assert refused.status_code == 422 and "x-memory-harness" in refused.text
        run = run_hook("example", "prompt", PROMPT, hook_env(tmp_path, service.url))
        assert run.returncode == 0, run.stderr
        assert "port 8080" in run.stdout and "port 5433" not in run.stdout, run.stdout
    finally:
        service.stop()


def test_service_down_fails_open(tmp_path: Path) -> None:
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}", MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
    run = run_hook("example", "prompt", PROMPT, env)
    entry = assert_failed_open(tmp_path, run, "service down")
    assert "nothing listens" in entry["detail"]


def test_hanging_service_fails_open_within_the_budget(tmp_path: Path, hanging: _Hanging) -> None:
    env = hook_env(tmp_path, hanging.url, MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
    run = run_hook("example", "prompt", PROMPT, env)
    assert_failed_open(tmp_path, run, "timeout")
    # Wall clock against a baseline from the same run: the same hook with the service down
    # (refused at once) costs the interpreter's start-up on this machine now; hung costs that
    # plus at most the budget (twice it, for a loaded machine).
    down = run_hook("example", "prompt", PROMPT,
                    hook_env(tmp_path, f"http://127.0.0.1:{free_port()}",
                             MEMORY_HOOK_BUDGET_S=str(BUDGET_S)))
    assert down.returncode == 0
    assert run.seconds <= 2 * down.seconds + 2 * BUDGET_S, (run.seconds, down.seconds)


def test_service_error_fails_open(tmp_path: Path, failing: str) -> None:
    run = run_hook("example", "prompt", PROMPT, hook_env(tmp_path, failing))
    entry = assert_failed_open(tmp_path, run, "error")
    assert "HTTP 500: database is on fire" in entry["detail"]


@pytest.mark.parametrize("stdin", [b"{not json", b"\xff\xfe binary", b"[1, 2]", b""])
def test_bad_hook_input_fails_open(tmp_path: Path, stdin: bytes, failing: str) -> None:
    run = run_hook("example", "prompt", stdin, hook_env(tmp_path, failing))
    assert run.returncode == 0 and run.stdout == ""
    assert hook_log(tmp_path)[-1]["outcome"] in ("error", "skipped")


def test_stdin_left_open_is_cut_by_the_budget(tmp_path: Path, failing: str) -> None:
    env = hook_env(tmp_path, failing, MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
    proc = subprocess.Popen([*memory_mcp_command(), "hook", "example", "prompt"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.wait(timeout=BUDGET_S + 5)  # stdin stays open: the hook must not wait for it
        out = proc.stdout.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.stdin.close()  # type: ignore[union-attr]
    assert proc.returncode == 0 and out == b""
    assert hook_log(tmp_path)[-1]["outcome"] == "timeout"


def test_unknown_harness_or_bad_config_never_fails_the_agent(tmp_path: Path) -> None:
    run = run_hook("no-such-harness", "UserPromptSubmit", PROMPT, hook_env(tmp_path, None))
    assert run.returncode == 0 and run.stdout == ""
    assert "no harness adapter named 'no-such-harness'" in hook_log(tmp_path)[-1]["detail"]
    run = run_hook("example", "prompt", PROMPT, hook_env(tmp_path, None, MEMORY_PORT="many"))
    assert run.returncode == 0 and run.stdout == "" and "MEMORY_PORT" in run.stderr


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("harness-core"))
    yield svc
    svc.stop()


def test_autostart_starts_a_service_the_next_hook_finds(tmp_path: Path) -> None:
    """MEMORY_PLUGIN_AUTOSTART=1: a session start finding nothing starts one (port 0), and
    the hooks find it through the discovery file."""
    env = hook_env(tmp_path, None, MEMORY_PLUGIN_AUTOSTART="1", MEMORY_HOOK_BUDGET_S="20",
                   MEMORY_DEVICE="cpu")
    # Where the hook looks first: a live discovery file (this process's pid) naming a port
    # nothing listens on, so the check never reaches the default port (8765), where a
    # developer's own service may well be running.
    (tmp_path / "memory.db.server.json").write_text(json.dumps(
        {"url": f"http://127.0.0.1:{free_port()}", "pid": os.getpid()}))
    first = run_hook("example", "session-start", {"session": "s", "cwd": str(tmp_path)}, env)
    assert first.returncode == 0
    discovery = json.loads((tmp_path / "memory.db.server.json").read_text())
    try:
        assert hook_log(tmp_path)[-1]["outcome"] == "skipped"  # up, and nothing to recall yet
        stored = run_hook("example", "prompt", {"session": "s", "cwd": str(tmp_path),
                                                "prompt": "remember the cache lives in /var/c"},
                          env)
        assert stored.returncode == 0 and "stored this as a memory" in stored.stdout
        again = run_hook("example", "session-start", {"session": "s2", "cwd": str(tmp_path)}, env)
        assert again.returncode == 0
        assert json.loads((tmp_path / "memory.db.server.json").read_text())["pid"] == \
            discovery["pid"]  # the running one was found, not a second started
    finally:
        os.kill(discovery["pid"], signal.SIGTERM)
