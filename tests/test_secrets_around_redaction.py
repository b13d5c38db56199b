"""Secrets shown or stored around the redaction (QA secrets report F1, F2, F3, F8).

The redaction itself held on every way in; these are the places beside it that kept or
printed a caller's text raw: a markdown import's `heading:` tag was cut to 64 characters
before it was redacted (the tail of a Slack or OpenAI token was stored in clear), the import
report and `spool list` previewed raw text, and an error body quoted the value it refused.
Real CLI processes, a real SQLite file, a real service on a random port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from semantic_memory import spool
from semantic_memory.testing import clean_env, memory_mcp, start_service

# Built at run time: a whole token in the source is what secret scanners refuse on push.
SLACK = "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx"
OPENAI = ("sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cQw9Er4Ty6Ui8Op0As2Df4Gh6Jk8"
          + "T3BlbkFJ" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cQw9Er4")
GITHUB = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
PASSWORD = "Xk9mQ2vL8pR4tW1zQ7"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dcQw9Er4Ty6Ui8"
#: What must never be printed or stored: each secret's tail (what a cut kept) and its whole.
SECRETS = (SLACK, OPENAI, GITHUB, PASSWORD, STRIPE)
TAILS = tuple(secret[-16:] for secret in SECRETS)
PRIVATE = "the hidden paragraph nobody may see"

NOTES = f"""# Billing

## Slack bot for the alerts channel: {SLACK}

- alerts go to the ops billing channel

## the OpenAI key: {OPENAI}

- used by the summariser

## a <private>{PRIVATE}, long enough to be cut away from this heading</private> tail

- the GitHub token for the docs bot is {GITHUB}
- DB_PASSWORD={PASSWORD} for staging
- a note with <private>{PRIVATE}</private> in it
"""


def cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` with its db in `tmp`, HOME there too; fails the test on exit != 0."""
    done = subprocess.run([*memory_mcp(), *args], env=clean_env(tmp, HOME=str(tmp), **env),
                          text=True, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def assert_clean(text: str) -> None:
    for secret in (*SECRETS, *TAILS, PRIVATE):
        assert secret not in text, f"{secret!r} shown:\n{text}"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "md"
    folder.mkdir()
    (folder / "notes.md").write_text(NOTES)
    (tmp_path / "proj").mkdir()
    return folder


def test_an_imported_heading_tag_is_redacted_before_it_is_cut(tmp_path: Path, notes: Path
                                                                ) -> None:
    cli(tmp_path, "import", str(notes), "--project", str(tmp_path / "proj"))
    listed = cli(tmp_path, "list", "--json", "--limit", "100").stdout
    memories = json.loads(listed)
    memories = memories["memories"] if isinstance(memories, dict) else memories
    headings = {t for m in memories for t in m["tags"] if t.startswith("heading:")}
    assert "heading:Slack bot for the alerts channel: [REDACTED:slack-token]" in headings
    assert "heading:the OpenAI key: [REDACTED:openai-key]" in headings
    assert "heading:a tail" in headings  # the private text went before the cut, whole
    assert_clean(listed)
    recalled = cli(tmp_path, "recall", "alerts channel", "--json", "--project", "proj").stdout
    assert "alerts go to" in recalled
    assert_clean(recalled)


def test_the_import_report_previews_what_is_stored(tmp_path: Path, notes: Path) -> None:
    project = str(tmp_path / "proj")
    dry = cli(tmp_path, "import", str(notes), "--project", project, "--dry-run").stdout
    assert "[REDACTED:github-token]" in dry and "DB_PASSWORD=[REDACTED:password]" in dry
    assert_clean(dry)
    report = cli(tmp_path, "import", str(notes), "--project", project, "--json").stdout
    actions = [a for f in json.loads(report)["files"] for a in f["actions"]]
    assert sum(a.startswith("new ") for a in actions) == 5, actions
    assert any("[REDACTED:slack-token]" in a for a in actions), actions
    assert_clean(report)


def test_a_refused_section_names_its_heading_redacted(tmp_path: Path, notes: Path) -> None:
    (notes / "notes.md").write_text(f"## Slack bot: {SLACK}\n\n" + "word " * 80 + "\n")
    report = cli(tmp_path, "import", str(notes), "--project", str(tmp_path / "proj"), "--json",
                 MEMORY_MAX_CONTENT_CHARS="200").stdout
    (refused,) = [a for f in json.loads(report)["files"] for a in f["actions"]]
    assert refused.startswith("rejected ") and "[REDACTED:slack-token]" in refused, refused
    assert_clean(report)


def test_spool_list_previews_a_waiting_write_redacted(tmp_path: Path) -> None:
    folder = tmp_path / "spool"  # beside the db, as Settings.spool_path has it
    spool.append(folder, "/ingest", {"content": f"the prod db password is {PASSWORD}, and "
                                                f"<private>{PRIVATE}</private> more"},
                 harness="claude-code", event="UserPromptSubmit")
    spool.append(folder, "/ingest", {"items": [{"content": f"slack bot {SLACK}"}]})
    spool.append(folder, "/ingest", {"content": "x"},
                 rejected=f"replaces: no live memory with uid {STRIPE!r}")
    table = cli(tmp_path, "spool", "list").stdout
    assert "2 write(s) waiting" in table and "[REDACTED:" in table
    assert_clean(table)
    listed = json.loads(cli(tmp_path, "spool", "list", "--json").stdout)
    previews = sorted(row["preview"] for row in listed["pending"])
    assert previews == ["slack bot [REDACTED:slack-token]",
                        "the prod db password is [REDACTED:password], and more"], previews
    assert listed["rejected"][0]["rejected"] == \
        "replaces: no live memory with uid '[REDACTED:stripe-key]'"
    assert_clean(json.dumps(listed))
    # Only what is shown changes: the spool still holds the text for the service to redact.
    assert any(PASSWORD in f.read_text() for f in folder.glob("*" + spool.SUFFIX))


def test_an_error_body_does_not_quote_a_secret_back(tmp_path: Path) -> None:
    service = start_service(tmp_path / "svc")
    note = "a note about the billing alerts"
    try:
        answers = [
            service.request("POST", "/ingest", {"content": note, "replaces": STRIPE}),
            service.request("POST", "/ingest", {"content": note, "created_at": STRIPE}),
            service.request("POST", "/ingest", {"content": note, STRIPE: 1}),
            service.request("POST", "/ingest", {"content": note, "kind": "x " + STRIPE}),
            service.request("POST", "/ingest", {"items": [{"content": note,
                                                           "created_at": STRIPE}]}),
            service.request("GET", f"/api/memories/{STRIPE}"),
            service.request("PATCH", f"/api/memories/{STRIPE}", {"content": note}),
            service.request("GET", f"/api/search?q=billing&since={STRIPE}"),
            service.request("POST", "/recall", {"query": "billing", "since": STRIPE}),
        ]
    finally:
        service.stop()
    for status, body in answers:
        shown = json.dumps(body)
        assert "[REDACTED:stripe-key]" in shown, (status, body)
        assert_clean(shown)
    (status, unknown), = [a for a in answers[2:3]]
    assert status == 422 and unknown["field"] == "[REDACTED:stripe-key]", unknown


def test_an_mcp_tool_error_does_not_quote_a_secret_back(tmp_path: Path) -> None:
    """The MCP tools' errors quote what the model sent (`since`, a uid, an argument's name),
    and the model's transcript (and any log of it) keeps the answer: redacted there too."""
    import anyio
    from test_service_support import http_session
    from test_service_support import start_service as start_http

    service = start_http(tmp_path / "mcp")

    async def errors() -> list[str]:
        texts = []
        async with http_session(service.mcp_url) as session:
            for name, args in [("memory_recall", {"query": "billing", "since": STRIPE}),
                               ("memory_store", {"content": "a note", "replaces": STRIPE}),
                               ("memory_forget", {"uid": STRIPE}),
                               ("memory_recall", {"query": "billing", STRIPE: 1})]:
                result = await session.call_tool(name, args)
                assert result.is_error, (name, result.content)
                texts.append(getattr(result.content[0], "text"))
        return texts

    try:
        texts = anyio.run(errors)
    finally:
        service.stop()
    for text in texts:
        assert "[REDACTED:stripe-key]" in text, text
        assert_clean(text)
