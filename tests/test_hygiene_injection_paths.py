"""Our own injection corpora (tests/corpora) through every write path that takes untrusted text.

`injections.jsonl` holds prompt injections by class (forged turns and tool calls, hidden
markdown, spaced / dotted / reversed / base64 / accented text, plain text addressed to the
agent, eight other languages, commands aimed at the agent); `benign_injection.jsonl` holds
developer notes and tool captures that only mention such things. Each entry's `set` says how it
was written: `tuned` alongside the rules, `held-out-1` / `-2` / `-3` / `-4` / `-5` after them
and measured before any rule was changed for them (docs/security.md has those first figures;
`-5`, forged authority and urged orders, is also held to its own bar in
test_injection_forged_authority.py); `qa-1`
and `qa-2` entries restate, in our own words, what a QA pass found stored or refused wrongly, and
were added with the rules that fixed them. Every path must refuse at least 80% of the injections and at most 1
in 20 benign notes; the filter itself is held to more.

Paths: `looks_like_injection`; `MemoryEngine.ingest` with source `tool` on both stores (and
source `chat`, which is not checked); a real service's REST `/ingest` (source `tool`) and MCP
`memory_store` (source `tool`); and the Claude Code `PostToolUse` capture hook
(`memory-mcp hook claude-code PostToolUse`) against that service.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness_support import hook_env, run_hook
from semantic_memory.default_plugins.hygiene import looks_like_injection
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from test_service_support import Service, http_session, start_service

CORPORA = Path(__file__).parent / "corpora"
MIN_REFUSED = 0.80  # of injections, on each path
MAX_BENIGN_REFUSED = 1 / 20  # of benign notes, on each path


def _load(name: str) -> list[dict[str, str]]:
    lines = (CORPORA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


INJECTIONS = _load("injections.jsonl")
BENIGN = _load("benign_injection.jsonl")


def check_rates(path: str, refused_injections: list[bool], refused_benign: list[bool],
                minimum: float = MIN_REFUSED) -> None:
    """Hold `path` to the bar; a failure names what slipped through or was refused."""
    caught = sum(refused_injections) / len(refused_injections)
    wrongly = sum(refused_benign) / len(refused_benign)
    missed = [i["id"] for i, r in zip(INJECTIONS, refused_injections, strict=True) if not r]
    refused = [b["text"][:60] for b, r in zip(BENIGN, refused_benign, strict=True) if r]
    print(f"{path}: refused {sum(refused_injections)}/{len(INJECTIONS)} injections, "
          f"{sum(refused_benign)}/{len(BENIGN)} benign")
    assert caught >= minimum, f"{path}: {caught:.2f} refused; missed {missed}"
    assert wrongly <= MAX_BENIGN_REFUSED, f"{path}: benign refused: {refused}"


def test_corpora_are_our_own_and_big_enough() -> None:
    classes = Counter(i["class"] for i in INJECTIONS)
    assert len(INJECTIONS) >= 50 and len(BENIGN) >= 40
    for language in ("es", "fr", "de", "pt", "zh", "ja", "ko", "ru"):
        assert classes[language] >= 2, language
    for kind in ("role", "toolcall", "hidden", "spaced", "reversed", "base64", "command",
                 "accented"):
        assert classes[kind] >= 4, kind
    assert len({i["text"] for i in INJECTIONS}) == len(INJECTIONS)


def test_the_filter() -> None:
    check_rates("filter", [looks_like_injection(i["text"]) for i in INJECTIONS],
                [looks_like_injection(b["text"]) for b in BENIGN], minimum=0.95)
    by_class: dict[str, list[bool]] = {}
    for i in INJECTIONS:
        by_class.setdefault(i["class"], []).append(looks_like_injection(i["text"]))
    weak = {c: f"{sum(r)}/{len(r)}" for c, r in by_class.items() if sum(r) / len(r) < 0.8}
    assert not weak, weak


@pytest.mark.both_stores
def test_the_engine_refuses_tool_output_not_chat(engine: MemoryEngine) -> None:
    def ingest(samples: list[dict[str, str]], source: str) -> list[bool]:
        results = engine.ingest([NewMemory(s["text"], kind="note", source=source)
                                 for s in samples])
        return [r.status == "rejected" for r in results]

    check_rates("engine, source=tool", ingest(INJECTIONS, "tool"), ingest(BENIGN, "tool"))
    # "TOOL" is "tool" (kinds and sources are lower-cased): it once passed unchecked.
    assert all(ingest(INJECTIONS[:5], "TOOL"))
    # What the user says in chat is the user's business: not checked.
    assert not any(ingest(INJECTIONS, "chat"))


# --- a real service: REST, MCP, the capture hook --------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("injection-paths"))
    yield svc
    svc.stop()


@pytest.fixture(autouse=True)
def empty_store(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each path starts from an empty store (a benign note stored by one path would come
    back as a duplicate on the next, which is not a refusal but reads like one)."""
    yield
    if "service" not in request.fixturenames:
        return
    service: Service = request.getfixturevalue("service")
    with service.client() as http:
        while items := http.get("/api/memories", params={"limit": 500}).json()["items"]:
            for item in items:
                http.delete(f"/api/memories/{item['uid']}")


def test_rest_ingest_as_tool_output(service: Service) -> None:
    def refused(samples: list[dict[str, str]]) -> list[bool]:
        with service.client() as http:
            answers = [http.post("/ingest", json={"content": s["text"], "source": "tool",
                                                  "kind": "artifact"}) for s in samples]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        return [a.json()["status"] == "rejected" for a in answers]

    check_rates("REST /ingest, source=tool", refused(INJECTIONS), refused(BENIGN))


def test_mcp_store_as_tool_output(service: Service) -> None:
    async def refused(samples: list[dict[str, str]]) -> list[bool]:
        out = []
        async with http_session(service.mcp_url) as session:
            for s in samples:
                result = await session.call_tool("memory_store", {
                    "content": s["text"], "source": "tool", "kind": "artifact"})
                text = " ".join(getattr(c, "text", "") for c in result.content)
                assert not result.is_error or "prompt-injection" in text, text
                out.append(result.is_error)
        return out

    injections = anyio.run(refused, INJECTIONS)
    check_rates("MCP memory_store, source=tool", injections, anyio.run(refused, BENIGN))


_CAPTURED = re.compile(r"(\w+)\((.*)\):\n(.*)", re.S)


def _post_tool_use(sample: str, n: int, cwd: Path) -> dict[str, Any]:
    """Claude Code's PostToolUse input for `sample` as a tool's output: a capture record in
    the corpus ("Bash(cmd):\\n…") is replayed as that tool call; anything else is the text of
    a fetched page."""
    base = {"session_id": "3f1c0d7e-injection-paths", "transcript_path": str(cwd / "t.jsonl"),
            "cwd": str(cwd), "permission_mode": "default", "hook_event_name": "PostToolUse",
            "tool_use_id": f"toolu_{n:04d}"}
    m = _CAPTURED.fullmatch(sample)
    if m and m.group(1) == "Bash":
        return base | {"tool_name": "Bash", "tool_input": {"command": m.group(2)},
                       "tool_response": {"stdout": m.group(3), "stderr": "",
                                         "interrupted": False, "isImage": False}}
    if m and m.group(1) == "Read":
        return base | {"tool_name": "Read", "tool_input": {"file_path": m.group(2)},
                       "tool_response": {"type": "text", "file": {"filePath": m.group(2),
                                                                  "content": m.group(3)}}}
    return base | {"tool_name": "WebFetch", "tool_input": {"url": f"https://docs.example.org/p{n}"},
                   "tool_response": sample}


def test_capture_hook_of_claude_code(service: Service, tmp_path: Path) -> None:
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = hook_env(tmp_path, service.url, MEMORY_PLUGIN_TOOL_CAPTURE="Bash,Read,WebFetch",
                   MEMORY_HOOK_BUDGET_S="30")
    samples = [s["text"] for s in INJECTIONS + BENIGN]

    def hook(n: int) -> None:
        run = run_hook("claude-code", "PostToolUse", _post_tool_use(samples[n], n, cwd), env,
                       timeout=60)
        assert run.returncode == 0 and run.stdout == "" and run.stderr == "", run.stderr

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(hook, range(len(samples))))
    with service.client() as http:
        stored = [m["content"] for m in http.get("/api/memories", params={
            "source": "tool", "limit": 500}).json()["items"]]
    spool = tmp_path / "spool"  # beside MEMORY_DB_PATH
    assert not spool.exists() or not any(spool.iterdir()), "a write was spooled, not sent"

    def was_stored(n: int) -> bool:
        m = _CAPTURED.fullmatch(samples[n])
        marker = (f"{m.group(1)}({' '.join(m.group(2).split())}):"
                  if m and m.group(1) in ("Bash", "Read") else f"docs.example.org/p{n}):")
        return any(marker in c for c in stored)

    refused = [not was_stored(n) for n in range(len(samples))]
    check_rates("claude-code PostToolUse hook", refused[:len(INJECTIONS)],
                refused[len(INJECTIONS):])
