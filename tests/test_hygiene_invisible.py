"""Secrets behind invisible characters and compatibility forms: redaction reads the text as a
reader does (the injection block drops every invisible character, a model reads fullwidth and
look-alike letters through), and cuts what it finds out of the text as written, so a zero-width
space inside a token can no longer carry it into the store, the indexes and the agent's prompt.

Provider token prefixes are split from their bodies so that this file does not itself look
like a leaked credential to secret scanners.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from semantic_memory.safety.redaction import redact
from semantic_memory.safety.textnorm import strip_format_chars, visible, visible_origins
from test_core_cli import run
from timing import assert_linear

#: Characters a renderer shows as nothing, each of which used to hide a token from the rules.
SPLITTERS = {
    "zero-width space": "\u200b", "soft hyphen": "\u00ad", "zero-width joiner": "\u200d",
    "word joiner": "\u2060", "variation selector 16": "\ufe0f", "tag letter": "\U000e0041",
    "left-to-right mark": "\u200e", "byte order mark": "\ufeff",
    "combining grapheme joiner": "\u034f",
}
#: (prefix, body): a GitHub token, an AWS access key id, an OpenAI project key.
TOKENS = [("ghp" "_", "K1j2H3g4F5d6S7a8L9k0J1h2G3f4D5s6A7q8"), ("AK" "IA", "Q7WERTYU2IOPASDF"),
          ("sk-" "proj-", "Xq7vB2nM4kL9pR3tW8yZ1aC5dF6gH0jS")]


def pieces(secret: str, size: int = 8) -> list[str]:
    """Every run of `size` characters of `secret`: none may survive redaction."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def leaked(secret: str, text: str) -> list[str]:
    """The pieces of `secret` that a reader of `text` (invisible characters dropped) sees."""
    shown = strip_format_chars(text)
    return [p for p in pieces(secret) if p in shown]


@pytest.mark.parametrize("splitter", SPLITTERS.values(), ids=SPLITTERS.keys())
@pytest.mark.parametrize(("prefix", "body"), TOKENS, ids=lambda v: v[:4])
@pytest.mark.parametrize("where", ["after the prefix", "inside the body"])
def test_an_invisible_character_inside_a_token_does_not_hide_it(
        splitter: str, prefix: str, body: str, where: str) -> None:
    token = (prefix + splitter + body if where == "after the prefix"
             else prefix + body[:6] + splitter + body[6:])
    out = redact(f"ci token {token} for deploys")
    assert out.startswith("ci token [REDACTED:") and out.endswith("] for deploys"), out
    assert not leaked(body, out) and splitter not in out


@pytest.mark.parametrize("text", [
    "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44\uff1d\uff28\uff55\uff4e\uff54\uff45"
    "\uff52\uff12\uff53\uff57\uff4f\uff52\uff44",  # ｐａｓｓｗｏｒｄ＝Ｈｕｎｔｅｒ２ｓｗｏｒｄ
    "pass\u200dword=Hunter2sword",
    "p\u0430ssword=Hunter2sword",  # Cyrillic а
    "PASS\u00adWORD: Hunter2sword",
    "db password is\u3000Hunter2sword",  # an ideographic space
])
def test_a_keyword_spelled_in_other_forms_still_names_a_secret(text: str) -> None:
    out = redact(f"{text} for the staging db")
    assert "[REDACTED:password]" in out and out.endswith(" for the staging db"), out
    assert "Hunter2" not in visible(out)


@pytest.mark.parametrize("splitter", SPLITTERS.values(), ids=SPLITTERS.keys())
def test_an_invisible_character_after_a_token_still_ends_it(splitter: str) -> None:
    """Read as it is seen, `AKIA…<U+200B>more` is one longer word that no rule takes for a
    key; read as written, the key ends at the invisible character: it goes either way."""
    prefix, body = TOKENS[1]
    out = redact(f"aws {prefix}{body}{splitter}more text")
    assert out.startswith("aws [REDACTED:") and out.endswith("more text"), out
    assert not leaked(body, out)


def test_the_text_around_a_secret_stays_as_written() -> None:
    """Only the secret goes: emoji joined by ZWJ, a Persian ZWNJ, Hebrew with its direction
    mark and fullwidth text keep every character."""
    around = ("👩\u200d💻 نامه\u200cها \u200fשלום\u200f ＡＰＩ", " ok ❤\ufe0f")
    prefix, body = TOKENS[0]
    out = redact(f"{around[0]} token {prefix}\u200b{body}{around[1]}")
    assert out == f"{around[0]} token [REDACTED:github-token]{around[1]}"
    assert redact(out) == out  # redacting twice changes nothing


def test_text_without_a_secret_is_returned_as_written() -> None:
    text = "👩\u200d💻 نامه\u200cها \u200fשלום\u200f ＡＰＩ \u00ad soft-hyphenated, fine… ①"
    assert redact(text) is text


def test_each_character_read_comes_from_one_written() -> None:
    text = "a\u200bb\ufb01c\u3000\uff44\u0430x"  # ﬁ reads fi; Cyrillic а beside a Latin x
    assert visible(text) == "abfic dax"
    assert [text[i] for i in visible_origins(text)] == list("ab\ufb01\ufb01c\u3000\uff44\u0430x")


@pytest.mark.parametrize("hostile", [
    "token=" + "A1b2\u200b" * 200_000,  # one long value, an invisible character every 4
    "password=Hunter2\u200bx " * 60_000,  # many secrets, each one spliced back
])
def test_a_hostile_megabyte_with_invisible_characters_is_redacted_in_linear_time(
        hostile: str) -> None:
    assert_linear(redact, hostile)


def test_cli_store_keeps_no_split_secret_in_the_store_the_index_or_the_block(
        tmp_path: Path) -> None:
    """The QA repro: `memory-mcp store` of a token with a zero-width space and a key with a
    soft hyphen, then what the store, its trigram index and `recall --block` hold."""
    db = tmp_path / "split.db"
    (gh, gh_body), (aws, aws_body) = TOKENS[:2]
    for text in (f"ci token {gh}\u200b{gh_body} for deploys",
                 f"aws key {aws}\u00ad{aws_body} for s3"):
        stored = run(db, "store", text, "--json")
        assert stored.returncode == 0 and json.loads(stored.stdout)["status"] == "new", stored
    conn = sqlite3.connect(db)
    dump = "\n".join(conn.iterdump())
    searched = [conn.execute("SELECT count(*) FROM memories_fts_tri WHERE memories_fts_tri "
                             "MATCH ?", (f'"{piece}"',)).fetchone()[0]
                for piece in (gh_body[:10], aws_body[:10])]
    conn.close()
    assert not leaked(gh_body, dump) and not leaked(aws_body, dump)
    assert searched == [0, 0]
    assert "ci token [REDACTED:" in dump and "aws key [REDACTED:" in dump
    block = run(db, "recall", "token key", "--block", "3000")
    assert block.returncode == 0 and block.stdout.count("<memory ") == 2, block
    assert not leaked(gh_body, block.stdout) and not leaked(aws_body, block.stdout)
