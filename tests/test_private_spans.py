"""`<private>` across the turns of a conversation, and forgetting in a repository whose
`.semantic-memory.toml` turns capture off.

A span a user opens in one message and closes in a later one hides everything between, the
assistant's replies in it included, and the later closing tag closes it (it was dropped as
stray, keeping what preceded it in that message). Real Claude Code hook processes on a real
transcript and a real service. And the agent's `memory_forget` through the MCP proxy takes a
memory away in a repository with capture off (recall still shows it there), still confined to
the repository's project, every refusal naming the person's command."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness_support import claude_hook, hook_log, stored_contents, write_transcript
from harness_support import transcript_entry as entry
from semantic_memory.private import carry_private, strip_private, strip_private_from
from test_service_mcp import call, call_error
from test_service_mcp_proxy import proxy_session
from test_service_support import Service, start_service

NAME = "Rosalind Vexley"
PHONE = "020 7946 0311"
EMAIL = "r.vexley@example.co.uk"
CUSTOMER = "Eulalia Framptonshire"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    svc = start_service(tmp_path_factory.mktemp("spans"),
                        MEMORY_PLUGINS="bm25_porter,bm25_trigram")
    yield svc
    svc.stop()


# --- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "depth", "kept", "left_open"), [
    ("no tags", 0, "no tags", 0),
    ("no tags, inside a span", 1, "", 1),
    (f"a <private>{NAME}", 0, "a ", 1),
    (f"{PHONE}</private> b", 1, " b", 0),
    (f"{PHONE}</private> b</private> c", 1, " b c", 0),  # the second one is stray: dropped
    (f"x <private>{NAME}</private> y", 0, "x  y", 0),
    (f"{NAME}</private> x <private>{PHONE}", 1, " x ", 1),
    (f"a <private>b <private>{NAME}", 0, "a ", 2),
    (f"{NAME}</private> still {PHONE}", 2, "", 1),
    (f"{NAME}\uff1c/private\uff1e b", 1, " b", 0),  # what the tag reads as
])
def test_a_message_read_inside_a_span(text: str, depth: int, kept: str, left_open: int) -> None:
    assert strip_private_from(text, depth) == (kept, left_open)
    if depth == 0:
        assert strip_private(text) == kept


PLUGIN = Path(__file__).resolve().parents[1] / "opencode-plugin"
ESBUILD = PLUGIN / "node_modules" / ".bin" / "esbuild"


@pytest.mark.skipif(not ESBUILD.exists() or shutil.which("node") is None,
                    reason="the opencode plugin's dev dependencies are not installed (npm ci)")
def test_the_opencode_plugin_reads_a_span_as_the_hooks_do(tmp_path: Path) -> None:
    """The plugin's `stripPrivateFrom` and `carryPrivate` (src/memory.ts, bundled here from
    the sources) give what `strip_private_from` and `carry_private` give (a span's lapse
    included), so a chunk both sides flush is the same memory; and the characters it takes
    for a tag's ">" are those whose NFKC form is one."""
    bundle = tmp_path / "memory.mjs"
    subprocess.run([str(ESBUILD), "src/memory.ts", "--bundle", "--format=esm", "--platform=node",
                    f"--outfile={bundle}", "--log-level=warning"], cwd=PLUGIN, check=True,
                   timeout=120)
    ends = "".join(chr(c) for c in range(sys.maxunicode + 1)
                   if ">" in unicodedata.normalize("NFKC", chr(c)))
    rng = random.Random(7)
    pieces = ["<private>", "</private>", "<pri\u200bvate>", "\uff1c/\u0440rivate\u3000>",
              "<\u1d18RIVATE/>", "<", "/", "private", "pri", "vate", "\uff1c", "\ufe64",
              "\u0440", "\u200b", "\u3000", " ", "\n", "x", "secret", "<private reason",
              "e\u0301", "\U0001f642", *ends]
    cases = [["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))),
              rng.choice([0, 0, 1, 2, 3])] for _ in range(3000)]
    carried = [rng.choice([0, 0, 1]) for _ in cases]
    expected = [[*strip_private_from(text, depth),
                 json.loads(json.dumps(carry_private(text, (depth, more))))]
                for (text, depth), more in zip(cases, carried, strict=True)]
    assert sum(open_ > 0 for _, open_, _ in expected) > 1000
    assert sum(carry == ["", [0, 0]] and depth for (_, depth), (*_, carry)
               in zip(cases, expected, strict=True)) > 50  # lapsed spans
    script = (f"import {{ stripPrivateFrom, carryPrivate }} from {json.dumps(bundle.as_uri())};"
              "\nimport { readFileSync } from 'node:fs';\n"
              "const [cases, carried] = JSON.parse(readFileSync(0, 'utf8'));\n"
              "process.stdout.write(JSON.stringify(cases.map(([t, d], i) =>"
              " [...stripPrivateFrom(t, d), carryPrivate(t, [d, carried[i]])])));")
    done = subprocess.run(["node", "--input-type=module", "-e", script],
                          input=json.dumps([cases, carried]),
                          capture_output=True, text=True, timeout=120, check=True)
    for (text, depth), want, have in zip(cases, expected, json.loads(done.stdout), strict=True):
        assert have == want, (ascii(text), depth)


# --- hooks: a span across the turns of a flush ---------------------------------------------


def test_a_span_opened_in_one_message_and_closed_in_a_later_one_is_not_stored(
        service: Service, tmp_path: Path) -> None:
    transcript = write_transcript(tmp_path / "t.jsonl", [
        entry("user", f"Here is the customer record, keep it out of memory: "
                      f"<private>Name: {NAME}", 0),
        entry("assistant", f"Understood, {NAME}'s record is noted for this session only.", 1),
        entry("user", f"Phone {PHONE}, email {EMAIL}</private> Now please fix the invoice "
                      "bug.", 2),
        entry("assistant", "Fixed the invoice rounding bug in billing.py.", 3)])
    claude_hook(tmp_path, service.url, "PreCompact", transcript, "p-spans", trigger="manual")
    assert hook_log(tmp_path)[-1]["outcome"] == "stored", hook_log(tmp_path)[-1]
    contents = stored_contents(service, "p-spans")
    text = "\n".join(contents)
    assert "invoice" in text, contents  # what follows the closing tag is kept
    for private in (NAME, "Rosalind", PHONE, EMAIL, "Vexley"):
        assert private not in text, contents


def test_a_span_open_before_the_last_compaction_hides_the_turns_after_it(
        service: Service, tmp_path: Path) -> None:
    """The turns since the transcript's last compaction marker are read inside the spans the
    turns before it left open."""
    transcript = write_transcript(tmp_path / "t.jsonl", [
        entry("user", "Deploy notes follow <private>the vault token belongs to", 0),
        entry("assistant", "Noted.", 1),
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
         "sessionId": "cc"},
        entry("user", f"{NAME}, reach her on {PHONE}", 2),
        entry("assistant", f"I will call {NAME} about the vault.", 3),
        entry("user", "done</private> Which port does the staging proxy use?", 4),
        entry("assistant", "The staging proxy listens on port 8443.", 5)])
    claude_hook(tmp_path, service.url, "PreCompact", transcript, "p-marker",
                session_id="cc2", trigger="auto")
    contents = stored_contents(service, "p-marker")
    text = "\n".join(contents)
    assert "8443" in text, contents
    assert NAME not in text and PHONE not in text and "done" not in text, contents


def test_the_recall_query_of_a_prompt_inside_a_span_holds_no_private_text(
        service: Service, tmp_path: Path) -> None:
    """A prompt that closes a span an earlier message opened recalls for what follows the
    closing tag only; the query the service records holds none of what precedes it."""
    with service.client() as client:
        client.post("/ingest", json={"content": "The invoice rounding bug lives in billing.py",
                                     "project": "p-query-span"})
    prompt = f"Phone {PHONE}, email {EMAIL}</private> where is the invoice rounding bug?"
    transcript = write_transcript(tmp_path / "t.jsonl", [
        entry("user", f"Customer record: <private>Name: {NAME}", 0),
        entry("assistant", "Understood.", 1)])
    for session, path in (  # the transcript without the prompt, then with it (written already)
            ("q1", transcript),
            ("q2", write_transcript(tmp_path / "t2.jsonl", [
                *map(json.loads, transcript.read_text().splitlines()), entry("user", prompt, 2)]))):
        done = claude_hook(tmp_path, service.url, "UserPromptSubmit", path, "p-query-span",
                           session_id=session, prompt=prompt)
        assert "billing.py" in done.stdout, (done.stdout, hook_log(tmp_path)[-1])
    with service.client() as client:
        queries = [i["query"] for i in client.get(
            "/api/injections", params={"project": "p-query-span"}).json()["items"]]
    assert queries == ["where is the invoice rounding bug?"] * 2, queries


# --- memory_forget in a repository with capture off -----------------------------------------


def repository(root: Path, remote: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n')
    (root / "src").mkdir()
    return root / "src"


@pytest.mark.parametrize("config", ["[capture]\nenabled = false\n", "[capure]\nenabled = false\n"])
def test_forget_works_in_a_repository_with_capture_off(service: Service, tmp_path: Path,
                                                       config: str) -> None:
    """Capture off (or a malformed file, which counts as off) stops the agent's writes, not
    its forgets: recall shows the memory there, so forgetting must take it away. The project
    confinement stays, and its refusal names `memory-mcp forget UID`."""
    cwd = repository(tmp_path / "repo", "git@github.com:acme/off23.git")
    with service.client() as client:
        uid = client.post("/ingest", json={
            "content": f"Customer {CUSTOMER} phone 555 0188 ({config[:9]})",
            "project": "github.com/acme/off23"}).json()["uid"]
        other = client.post("/ingest", json={
            "content": f"Customer {CUSTOMER} of another project ({config[:9]})",
            "project": "github.com/acme/elsewhere"}).json()["uid"]
    (cwd.parent / ".semantic-memory.toml").write_text(config)

    async def main() -> None:
        async with proxy_session(tmp_path / "db", service.url, cwd=cwd) as session:
            found = await call(session, "memory_recall", {"query": f"{CUSTOMER} phone"})
            assert uid in [item["uid"] for item in found["items"]]
            message = await call_error(session, "memory_forget", {"uid": other})
            assert "not forgotten: this server runs in the project" in message, message
            assert f"`memory-mcp forget {other}`" in message, message
            forgotten = await call(session, "memory_forget", {"uid": uid})
            assert forgotten["forgotten"] == uid
            message = await call_error(session, "memory_store", {"content": "still off"})
            assert "capture is off for this repository" in message, message

    anyio.run(main)
    with service.client() as client:
        assert client.get(f"/api/memories/{uid}").json().get("forgotten")
        assert not client.get(f"/api/memories/{other}").json().get("forgotten")
