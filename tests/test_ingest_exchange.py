"""/ingest's exchange items (`{"exchange": {"user", "reply"}, ...}`): the service redacts the
whole exchange, then cuts it as a hook's flush does (transcript.py), so that a secret the cut
would split (a private key's lines) passes as no half. The opencode plugin sends long exchanges
this way: it cannot run the service's secret rules before it cuts."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from semantic_memory import spool
from semantic_memory.config import Settings
from semantic_memory.harness.transcript import Turn, chunk_turns, flush_chunks
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
    # The memories are the hooks' own: their flush of the same turns stores nothing new.
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
    """The service replays its spool through /ingest's code: an exchange the plugin spooled
    while the service was down is redacted and cut when it lands."""
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
