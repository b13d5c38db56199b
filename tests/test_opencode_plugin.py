"""The opencode plugin (opencode-plugin/, TypeScript) from the project's one test command: its
type check against the real `@opencode-ai/plugin` types and its own tests (node's test runner,
against a live service), then parity with the Python adapters, checked here where both sides
are at hand: the project name of a repository, the chunks of a compaction flush and the
record of a captured tool call must be exactly the Python ones (the service dedups by exact
content, and memories are shared across harnesses by project), and so must the `<private>`
text it strips (its spool and log must never hold what the hooks' would not)."""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from semantic_memory import spool
from semantic_memory.harness.adapter import ToolCall, capture_record
from semantic_memory.harness.project import detect_project
from semantic_memory.harness.transcript import (
    Turn,
    chunk_turns,
    exchange_chunks,
    flush_chunks,
    remembered,
    unquote,
)
from semantic_memory.private import strip_private
from semantic_memory.safety.redaction import redact
from semantic_memory.safety.textnorm import DEFAULT_IGNORABLE_RANGES, LOOKALIKES
from lock_support import write_lock_held
from test_service_support import Service, memory_mcp_command, start_service

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "opencode-plugin"
BUNDLE = PLUGIN_DIR / "semantic-memory.js"


NPM_LOGS = tempfile.mkdtemp(prefix="smm-npm-logs-")
atexit.register(shutil.rmtree, NPM_LOGS, True)


def npm(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("npm")
    assert exe, "the opencode plugin's tests need Node.js and npm on PATH"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    # npm's debug logs in a folder of the tests' (not the user's ~/.npm/_logs, which a
    # logs-max of 0 would empty), and no update check on the network.
    env.update(npm_config_logs_dir=NPM_LOGS, npm_config_update_notifier="false")
    command = memory_mcp_command()
    if len(command) == 1:  # the tests spawn this service (else ../.venv/bin/memory-mcp)
        env["MEMORY_MCP_BIN"] = command[0]
    return subprocess.run([exe, *args], cwd=PLUGIN_DIR, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)


@pytest.fixture(scope="module", autouse=True)
def node_modules() -> None:
    """`npm ci` once when the dev dependencies are missing (as .ci/run does)."""
    if not (PLUGIN_DIR / "node_modules" / ".bin" / "tsc").exists():
        done = npm("ci", "--no-audit", "--no-fund", "--loglevel=error", timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_typecheck_against_the_real_plugin_types() -> None:
    done = npm("run", "typecheck")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_the_plugins_own_tests_pass() -> None:
    done = npm("test")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    summary = {line.split()[1]: int(line.split()[2]) for line in output.splitlines()
               if line.startswith("ℹ ") and len(line.split()) == 3 and line.split()[2].isdigit()}
    assert summary["fail"] == 0 and summary["skipped"] == 0 and summary["pass"] >= 20, summary


# --- parity with the Python adapters ---------------------------------------------------------


def node_eval(function: str, cases: list[Any]) -> list[Any]:
    """`function` of the shipped bundle applied to each case (its arguments), in one node."""
    script = (f"import * as plugin from {json.dumps(BUNDLE.as_uri())};\n"
              "import { readFileSync } from 'node:fs';\n"
              "const cases = JSON.parse(readFileSync(0, 'utf8'));\n"
              f"const results = cases.map((args) => plugin.{function}(...args));\n"
              "process.stdout.write(JSON.stringify(results));")
    done = subprocess.run(["node", "--input-type=module", "-e", script], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def repo(path: Path, *remotes: tuple[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, url in remotes:
        git(path, "remote", "add", name, url)
    return path


def long_gitlab_url(top: str) -> str:
    """A remote whose project name is over the service's 256 characters."""
    return f"https://gitlab.com/{top}/" + "/".join(f"subgroup-{i}" for i in range(30)) + "/app"


def test_project_names_match_the_python_rule(tmp_path: Path) -> None:
    """For each kind of checkout the TypeScript rule names the project exactly as Python's
    detect_project does: worktrees of a repository without a remote (its main checkout's
    name, a bare repository's without `.git`), names over the service's limit (tail + hash,
    composed, never read as a remote), folders whose names are not UTF-8 (U+FFFD, the git
    dir found through the `.git` file's own bytes)."""
    https = repo(tmp_path / "https", ("origin", "https://github.com/Acme/Web.git"))
    scp = repo(tmp_path / "scp", ("upstream", "git@gitlab.example:team/api.git"),
               ("origin", "git@github.com:Acme/api.git"))
    other = repo(tmp_path / "first-remote", ("fork", "ssh://git@host.example:2222/me/tool.git"))
    local = repo(tmp_path / "no-remote")
    (local / "src" / "deep").mkdir(parents=True)
    (https / "packages" / "ui").mkdir(parents=True)
    commit(https)
    worktree = tmp_path / "wt"
    git(https, "worktree", "add", "-q", str(worktree))
    (tmp_path / "plain" / "folder").mkdir(parents=True)
    odd = repo(tmp_path / "odd-config")
    with open(odd / ".git" / "config", "a") as config:  # indented continuation, comments
        config.write('# a comment\n[remote "origin"]\n\turl = https://example.org/x/y.git/\n'
                     '\t; another\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n')
    broken = repo(tmp_path / "bare-key")
    with open(broken / ".git" / "config", "a") as config:  # configparser refuses it
        config.write('[remote "origin"]\n\turl = https://example.org/z.git\n\tbare\n')
    # a worktree of a repository without a remote, and of a bare one (`app.git`)
    commit(local)
    git(local, "worktree", "add", "-q", str(tmp_path / "no-remote-feature"))
    bare = tmp_path / "app.git"
    git(tmp_path, "clone", "-q", "--bare", str(local), str(bare))
    git(bare, "remote", "remove", "origin")
    git(bare, "worktree", "add", "-q", "-b", "one", str(tmp_path / "bare-one"))
    # names over the limit: two that end alike, one that only fits composed, one whose tail
    # reads as an scp-like remote
    acme = repo(tmp_path / "long-acme", ("origin", long_gitlab_url("Acme")))
    umbrella = repo(tmp_path / "long-umbrella", ("origin", long_gitlab_url("umbrella")))
    composed = repo(tmp_path / "composed",
                    ("origin", "https://example.org/" + "e\u0301" * 150 + "/app.git"))
    scp_tail = repo(tmp_path / "scp-tail",
                    ("origin", "https://example.org/" + "a" * 300 + "x@host:pp"))
    # a folder not UTF-8: as Node spells it (U+FFFD) and as Python does (escaped bytes); a
    # worktree whose main checkout (no remote) and one whose remote's repository is under it
    latin1 = tmp_path / os.fsdecode(b"caf\xe9 repo")
    latin1_main = repo(latin1 / "main")
    commit(latin1_main)
    git(latin1_main, "worktree", "add", "-q", str(tmp_path / "latin1-feature"))
    latin1_remote = repo(latin1 / "app", ("origin", "https://github.com/Acme/App.git"))
    commit(latin1_remote)
    git(latin1_remote, "worktree", "add", "-q", str(tmp_path / "latin1-remote-feature"))

    folders = [https, https / "packages" / "ui", scp, other, local, local / "src" / "deep",
               worktree, tmp_path / "plain" / "folder", odd, broken, tmp_path / "missing",
               tmp_path / "no-remote-feature", tmp_path / "bare-one", acme, umbrella, composed,
               scp_tail, latin1, tmp_path / "caf\ufffd repo", latin1_main,
               tmp_path / "latin1-feature", tmp_path / "latin1-remote-feature"]
    expected = [detect_project(folder) for folder in folders]
    # GitHub's names are caseless: lower case, as every clone's spelling agrees
    assert expected[:4] == ["github.com/acme/web", "github.com/acme/web", "github.com/acme/api",
                            "host.example/me/tool"]
    assert expected[4:6] == ["no-remote", "no-remote"] and expected[6] == "github.com/acme/web"
    assert expected[11:13] == ["no-remote", "app"]
    long_acme, long_umbrella = expected[13:15]
    assert len(long_acme) <= 256 and long_acme[:-8].endswith("/subgroup-29/app~")
    assert long_acme != long_umbrella and long_acme[:-8] == long_umbrella[:-8]
    assert expected[15] == unicodedata.normalize("NFC", "example.org/" + "e\u0301" * 150 + "/app")
    assert expected[16].startswith("\u2026~") and len(expected[16]) == 10
    assert expected[17:21] == ["caf\ufffd repo", "caf\ufffd repo", "main", "main"]
    assert expected[21] == "github.com/acme/app"
    assert node_eval("detectProject", [[str(f)] for f in folders]) == expected


def commit(path: Path) -> None:
    git(path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "init")


TEXTS = [
    "", "ok", "Done.", "why does the checkout integration test keep failing on CI?",
    "Paragraph one.\n\nParagraph two is longer and has several sentences. It goes on. And on.",
    "line\nline\nline", "  padded  \t\n", "unicode: Grüße, 東京, ภาษาไทย, 🧪🔥 emoji",
    "<semantic-memory>\n<memory uid=\"x\">old</memory>\n</semantic-memory>kept",
    "<system-reminder>hidden</system-reminder> visible", "a\x1cb\x85c\u3000d",
    # "remember" prompts (left out of a flush, with a reply that only acknowledges them) and
    # the quotes `opencode run "…"` wraps around a prompt holding a space.
    "remember that the deploy freeze starts on Fridays at noon", '"Remember: use pnpm, not npm"',
    '"\\"remember that the staging db listens on 5433\\""', "Noted: the freeze starts Fridays.",
    '"why does the checkout \\"integration\\" test fail?"', "\u201cremember\u00a0this\u201d",
]


def random_text(rng: random.Random) -> str:
    """Text with what chunking cares about: boundaries, lengths around the limits, astral
    characters (counted once by Python, twice by UTF-16), odd whitespace."""
    pieces = []
    for _ in range(rng.randint(0, 60)):
        pieces.append(rng.choice([
            rng.choice(TEXTS), " ".join(rng.choice(["word", "x" * rng.randint(1, 300), "🙂", "é"])
                                        for _ in range(rng.randint(1, 40))),
            "\n\n", "\n", ". ", " ", "\t", "\u00a0", "\u3002", "\uff01", "\uff1f",
            "部署流程" * rng.randint(1, 80)]))
    return "".join(pieces)


#: "remember" prompts at the rule's edges: nothing after the word, separators (dashes,
#: fullwidth), questions about memory, single quotes around the whole prompt.
REMEMBER_PROMPTS = [
    "remember:", "remember that", "Remember that.", "remember", "remember \u2014 \U0001f642",
    'remember ""', "remember that's the port", "remember that: the port is 5433",
    "REMEMBER \u2014 use pnpm not npm", "remember \u2013 use pnpm",
    "remember\uff1athe port is 5433", "remember\uff0c\u3001the port is 5433",
    "remember what port we chose for redis?", "remember \u7aef\u53e3\uff1f",
    'remember "which port?"', "remember what? the port is 5433",
    "Remember the staging port we picked? Put it in config/staging.yaml.",
    "remember what port the staging database listens on.", "remember which port we chose",
    "remember \u7aef\u53e3\uff1f\u7528\u54ea\u4e2a", "remember what we decided: use pnpm",
    "remember whatever happens, never force-push main", "remember the URL is https://x.io/a?b=1",
    "remember the port is 5433. Why? 5432 is taken.", "remember it!\nwhich one? the port",
    "\u8bb0\u4f4f\uff1a\u90e8\u7f72\u7528 make release", "\u8a18\u4f4f\uff0c\u7aef\u53e3",
    "\u899a\u3048\u3066\u304a\u3044\u3066\uff1a\u30dd\u30fc\u30c8", "\u899a\u3048\u3066\u306a\u3044",
    "\uae30\uc5b5\ud574 \ub46c, \ud3ec\ud2b8\ub294 5433", "\uae30\uc5b5\ud574\uc57c \ud574",
    "Merk dir, dass der Port 5433 ist", "MERKE DIR: Port", "Retiens que le port est 5433",
    "Souviens-toi : le port", "Recuerda que el puerto es 5433", "Lembre-se: a porta",
    "Ricorda che la porta", "\u0417\u0430\u043f\u043e\u043c\u043d\u0438, \u0447\u0442\u043e 5433", "\u8bb0\u4f4f\u4e86",
    "Recuerda c\u00f3mo configuramos el puerto?", "Merkel said so",
    "'remember the queue is sqs'", "\u2018remember the queue is sqs\u2019", "'x' and 'y'",
    "'it's sqs'", "\u2018it\u2019s sqs\u2019", "''", "'a", "'\"remember the queue is sqs\"'",
    "'remember' and 'forget'", "\u00a0'remember\u3000\u2014\u3001that\tx'\n",
]


def test_flush_chunks_match_the_python_chunking() -> None:
    rng = random.Random(20261201)
    conversations = [[Turn("user", t), Turn("assistant", TEXTS[-2 - i % 3])]
                     for i, t in enumerate(TEXTS)]
    for _ in range(150):
        conversations.append([Turn(rng.choice(["user", "assistant"]), random_text(rng))
                              for _ in range(rng.randint(1, 6))])
    conversations += [[Turn("user", p), Turn("assistant", "Noted: the port is 5433.")]
                      for p in REMEMBER_PROMPTS]
    expected = [chunk_turns(turns) for turns in conversations]
    assert sum(len(chunks) > 1 for chunks in expected) > 20  # long exchanges were cut
    got = node_eval("chunkTurns", [[[{"role": t.role, "text": t.text} for t in turns]]
                                   for turns in conversations])
    for turns, want, have in zip(conversations, expected, got, strict=True):
        assert have == want, turns


def test_what_a_flush_stores_is_what_the_python_hooks_store() -> None:
    """The plugin sends a long exchange whole and the service redacts it before it cuts it
    (`exchange_chunks`): the memories stored are the Python hooks' (`flush_chunks` with their
    redaction), a private key split by the cut included."""
    rng = random.Random(20261206)
    key = "\n".join(["-----BEGIN RSA PRIVATE KEY-----",
                     *("".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop0123456789+/")
                               for _ in range(64)) for _ in range(25)),
                     "-----END RSA PRIVATE KEY-----"])
    conversations = [[Turn("user", "How do I set up the deploy box?"),
                      Turn("assistant", "Step one. " * 100 + f"\n\n{key}\n\n" + "Then go. " * 150)]]
    conversations += [[Turn(rng.choice(["user", "assistant"]), random_text(rng))
                       for _ in range(rng.randint(1, 6))] for _ in range(100)]
    got = node_eval("flushItems", [[[{"role": t.role, "text": t.text} for t in turns]]
                                   for turns in conversations])
    assert sum("exchange" in item for items in got for item, _ in items) > 10
    for turns, items in zip(conversations, got, strict=True):
        stored = [chunk for item, _ in items
                  for chunk in ([item["content"]] if "content" in item else
                                exchange_chunks(item["exchange"]["user"],
                                                item["exchange"]["reply"], redact))]
        assert list(dict.fromkeys(stored)) == flush_chunks(turns, redact=redact)[0], turns
    assert "BEGIN RSA" in "".join(chunk_turns(conversations[0]))
    assert "BEGIN RSA" not in "".join(flush_chunks(conversations[0], redact=redact)[0])


def test_prompt_quotes_and_remember_match_the_python_rule() -> None:
    rng = random.Random(11)
    wraps = [("", ""), ('"', '"'), (' "', '"\n'), ("\u201c", "\u201d"), ('"', '\\"'),
             ("remember ", ""), ('"remember that ', '"'), ('"\\"remember: ', '\\""'),
             ("'", "'"), ("\u2018", "\u2019 "), ("'remember \u2014 ", "'"), ("remember\uff1a", "?"),
             ("REMEMBER that, ", "\uff1f"), ("\u2018remember ", "\u2019")]
    prompts = TEXTS + REMEMBER_PROMPTS + [head + random_text(rng) + tail
                                          for head, tail in (rng.choice(wraps) for _ in range(300))]
    expected = [[unquote(p), remembered(p)] for p in prompts]
    assert sum(r is not None for _, r in expected) > 50 and sum(
        u != p for p, (u, _) in zip(prompts, expected)) > 50
    got = [node_eval(name, [[p] for p in prompts]) for name in ("unquote", "remembered")]
    for prompt, want, have in zip(prompts, expected, zip(*got), strict=True):
        assert list(have) == want, prompt


def test_capture_records_match_the_python_records() -> None:
    rng = random.Random(7)
    calls = [ToolCall("bash", {"command": "echo pool=20", "description": "x"}, "pool=20\n"),
             ToolCall("read", {"filePath": "/src/app.ts"}, ""),
             ToolCall("grep", {"pattern": "TODO", "path": "src"}, "a.ts:1: TODO"),
             ToolCall("webfetch", {"format": "markdown", "timeout": 5}, "x" * 5000),
             ToolCall("edit", {"oldString": "a\n  b", "newString": "ü"}, "🧪" * 3000),
             ToolCall("task", "a plain string input", "done")]
    for _ in range(100):
        calls.append(ToolCall(rng.choice(["bash", "Read", "mcp_x"]),
                              {"command": random_text(rng)} if rng.random() < 0.5
                              else {"k": random_text(rng)[:50], "n": rng.randint(0, 9)},
                              random_text(rng) * rng.randint(1, 3)))
    expected = [capture_record(call) for call in calls]
    got = node_eval("captureRecord", [[{"name": c.name, "input": c.input, "output": c.output}]
                                      for c in calls])
    assert got == expected


def test_what_the_plugin_spools_the_python_service_stores_once(tmp_path: Path) -> None:
    """The TypeScript spool writer and the Python replayer agree on the format (spool.py):
    what the bundle spooled is read by spool.py and stored by the service, which drains the
    spool at start; the same write spooled again (its answer came too late) is a duplicate."""
    folder = tmp_path / "spool"
    origin = {"harness": "opencode", "event": "chat.message"}
    fact = {"content": "the nightly backup runs on host vega at 02:30", "kind": "fact",
            "source": "chat", "project": "p", "tags": ["harness:opencode"],
            "session": "opencode:ses_1", "created_at": 1_700_000_000.5}
    batch = {"items": [{"content": f"User: question {i}?\nAssistant: answer {i}, unicode Grüße 🧪",
                        "kind": "note", "source": "compaction", "project": "p"}
                       for i in range(2)]}
    files = node_eval("appendSpool", [[str(folder), "/ingest", fact, origin],
                                      [str(folder), "/ingest", batch, origin]])
    assert [str(p) for p in spool.pending(folder)] == files
    record = spool.read(Path(files[0]))
    assert record is not None and record["body"] == fact and record["v"] == spool.VERSION
    assert (record["harness"], record["event"], record["path"]) == ("opencode", "chat.message",
                                                                   "/ingest")
    assert spool.depth(folder).count == 2

    service = start_service(tmp_path)
    try:
        with service.client() as http:
            def stored() -> list[dict[str, Any]]:
                return http.get("/api/memories", params={"limit": 100}).json()["items"]

            def drained() -> bool:
                deadline = time.monotonic() + 60
                while spool.depth(folder).count and time.monotonic() < deadline:
                    time.sleep(0.1)  # claimed files count until stored
                return spool.depth(folder) == spool.Depth(0, None, 0)

            assert drained()
            memories = {m["content"]: m for m in stored()}
            assert set(memories) == {fact["content"], *(i["content"] for i in batch["items"])}
            assert memories[str(fact["content"])]["created_at"] == "2023-11-14T22:13:20+00:00"

            node_eval("appendSpool", [[str(folder), "/ingest", fact, origin]])
            assert drained() and len(stored()) == 3
    finally:
        service.stop()


def test_what_the_plugin_keeps_as_refused_is_the_python_spools_record(tmp_path: Path) -> None:
    """A write the service refused, kept by the bundle (a live 4xx, or items refused on
    replay), is the record spool.py keeps: in `rejected/`, with the reason, counted by `depth`
    and never replayed; and the bundle reads /ingest's answers as `refused_items` does."""
    folder = tmp_path / "spool"
    body = {"content": "the vault path is a\u0000b", "kind": "fact", "project": "p"}
    [kept] = node_eval("appendSpool", [[str(folder), "/ingest", body,
                                        {"harness": "opencode", "event": "chat.message",
                                         "rejected": "HTTP 422: " + "x" * 600}]])
    python = spool.append(folder, "/ingest", body, harness="opencode", event="chat.message",
                          rejected="HTTP 422: " + "x" * 600)
    assert Path(kept).parent == Path(python).parent == folder / spool.REJECTED
    ours, theirs = spool.read(Path(kept)), spool.read(Path(python))
    assert ours is not None and theirs is not None
    assert list(ours) == list(theirs) and ours["rejected"] == theirs["rejected"]
    assert {k: v for k, v in ours.items() if k not in ("ts", "rejected_at")} == \
        {k: v for k, v in theirs.items() if k not in ("ts", "rejected_at")}
    assert ours["rejected_at"] == ours["ts"]
    assert spool.depth(folder) == spool.Depth(0, None, 2)
    assert spool.replay(folder, lambda path, body: pytest.fail("replayed")) == (0, 0, 0)

    batch = {"items": [{"content": "a"}, {"content": "b"}, {"content": "c"}], "project": "p"}
    answers = [None, [], {"status": "new"}, {"status": "rejected"},
               {"status": "rejected", "reason": "r"},
               {"results": [{"status": "new"}, {"status": "duplicate"}, {"status": "new"}]},
               {"results": [{"status": "rejected", "reason": "s"}, {"status": "new"},
                            {"status": "rejected", "reason": "t"}]},
               {"results": [{"status": "rejected"}] * 3}, {"results": [{"status": "rejected"}]},
               {"results": [[], "rejected", {"status": "rejected", "reason": "u"}]}]
    expected = [spool.refused_items(batch, answer) for answer in answers]
    got = node_eval("refusedItems", [[batch, answer] for answer in answers])
    assert [list(r) if r is not None else None for r in expected] == got


#: `<private>` tags as they read (tests/test_private_optout.py's cases): an invisible character,
#: a compatibility form or a look-alike letter in the tag does not hide it.
PRIVATE_READINGS = [
    "a <pri\u200bvate>s</pri\u200bvate> b", "a <pri\u00advate>s</private\u2060> b",
    "a <\u3000private>s</private\u3000> b", "a \uff1c\uff50rivate\uff1es\uff1c/private\uff1e b",
    "a <\u0440rivate>s</private> b",
    "\ufeff\U0001f469\u200d\U0001f4bb <private>s\u200b</private>\u200f ok",
    "<pri\u200bvateer> is another tag", "a <pr\u0130vate>s</PR\u0131VATE> b",
    "\u0440\u0433\u0456\u03bd\u0430\u0442\u0435 <\u0440\u0433\u0456\u03bd\u0430\u0442\u0435> "
    "is Greek and Cyrillic",
    "\ufb01 <private\ufe65s</private\ufe65 \u2460\U0001f642<private/\ufe65\u2100",
]


def test_private_text_is_found_as_it_reads_as_python_finds_it() -> None:
    """The plugin's `stripPrivate` reads a tag as `strip_private` does (NFKC per character,
    invisible characters dropped, look-alike letters folded) and cuts the same span from the
    text as written, so its spool and log hold no private text the hooks' would not."""
    texts = list(PRIVATE_READINGS)
    # Every character reading as "<" opens a tag, every look-alike letter of the name folds.
    texts += [f"a {c}private>s</private> b" for c in map(chr, range(0x80, 0x110000))
              if "<" in unicodedata.normalize("NFKC", c)]
    for char, latin in ((chr(c), latin) for c, latin in LOOKALIKES.items()):
        texts += [f"a <{'private'.replace(latin, char)}>s</private> b",
                  f"a <x{char}> <{'PRIVATE'.replace(latin.upper(), char)}>s b"]
    # Each run of invisible characters (its first and last) inside the name and the brackets.
    for lo, hi in DEFAULT_IGNORABLE_RANGES + ((0x0600, 0x0605), (0xFFF9, 0xFFFB)):
        texts += [f"a <pri{chr(c)}vate{chr(c)}>s</{chr(c)}private> b" for c in {lo, hi}]
    rng = random.Random(3)
    pieces = ["<private>", "</private>", "<pri\u200bvate>", "\uff1c/\u0440rivate\u3000>",
              "<\u1d18RIVATE/>", "<", ">", "/", "private", "pri", "vate", "PRIVATE", "\uff1c",
              "\uff1e", "\ufe64", "\uff0f", "\uff50", "\u0440", "\u0433", "\u0430", "\u1d18",
              "\u0130", "\u0131",
              "\u200b", "\u00ad", "\u2060", "\ufeff", "\u200d", "\u3000", "\U000e0041", "\ufb01",
              "\u2460", "\U0001f642", "\u00e9", "e\u0301", " ", "\n", "x", "secret words"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(600)]
    expected = [strip_private(t) for t in texts]
    assert sum(e != t for e, t in zip(expected, texts, strict=True)) > 300
    got = node_eval("stripPrivate", [[t] for t in texts])
    for text, want, have in zip(texts, expected, got, strict=True):
        assert have == want, ascii(text)


# --- a long writer (purge, import, another process) costs the plugin no model-call time ------


#: The plugin as opencode drives it, from the shipped bundle: for each prompt a new session,
#: its chat.message then the system transform of its first model call (timed), then dispose.
DRIVE = """
import { MemoryPlugin, loadSettings } from %s;
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
const { env, prompts } = JSON.parse(readFileSync(0, 'utf8'));
const debug = [];
const memory = new MemoryPlugin(loadSettings(env).settings, process.cwd(), [], (line) => debug.push(line));
const calls = [];
for (const [i, prompt] of prompts.entries()) {
  const session = `ses_lock${i}`;
  const system = ['<env>\\n  Working directory: /src/web\\n</env>'];
  const started = performance.now();
  await memory.chatMessage(session, [{ id: `prt_${i}`, sessionID: session, messageID: `msg_${i}`,
                                      type: 'text', text: prompt }]);
  await memory.systemTransform(session, system);
  calls.push({ ms: performance.now() - started, system });
}
await memory.dispose();
process.stdout.write(JSON.stringify({ calls, debug }));
"""


def drive_bundle(tmp: Path, service: Service, project: str, budget: float,
                 *prompts: str) -> tuple[list[dict[str, Any]], str]:
    """The model calls' [{ms, system}] and the plugin's debug output. The plugin's db path is
    `tmp` (its hook log, spool and back-off file), not the service's."""
    env = {"MEMORY_PLUGIN_URL": service.url, "MEMORY_DB_PATH": str(tmp / "memory.db"),
           "MEMORY_PROJECT": project, "MEMORY_HOOK_BUDGET_S": str(budget),
           "MEMORY_PLUGIN_DEBUG": "1"}
    done = subprocess.run(["node", "--input-type=module", "-e", DRIVE % json.dumps(BUNDLE.as_uri())],
                          input=json.dumps({"env": env, "prompts": list(prompts)}),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    return result["calls"], "".join(result["debug"])


def plugin_log(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "hooks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def locked_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start_service(tmp_path_factory.mktemp("opencode-long-writer"))
    with service.client() as http:  # the first recall loads the embedder: not under the lock
        http.post("/recall", json={"query": "warm up", "relevant_only": True})
    yield service
    service.stop()


def test_a_held_write_lock_costs_the_model_calls_nothing(locked_service: Service,
                                                        tmp_path: Path) -> None:
    """While the store's write lock is held (a purge, an import's index merge), the recall, a
    read, answers at once: the block goes into each model call without waiting for the
    injection report, a write that waits. The report is sent once and dropped after 0.5 s (a
    debug line), never the hook's outcome and never the back-off. It was awaited: every model
    call waited the whole budget."""
    project, budget = "opencode-long-writer", 3.0
    fact = "The osprey cluster drains its queue with osprey-drain --all"
    with locked_service.client() as http:
        assert http.post("/ingest", json={"content": fact, "project": project}
                         ).json()["status"] == "new"
    with write_lock_held(locked_service.tmp / "memory.db"):
        calls, debug = drive_bundle(tmp_path, locked_service, project, budget,
                                    "how do we drain the osprey queue?",
                                    "which command drains the osprey queue?")
    for call in calls:
        assert len(call["system"]) == 2 and fact in call["system"][1], call
        assert call["ms"] < budget * 1000 / 2, call["ms"]
    log = plugin_log(tmp_path)
    assert [e["outcome"] for e in log] == ["injected", "injected"], log
    assert not any("report" in e["detail"] for e in log), log
    assert debug.count("report failed: ") == 2, debug
    assert not (tmp_path / "hooks.backoff.json").exists()
    assert not (tmp_path / "spool").exists()


def test_a_write_behind_a_held_write_lock_starts_no_back_off(locked_service: Service,
                                                             tmp_path: Path) -> None:
    """A "remember" while the lock is held waits its budget and is spooled. The service still
    answers (the probe after the timeout, HEAD /), so that is slow, not hung: no back-off for
    every harness, and the next prompt's recall injects (it made no request for 30 s)."""
    project = "opencode-long-writer-remember"
    fact = "The kestrel batch jobs are paused with kestrel-ctl pause"
    with locked_service.client() as http:
        assert http.post("/ingest", json={"content": fact, "project": project}
                         ).json()["status"] == "new"
    with write_lock_held(locked_service.tmp / "memory.db"):
        (said, found), _ = drive_bundle(tmp_path, locked_service, project, 1.5,
                                   "remember that the kestrel jobs resume at 06:00",
                                   "how do we pause the kestrel batch jobs?")
    remembered_line, recalled = plugin_log(tmp_path)
    assert remembered_line["outcome"] == "spooled", remembered_line
    assert remembered_line["detail"].endswith(
        "; the service answers a probe: slow, not hung, no back-off"), remembered_line
    assert "will store the user's \"remember\" message" in said["system"][1]
    assert recalled["outcome"] == "injected", recalled
    assert fact in found["system"][1]
    assert not (tmp_path / "hooks.backoff.json").exists()
    assert len(spool.pending(tmp_path / "spool")) == 1


# --- a repository's file naming another project: ignored until the user allows it -----------


#: The plugin, from the shipped bundle, in a repository folder: each prompt in a new session,
#: its chat.message then the system transform of its model call; the project it used.
IN_FOLDER = """
import { MemoryPlugin, loadSettings } from %s;
import { readFileSync } from 'node:fs';
const { env, cwd, prompts } = JSON.parse(readFileSync(0, 'utf8'));
const memory = new MemoryPlugin(loadSettings(env).settings, cwd, [], () => undefined);
const systems = [];
for (const [i, prompt] of prompts.entries()) {
  const session = `ses_folder${i}`;
  const system = ['<env>\\n  Working directory: /src/web\\n</env>'];
  await memory.chatMessage(session, [{ id: `prt_${i}`, sessionID: session, messageID: `msg_${i}`,
                                      type: 'text', text: prompt }]);
  await memory.systemTransform(session, system);
  systems.push(system);
}
await memory.dispose();
process.stdout.write(JSON.stringify({ project: memory.project, systems }));
"""


def test_a_file_naming_another_project_is_ignored_until_allowed(tmp_path: Path) -> None:
    """As in the hooks: a cloned repository's file that names a private project of the user's
    gets nothing of it and files nothing under it (the detected name is used, each log line
    says why and what to run) until `memory-mcp allow` in that folder, whose approval the
    plugin reads beside its db; a changed name needs a new allow, `--revoke` takes it back."""
    secret, bait = "github.com/mycompany/secret", "github.com/evil/bait"
    fact = "The mycompany deploy key rotates every Tuesday at noon"
    question = "when does the mycompany deploy key rotate?"
    folder = repo(tmp_path / "bait", ("origin", "git@github.com:evil/bait.git"))
    config = folder / ".semantic-memory.toml"
    config.write_text(f'[project]\nname = "{secret}"\n')
    plugin_db = tmp_path / "plugin"
    plugin_db.mkdir()
    service = start_service(tmp_path / "service")
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": fact, "project": secret}
                             ).json()["status"] == "new"
        env = {"MEMORY_PLUGIN_URL": service.url, "MEMORY_DB_PATH": str(plugin_db / "memory.db")}
        cli_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        cli_env["MEMORY_DB_PATH"] = env["MEMORY_DB_PATH"]

        def drive(*prompts: str) -> dict[str, Any]:
            done = subprocess.run(["node", "--input-type=module", "-e",
                                   IN_FOLDER % json.dumps(BUNDLE.as_uri())],
                                  input=json.dumps({"env": env, "cwd": str(folder),
                                                    "prompts": list(prompts)}),
                                  capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            return json.loads(done.stdout)

        def allow(*args: str) -> str:
            done = subprocess.run([*memory_mcp_command(), "allow", *args], cwd=folder,
                                  env=cli_env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        result = drive("remember that the bait repo builds into /tmp/bait-out", question)
        assert result["project"] == bait
        assert not any(fact in part for part in result["systems"][1]), result
        with service.client() as http:
            stored = http.get("/api/memories", params={"limit": 50}).json()["items"]
        assert [m["project"] for m in stored if "bait-out" in m["content"]] == [bait]
        log = plugin_log(plugin_db)
        assert [e["project"] for e in log] == [bait, bait], log
        assert all(e["warning"] == f'{config}: [project] name "{secret}" is ignored until you '
                   f"allow it: run `memory-mcp allow {folder}`" for e in log), log

        assert f"allowed {config} to name the project '{secret}'" in allow()
        result = drive(question)
        assert result["project"] == secret and fact in result["systems"][0][1], result
        assert "warning" not in plugin_log(plugin_db)[-1]

        config.write_text('[project]\nname = "github.com/mycompany/other"\n')
        assert drive(question)["project"] == bait  # a changed name needs a new allow
        allow()
        assert drive(question)["project"] == "github.com/mycompany/other"
        assert "revoked" in allow("--revoke")
        assert drive(question)["project"] == bait
    finally:
        service.stop()


def test_a_spool_folder_the_plugin_may_not_write_is_stuck_not_taken(tmp_path: Path) -> None:
    """A spool folder made by a `sudo` run: the plugin's replay took a refused rename for
    another replayer's claim and went on as if nothing waited. It stops with the reason (the
    plugin logs it once), nothing claimed or rejected, as the Python replayer does."""
    from lock_support import _without_capabilities

    folder = tmp_path / "spool"
    spooled = spool.append(folder, "/ingest", {"content": "the staging db is on port 6543"})
    folder.chmod(0o555)
    script = (f"import * as plugin from {json.dumps(BUNDLE.as_uri())};\n"
              "const sent = [];\n"
              f"plugin.replaySpool({json.dumps(str(folder))}, async (p, b) => sent.push(b), "
              "() => true)\n"
              "  .then((done) => console.log(JSON.stringify({done, sent})))\n"
              "  .catch((e) => console.log(JSON.stringify({error: e.constructor.name, "
              "message: e.message, sent})));")
    try:
        done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True,
                              text=True, timeout=120, preexec_fn=_without_capabilities)
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout)
    assert answer.get("error") == "SpoolStuck", answer
    assert "cannot be replayed" in answer["message"] and answer["sent"] == []
    assert spool.pending(folder) == [spooled]
