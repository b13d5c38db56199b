"""The secret corpora through every write path, on both stores.

`tests/corpora/secrets.jsonl`: 142 credential formats in 7 classes (vendor tokens with fixed
prefixes, CLI flags and positional arguments, URLs and connection strings, prose, auth headers,
config files, vault-style tables), each with the substrings that must never reach the db
(`secrets`) and those that must survive around them (`keep`); the last 40 (bare provider
tokens, values cut by a line wrap or a concatenation, `.env` values holding `;` or `,`, base64
of a secret, `echo $TOKEN` output) were added for a security QA pass, 13 of them kept out
before its rules. `secrets_heldout.jsonl`: 35 more, written after the rules and run once
untuned: 20/25 (the five CLI misses led to the user-flag + password-flag, positional and
`config set` rules), then the QA pass's `h2-` rows 9/10 (the miss, a value printed by `echo
$API_SECRET`, led to the echo/printenv rule). `secrets_benign.jsonl`: 71 developer notes that
look close (hashes, UUIDs, commit SHAs, base64 images and text, placeholders, templates, docs
about tokens, vendors' documented `…EXAMPLE` keys, `"tokenType": "Bearer"`): stored unchanged. The bodies are seeded random
fakes, written for this project (not copies of any issue's examples).

Paths: `redact` itself; `MemoryEngine.ingest` (every field, both stores); REST `/ingest` and
MCP `memory_store` on a real service (both stores); `memory-mcp import`; the hook write spool
(kept as given on disk, redacted when the service replays it; both stores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from semantic_memory import spool
from semantic_memory.config import Settings
from semantic_memory.safety import redaction
from semantic_memory.safety.redaction import redact, ruleset_info
from semantic_memory.limits import MAX_PROJECT_CHARS, MAX_TAG_CHARS
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from test_service_support import Service, http_session, service_env, start_service

CORPORA = Path(__file__).parent / "corpora"
SECRETS: list[dict[str, Any]] = [
    json.loads(line) for name in ("secrets.jsonl", "secrets_heldout.jsonl")
    for line in (CORPORA / name).read_text().splitlines() if line]
BENIGN: list[str] = [
    json.loads(line)["text"]
    for line in (CORPORA / "secrets_benign.jsonl").read_text().splitlines() if line]
TOKEN = "corpus-test-token"
#: The goal: ≥ 95% of the formats kept out, ≤ 1 in 20 benign notes refused or altered.
MIN_KEPT_OUT, MAX_BENIGN_TOUCHED = 0.95, 1 / 20


def leaked(row: dict[str, Any], stored: str) -> list[str]:
    return [s for s in row["secrets"] if s in stored]


def kept_out_share(stored: dict[str, str]) -> tuple[float, list[str]]:
    """Share of formats none of whose secrets is in the stored text for its id (a refused
    memory stores nothing); and the ids that leaked."""
    leaks = [row["id"] for row in SECRETS if leaked(row, stored.get(row["id"], ""))]
    return 1 - len(leaks) / len(SECRETS), leaks


def test_the_corpora_are_big_and_varied_enough() -> None:
    assert len(SECRETS) >= 60 and len(BENIGN) >= 40
    assert len({row["id"] for row in SECRETS}) == len(SECRETS)
    assert len({row["class"] for row in SECRETS}) >= 7
    assert all(row["secrets"] and all(s in row["text"] for s in row["secrets"] + row["keep"])
               for row in SECRETS)


@pytest.mark.parametrize("row", SECRETS, ids=[row["id"] for row in SECRETS])
def test_each_format_is_redacted_in_place(row: dict[str, Any]) -> None:
    out = redact(row["text"])
    assert not leaked(row, out), out
    assert all(k in out for k in row["keep"]), out  # only the secret part goes
    assert redact(out) == out  # a second pass (replay, migrate) changes nothing


def test_benign_notes_are_left_alone() -> None:
    touched = [text for text in BENIGN if redact(text) != text]
    assert len(touched) <= MAX_BENIGN_TOUCHED * len(BENIGN), touched


def test_the_rules_alone_cover_every_context_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the library (a platform without its wheel) only vendor tokens are at risk."""
    monkeypatch.setattr(redaction, "_library", lambda: None)
    missed = [row for row in SECRETS if leaked(row, redact(row["text"]))]
    assert {row["class"] for row in missed} <= {"vendor"}, [row["id"] for row in missed]
    assert len(missed) < len(SECRETS) / 4


def test_the_library_is_loaded_and_earns_its_place() -> None:
    info = ruleset_info()
    assert info["name"] == "betterleaks" and info["status"] == "loaded" and info["version"]
    found = [row for row in SECRETS if redaction._library_spans(row["text"])]
    assert len(found) >= len(SECRETS) / 3  # the long tail of provider formats


def test_a_memory_that_was_only_a_secret_is_refused(engine: MemoryEngine) -> None:
    token = next(row for row in SECRETS if row["id"] == "anthropic-admin")["text"]
    [result] = engine.ingest([NewMemory(token)])
    assert result.status == "rejected" and "redacted secret" in result.reason
    [result] = engine.ingest([NewMemory(f"the staging deploy key is {token}")])
    assert result.status == "new"


def stored_by_id(memories: list[Any]) -> dict[str, str]:
    """Each memory's fields as one text, keyed by the corpus id its `id:` tag names."""
    out: dict[str, str] = {}
    for m in memories:
        ident = next((t[3:] for t in m.tags if t.startswith("id:")), None)
        if ident is not None:
            out[ident] = "\n".join([m.content, m.project or "", *m.tags])
    return out


def corpus_memories() -> list[NewMemory]:
    """Each format as content; the short ones also as a tag, and as project when on one line
    (a project name must be)."""
    items = []
    for row in SECRETS:
        short = row["text"] if len(row["text"]) <= min(MAX_PROJECT_CHARS, MAX_TAG_CHARS) else None
        one_line = short if short and "\n" not in short and "\t" not in short else None
        items.append(NewMemory(f"note {row['id']}: {row['text']}", project=one_line,
                               tags=[f"id:{row['id']}", *([short] if short else [])]))
    return items


@pytest.mark.both_stores
def test_ingest_keeps_every_format_out_of_every_field(engine: MemoryEngine) -> None:
    results = engine.ingest(corpus_memories(), batch_is_session=False)
    assert all(r.status in ("new", "rejected") for r in results)
    share, leaks = kept_out_share(stored_by_id(engine.list(limit=1000)))
    assert share >= MIN_KEPT_OUT, leaks
    assert sum(r.status == "new" for r in results) >= 0.9 * len(SECRETS)  # redacted, not lost


@pytest.mark.both_stores
def test_benign_notes_are_stored_unchanged(engine: MemoryEngine) -> None:
    results = engine.ingest([NewMemory(text) for text in BENIGN], batch_is_session=False)
    stored = {m.content for m in engine.list(limit=1000)}
    touched = [text for text, r in zip(BENIGN, results) if r.status != "new"
               or text not in stored]
    assert len(touched) <= MAX_BENIGN_TOUCHED * len(BENIGN), touched


# --- a real service: REST /ingest and MCP memory_store ----------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Service, Settings]]:
    db_url = ""
    if request.param == "postgresql":
        import pg

        db_url = pg.new_database()
    extra = {"MEMORY_DB_URL": db_url} if db_url else {}
    svc = start_service(tmp_path / "svc", MEMORY_TOKEN=TOKEN, **extra)
    yield svc, Settings(db_path=str(tmp_path / "svc" / "memory.db"), db_url=db_url,
                        device="cpu")
    if svc.proc.poll() is None:  # the test stops it to read the store itself
        svc.stop()


def test_rest_and_mcp_keep_every_format_out(served: tuple[Service, Settings]) -> None:
    svc, settings = served
    rest_items = [{"content": f"rest {row['id']}: {row['text']}", "tags": [f"id:rest-{row['id']}"]}
                  for row in SECRETS]
    with svc.client(TOKEN) as client:
        answer = client.post("/ingest", json={"items": rest_items + [
            {"content": text, "tags": ["benign"]} for text in BENIGN]})
        assert answer.status_code == 200, answer.text

    async def store_all() -> None:
        async with http_session(svc.mcp_url, TOKEN) as session:
            for row in SECRETS:
                result = await session.call_tool("memory_store", {
                    "content": f"mcp {row['id']}: {row['text']}", "tags": [f"id:mcp-{row['id']}"]})
                assert not result.is_error or "redacted secret" in str(result.content), result

    anyio.run(store_all)
    svc.stop()
    engine = MemoryEngine(settings)
    try:
        memories = engine.list(limit=1000)
    finally:
        engine.close()
    by_id = stored_by_id(memories)
    for path in ("rest", "mcp"):
        share, leaks = kept_out_share({k[len(path) + 1:]: v for k, v in by_id.items()
                                       if k.startswith(path + "-")})
        assert share >= MIN_KEPT_OUT, (path, leaks)
    benign_stored = {m.content for m in memories if "benign" in m.tags}
    touched = [text for text in BENIGN if text not in benign_stored]
    assert len(touched) <= MAX_BENIGN_TOUCHED * len(BENIGN), touched


# --- memory-mcp import and the hook write spool -----------------------------------------------

def test_import_keeps_every_format_out(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"content": f"import {row['id']}: {row['text']}",
                                "tags": [f"id:{row['id']}"]}) + "\n" for row in SECRETS)
    env = service_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "semantic_memory", "import", "-"], input=lines,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "memory.db"), device="cpu"))
    try:
        share, leaks = kept_out_share(stored_by_id(engine.list(limit=1000)))
    finally:
        engine.close()
    assert share >= MIN_KEPT_OUT, leaks


def wait_for(predicate: Any, timeout: float = 60) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def stored_after_replay(svc: Service, settings: Settings) -> list[Any]:
    """Wait for the service to drain its spool, stop it, and read the store."""
    assert wait_for(lambda: spool.depth(svc.tmp / "spool").count == 0)
    svc.stop()
    engine = MemoryEngine(settings)
    try:
        return engine.list(limit=1000)
    finally:
        engine.close()


def test_spooled_writes_keep_every_format_out(served: tuple[Service, Settings]) -> None:
    """What a hook spools while the service is away is kept as given in a 0600 file, like the
    harness's own transcript; the service's filters redact it when it replays the write."""
    svc, settings = served
    items = [{"content": f"spool {row['id']}: {row['text']}", "tags": [f"id:{row['id']}"]}
             for row in SECRETS]
    spool.append(svc.tmp / "spool", "/ingest", {"items": items}, harness="test", event="t")
    share, leaks = kept_out_share(stored_by_id(stored_after_replay(svc, settings)))
    assert share >= MIN_KEPT_OUT, leaks


def test_a_real_hook_spools_and_the_replay_keeps_every_format_out(tmp_path: Path) -> None:
    """A hook process whose service is down spools its write (ten formats per remembered
    prompt, the example harness's `remember that …`); the service started later replays it."""
    import socket

    from harness_support import hook_env, run_hook

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env = hook_env(tmp_path, dead, MEMORY_HOOK_BUDGET_S="1.0")
    rows = [row for row in SECRETS if "\n" not in row["text"]][:30]
    for start in range(0, len(rows), 10):
        fact = "; ".join(row["text"] for row in rows[start:start + 10])
        done = run_hook("example", "prompt", {"session": "s1", "cwd": "/tmp",
                                              "prompt": f"remember that {fact}"}, env)
        assert done.returncode == 0, done.stderr
    assert len(spool.pending(tmp_path / "spool")) == 3
    svc = start_service(tmp_path)  # the hooks' db folder: it drains their spool
    try:
        memories = stored_after_replay(
            svc, Settings(db_path=str(tmp_path / "memory.db"), device="cpu"))
    finally:
        if svc.proc.poll() is None:
            svc.stop()
    text = "\n".join(m.content for m in memories)
    assert len(memories) == 3 and "[REDACTED:" in text
    assert not [row["id"] for row in rows if leaked(row, text)]
