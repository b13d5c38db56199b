"""/ingest's exchange items (`{"exchange": {"user", "reply"}, ...}`): the service redacts the
whole exchange, then cuts it as a flush would (transcript.py), so that a secret the cut would
split (a private key's lines, "the password is" | its value) passes as no half. The Python
hooks and the opencode plugin send every exchange a flush would cut this way (`flush_items`,
transcript.ts `flushItems`): neither runs the service's secret rules before it cuts. Here too:
real hooks flushing such exchanges into a real service, live, spooled and against a service
older than exchange items."""

from __future__ import annotations

import base64
import json
import random
import shutil
import string
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from harness_support import closed_port, hook_env, hook_log, run_hook, run_memory_mcp
from semantic_memory import spool
from semantic_memory.config import Settings
from semantic_memory.harness.transcript import (
    CHUNK_CHARS,
    Turn,
    chunk_turns,
    exchange_chunks,
    flush_chunks,
    flush_items,
)
from semantic_memory.models import RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety.redaction import redact
from semantic_memory.service import fastparse, schemas
from semantic_memory.service.errors import ApiError
from semantic_memory.service.spool_replay import drain
from test_service_support import Service, start_service

_rng = random.Random(7)
KEY_LINES = ["".join(_rng.choice(string.ascii_letters + string.digits + "+/") for _ in range(64))
             for _ in range(25)]
KEY = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *KEY_LINES, "-----END RSA PRIVATE KEY-----"])
USER = "How do I set up the deploy server for the nightly job?"
REPLY = ("Here is the setup. " + " ".join(["The deploy server runs the nightly job at two."] * 18)
         + f"\n\nUse this key:\n{KEY}\n\n"
         + " ".join(["Then restart the worker pool and watch the queue drain."] * 30))
FIELDS = {"kind": "note", "source": "compaction", "project": "exchange",
          "tags": ["harness:test"], "session": "test:exchange"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("exchange"))
    yield svc
    svc.stop()


@pytest.fixture
def http(service: Service) -> Iterator[httpx2.Client]:
    with service.client() as client:
        yield client


def ingest(http: httpx2.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/ingest", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_an_exchange_is_redacted_whole_then_cut_as_the_hooks_cut_it(http: httpx2.Client) -> None:
    turns = [Turn("user", USER), Turn("assistant", REPLY)]
    cut = chunk_turns(turns)  # cut before any redaction: the key's lines fall into two pieces
    assert any("BEGIN RSA" in c and "END RSA" not in c for c in cut)
    hooks = flush_chunks(turns, redact=redact)[0]
    assert len(hooks) > 1  # still cut after the redaction

    answer = ingest(http, {"items": [{"exchange": {"user": USER, "reply": REPLY}, **FIELDS},
                                     {"content": "The nightly job logs to /var/log/nightly.log",
                                      **FIELDS}]})
    assert len(answer["results"]) == 2  # one result per request item
    exchange = answer["results"][0]
    assert exchange["status"] == "new" and len(exchange["pieces"]) == len(hooks)
    assert (answer["new"], answer["duplicate"], answer["rejected"]) == (len(hooks) + 1, 0, 0)
    stored = [http.get(f"/api/memories/{piece['uid']}").json() for piece in exchange["pieces"]]
    for memory in stored:
        assert memory["project"] == "exchange" and memory["kind"] == "note"
        assert memory["session"] == "test:exchange" and "harness:test" in memory["tags"]
        for line in [*KEY_LINES, "BEGIN RSA PRIVATE KEY", "END RSA PRIVATE KEY"]:
            assert line not in memory["content"]
    # The memories are a flush's own (`flush_chunks`, cut after the service's redaction):
    # the same memories sent one by one store nothing new.
    again = ingest(http, {"items": [{"content": chunk, **FIELDS} for chunk in hooks]})
    assert again["duplicate"] == len(hooks)
    assert [r["uid"] for r in again["results"]] == [p["uid"] for p in exchange["pieces"]]


def test_a_bad_exchange_item_costs_only_itself(http: httpx2.Client) -> None:
    answer = ingest(http, {"items": [
        {"exchange": {"user": USER}, **FIELDS},
        {"exchange": {"user": "a", "reply": "b"}, **FIELDS},
        {"exchange": {"user": USER, "reply": REPLY}, "content": "both", **FIELDS},
        {"content": "The nightly job retries three times before it pages", **FIELDS}]})
    statuses = [r["status"] for r in answer["results"]]
    assert statuses == ["rejected", "rejected", "rejected", "new"]
    reasons = [r["reason"] for r in answer["results"][:3]]
    assert reasons[0].startswith("items[0].exchange.reply")
    assert reasons[1].startswith("items[1].exchange: nothing of at least")
    assert reasons[2].startswith("items[2].exchange: an item holds content or an exchange")
    single = http.post("/ingest", json={"exchange": {"user": USER, "reply": REPLY}})
    assert single.status_code == 422 and "goes in a batch" in single.json()["error"]


BAD_SHAPES = [
    {"exchange": "User: hi"},
    {"exchange": None},
    {"exchange": {"user": "hi"}},
    {"exchange": {"reply": "hi"}},
    {"exchange": {"user": "hi", "reply": 5}},
    {"exchange": {"user": ["hi"], "reply": "yo"}},
    {"exchange": {"user": "hi", "reply": "yo", "extra": "x"}},
    {"exchange": {"user": "hi", "reply": "yo"}, "replaces": "abc"},
    {"exchange": {"user": "hi", "reply": "yo"}, "session": ""},
    {"exchange": {"user": "hi", "reply": "yo"}, "tags": ["t" * 65]},
    {"exchange": {"user": "hi", "reply": "yo"}, "kind": 1},
    {"kind": "note"},
]


@pytest.mark.parametrize("body", BAD_SHAPES)
def test_both_parsers_refuse_a_bad_exchange_item(body: dict[str, Any]) -> None:
    assert fastparse.parse("IngestExchange", body) is None
    with pytest.raises(ApiError) as refused:
        schemas.parse_model(schemas.IngestExchange, body, "items[0].")
    assert refused.value.status == 422 and refused.value.message.startswith("items[0].")


def test_both_parsers_read_a_good_exchange_item_alike() -> None:
    body = {"exchange": {"user": "hi", "reply": "yo"}, **FIELDS, "created_at": 1_764_000_000}
    fast = fastparse.parse("IngestExchange", body)
    model = schemas.parse_model(schemas.IngestExchange, body)
    assert fast is not None
    assert set(vars(fast)) == set(type(model).model_fields)
    assert vars(fast.exchange) == model.exchange.model_dump()
    for name in vars(fast):
        if name != "exchange":
            assert getattr(fast, name) == getattr(model, name), name


def test_a_spooled_exchange_replays_as_the_same_memories(tmp_path: Path) -> None:
    """The service replays its spool through /ingest's code: an exchange a hook or the plugin
    spooled while the service was down is redacted and cut when it lands."""
    settings = Settings.from_env({"MEMORY_DB_PATH": str(tmp_path / "memory.db")})
    spool.append(settings.spool_path, "/ingest",
                 {"items": [{"exchange": {"user": USER, "reply": REPLY}, **FIELDS}]})
    engine = MemoryEngine(settings)
    try:
        done = drain(engine, settings)
        stored = [m.content for m in engine.list(RecallFilters(project="exchange"), 50, 0)]
    finally:
        engine.close()
    assert (done.sent, done.rejected) == (1, 0)
    hooks = flush_chunks([Turn("user", USER), Turn("assistant", REPLY)], redact=redact)[0]
    assert sorted(stored) == sorted(hooks)


# --- hooks that flush long exchanges ---------------------------------------------------------

QUESTION, SAID, PASSWORD = "and the admin account?", "the admin password is", "Hunter2Secret99"


def secret_history() -> tuple[list[dict[str, str]], list[str]]:
    """A session whose long replies hold secrets where a flush cuts them: a private key longer
    than a chunk, and a password whose first piece ends with the words that make it one; then
    a short exchange. (The history, and the secrets: the key's lines, the password.)"""
    body = base64.b64encode(random.Random(5).randbytes(1190)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    key = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *lines, "-----END RSA PRIVATE KEY-----"])
    # The first piece ends at the space after SAID (transcript.split_text cuts at a word).
    limit = CHUNK_CHARS - len(f"(User asked: {QUESTION})\n")
    n, r = divmod(limit - len(f"User: {QUESTION}\nAssistant: ") - len(SAID) - 1, 5)
    history = [
        {"role": "user", "text": "show me the deploy key file"},
        {"role": "assistant", "text": f"Here is the file you asked for:\n\n{key}\n\nLet me know."},
        {"role": "user", "text": QUESTION},
        {"role": "assistant", "text": "word " * n + "z" * r + f" {SAID} {PASSWORD} and more "
                                      "text " + "x " * 300 + "end."},
        {"role": "user", "text": "Which port does the staging database listen on?"},
        {"role": "assistant", "text": "The staging database listens on port 6543."}]
    return history, [*lines, PASSWORD]


def turns_of(history: list[dict[str, str]]) -> list[Turn]:
    return [Turn(turn["role"], turn["text"]) for turn in history]


def stored(service: Service, project: str) -> list[str]:
    with service.client() as client:
        return [m["content"] for m in client.get("/api/memories", params={
            "project": project, "limit": 200}).json()["items"]]


class _Front(ThreadingHTTPServer):
    """An HTTP front for a test service that keeps each /ingest body a hook sends. With `old`
    it answers /ingest as a service from before exchange items (1b8be7c, before cc1b14b):
    each exchange item refused in a 200 with pydantic's words for an item without content,
    the other items stored by the service behind it."""

    def __init__(self, target: str, old: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), _FrontHandler)
        self.target, self.old = urlsplit(target), old
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def send(self, method: str, path: str, data: bytes | None,
             headers: dict[str, str]) -> tuple[int, bytes]:
        conn = HTTPConnection(self.target.hostname, self.target.port, timeout=60)
        try:
            conn.request(method, path, body=data, headers=headers)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def old_ingest(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        items = body["items"]
        rest = [item for item in items if "exchange" not in item]
        taken: Iterator[dict[str, Any]] = iter([])
        counts = {"new": 0, "duplicate": 0, "rejected": 0}
        if rest:
            status, data = self.send("POST", "/ingest",
                                     json.dumps({**body, "items": rest}).encode(), headers)
            if status != 200:
                return status, data
            answer = json.loads(data)
            taken, counts = iter(answer["results"]), {k: answer[k] for k in counts}
        results = []
        for i, item in enumerate(items):
            if "exchange" in item:
                results.append({"status": "rejected", "duplicate": False,
                                "reason": f"items[{i}].content: Field required"})
                counts["rejected"] += 1
            else:
                results.append(next(taken))
        return 200, json.dumps({"results": results, **counts}).encode()


class _FrontHandler(BaseHTTPRequestHandler):
    server: _Front

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        if self.command == "POST" and self.path == "/ingest" and data:
            body = json.loads(data)
            self.server.bodies.append(body)
            if self.server.old and "items" in body:
                self.answer(*self.server.old_ingest(body, headers))
                return
        self.answer(*self.server.send(self.command, self.path, data, headers))

    do_GET = do_POST

    def answer(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def front(target: str, old: bool = False) -> Iterator[_Front]:
    server = _Front(target, old)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def compact(tmp_path: Path, url: str, project: str, history: list[dict[str, str]],
            budget_s: str = "10") -> dict[str, Any]:
    """A real hook's flush of `history` (the example harness); its hook-log line."""
    env = hook_env(tmp_path, url, MEMORY_HOOK_BUDGET_S=budget_s, MEMORY_PROJECT=project)
    payload = {"session": project, "cwd": str(tmp_path), "history": history}
    assert run_hook("example", "compact", payload, env).returncode == 0
    return hook_log(tmp_path)[-1]


def test_a_hooks_flush_sends_a_long_exchange_whole_and_the_service_cuts_it(
        service: Service, tmp_path: Path) -> None:
    """Each exchange a flush would cut goes as one item, which the service redacts before it
    cuts it: neither the key nor the password is stored in halves that each pass. A short
    exchange is its memory. The hook log counts the pieces of the cut; a second compaction
    of the same turns sends the same items and refreshes the same memories."""
    history, secrets = secret_history()
    turns = turns_of(history)
    cut = chunk_turns(turns)  # before any redaction: both secrets fall across a cut
    assert any("BEGIN RSA" in c and "END RSA" not in c for c in cut)
    assert any(c.endswith(SAID) for c in cut)
    assert any(c.startswith(f"(User asked: {QUESTION})\n{PASSWORD}") for c in cut)
    expected = flush_chunks(turns, redact=redact)[0]  # what the service's cut stores
    with front(service.url) as proxy:
        logged = [compact(tmp_path, proxy.url, "flush-whole", history) for _ in range(2)]
    first, again = proxy.bodies
    assert again == first  # deterministic
    items = first["items"]
    assert [item.get("exchange") for item in items[:2]] == [
        {"user": history[0]["text"], "reply": history[1]["text"]},
        {"user": history[2]["text"], "reply": history[3]["text"]}]
    assert "content" not in items[0] and "content" not in items[1]
    assert items[2]["content"] == f"User: {history[4]['text']}\nAssistant: {history[5]['text']}"
    for item in items:
        assert (item["kind"], item["source"], item["project"]) == ("note", "compaction",
                                                                    "flush-whole")
        assert "harness:example" in item["tags"] and item["session"] == "example:flush-whole"
    assert expected == [*exchange_chunks(history[0]["text"], history[1]["text"], redact),
                        *exchange_chunks(history[2]["text"], history[3]["text"], redact),
                        items[2]["content"]]
    memories = stored(service, "flush-whole")
    assert sorted(memories) == sorted(expected)
    assert not [s for s in secrets if any(s in m for m in memories)], memories
    assert sum("[REDACTED:" in m for m in memories) >= 2, memories
    assert [(e["outcome"], e["detail"]) for e in logged] == [
        ("stored", f"{len(cut)} chunks: {len(expected)} new, 0 already stored, 0 refused"),
        ("stored", f"{len(cut)} chunks: 0 new, {len(expected)} already stored, 0 refused")]


def test_a_flush_spooled_while_the_service_is_down_replays_once(tmp_path: Path) -> None:
    """The spool keeps the exchange items as the hook sent them; the service that comes back
    redacts and cuts each as it replays it, exactly once: the memories a live flush stores,
    which the same flush made live again finds already stored."""
    history, secrets = secret_history()
    turns = turns_of(history)
    n = len(chunk_turns(turns))
    entry = compact(tmp_path, f"http://127.0.0.1:{closed_port()}", "flush-spooled", history,
                    budget_s="2")
    assert entry["outcome"] == "spooled", entry
    assert entry["detail"].startswith(
        f"{n} chunks: 0 new, 0 already stored, 0 refused, {n} spooled ("), entry
    [file] = spool.pending(tmp_path / "spool")
    items = spool.read(file)["body"]["items"]
    assert [sorted(set(item) & {"content", "exchange"}) for item in items] == [
        ["exchange"], ["exchange"], ["content"]]
    service = start_service(tmp_path)  # the same db: it drains the spool as it starts
    try:
        deadline = time.monotonic() + 30
        while spool.depth(tmp_path / "spool").count and time.monotonic() < deadline:
            time.sleep(0.1)
        memories = stored(service, "flush-spooled")
        expected = flush_chunks(turns, redact=redact)[0]
        assert sorted(memories) == sorted(expected)
        assert not [s for s in secrets if any(s in m for m in memories)], memories
        again = compact(tmp_path, service.url, "flush-spooled", history)
        assert (again["outcome"], again["detail"]) == (
            "stored", f"{n} chunks: 0 new, {len(expected)} already stored, 0 refused")
        assert sorted(stored(service, "flush-spooled")) == sorted(expected)
        assert not spool.pending(tmp_path / "spool")
    finally:
        service.stop()


def test_exchange_items_a_service_older_than_them_refuses_are_kept(service: Service,
                                                                    tmp_path: Path) -> None:
    """A service from before exchange items refuses each in a 200 and stores the rest: the
    hook keeps the refused items in spool/rejected/ with the reason and its log line says so.
    Nothing is lost: moved back into the spool once the service knows them, they replay to
    the memories a live flush stores."""
    history, secrets = secret_history()
    turns = turns_of(history)
    n = len(chunk_turns(turns))
    with front(service.url, old=True) as old:
        entry = compact(tmp_path, old.url, "flush-old", history)
    assert (entry["outcome"], entry["detail"]) == ("stored", (
        f"{n} chunks: 1 new, 0 already stored, {n - 1} refused (2 exchanges kept in "
        "spool/rejected/: items[0].content: Field required)"))
    [kept] = sorted((tmp_path / "spool" / "rejected").glob("*.json"))
    record = json.loads(kept.read_text())
    assert [item["exchange"] for item in record["body"]["items"]] == [
        {"user": history[0]["text"], "reply": history[1]["text"]},
        {"user": history[2]["text"], "reply": history[3]["text"]}]
    assert record["rejected"] == ("items[0].content: Field required; "
                                  "items[1].content: Field required")
    assert stored(service, "flush-old") == [
        f"User: {history[4]['text']}\nAssistant: {history[5]['text']}"]
    shutil.move(kept, tmp_path / "spool" / kept.name)  # the service is upgraded
    env = hook_env(tmp_path, service.url)
    assert run_memory_mcp(env, "spool", "replay").startswith("replayed 1 write(s)")
    memories = stored(service, "flush-old")
    assert sorted(memories) == sorted(flush_chunks(turns, redact=redact)[0])
    assert not [s for s in secrets if any(s in m for m in memories)], memories


def test_the_hooks_send_what_the_opencode_plugin_sends() -> None:
    """Item for item, `flush_items` is the plugin's transcript.ts `flushItems` (run on the
    shipped bundle by tests/test_opencode_plugin.py's `node_eval`), over random
    conversations, with and without a `newest` limit: both send the same exchanges whole and
    the same memories, so each refreshes what the other stored."""
    from test_opencode_plugin import node_eval, random_text

    rng = random.Random(20261207)
    conversations = [turns_of(secret_history()[0])]
    conversations += [[Turn(rng.choice(["user", "assistant"]), random_text(rng))
                       for _ in range(rng.randint(1, 8))] for _ in range(150)]
    cases = [(turns, rng.choice([None, None, 1, 2, 3, 5, 8])) for turns in conversations]
    want = [flush_items(turns, newest) for turns, newest in cases]
    assert sum("exchange" in item for items, _ in want for item, _ in items) > 10
    assert sum(left_out > 0 for _, left_out in want) > 10  # the limit left memories out
    got = node_eval("flushItems", [[[{"role": t.role, "text": t.text} for t in turns],
                                    *([] if newest is None else [newest])]
                                   for turns, newest in cases])
    for (turns, newest), have, (items, _) in zip(cases, got, want, strict=True):
        assert have == [[item, n] for item, n in items], (turns, newest)
