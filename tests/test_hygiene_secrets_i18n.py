"""Secrets written in the prose of other languages, and sentences about credentials that hold none.

`tests/corpora/secrets_i18n.jsonl`: a password, key or token given in a sentence of German,
French, Spanish, Portuguese, Italian, Russian, Chinese (simplified and traditional), Japanese,
Korean or Vietnamese, or with the English word in such a sentence ("staging の password は X").
Each row names the substrings that must never be stored (`secrets`) and those that must stay
around them (`keep`). `secrets_i18n_benign.jsonl`: sentences about passwords and keys in the same
languages without a value ("Das Passwort ist zu kurz", "パスワードは8文字以上"), stored unchanged.
Rows whose `set` is `tuned` were written with the rules; `held-out` ones after them, and measured
once before any rule changed for them (16 / 20 kept out, 1 / 15 benign touched; docs/security.md).
The bodies are seeded random fakes written for this project.

Before these rules every format here was stored verbatim (a QA pass by a non-English user found
it): the prose rules knew English words only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from semantic_memory.limits import MAX_TAG_CHARS
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety import redaction
from semantic_memory.safety.redaction import redact
from test_service_support import Service, start_service
from timing import assert_linear

CORPORA = Path(__file__).parent / "corpora"


def _load(name: str) -> list[dict[str, Any]]:
    lines = (CORPORA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


SECRETS = _load("secrets_i18n.jsonl")
BENIGN = [row["text"] for row in _load("secrets_i18n_benign.jsonl")]
LANGUAGES = ("de", "fr", "es", "pt", "it", "ru", "zh", "ja", "ko", "vi")


def leaked(row: dict[str, Any], stored: str) -> list[str]:
    return [s for s in row["secrets"] if s in stored]


def test_the_corpus_covers_every_language() -> None:
    for rows in (SECRETS, _load("secrets_i18n_benign.jsonl")):
        assert {row["lang"] for row in rows} >= set(LANGUAGES)
    assert len({row["id"] for row in SECRETS}) == len(SECRETS)
    assert all(all(s in row["text"] for s in row["secrets"] + row["keep"]) for row in SECRETS)


@pytest.mark.parametrize("row", SECRETS, ids=[row["id"] for row in SECRETS])
def test_a_secret_in_prose_is_redacted_in_place(row: dict[str, Any]) -> None:
    out = redact(row["text"])
    assert not leaked(row, out), out
    assert all(k in out for k in row["keep"]), out  # only the value goes
    assert redact(out) == out


@pytest.mark.parametrize("row", SECRETS, ids=[row["id"] for row in SECRETS])
def test_the_rules_alone_find_it(row: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Prose is the rules' job: a platform without the library's wheel keeps it out too."""
    monkeypatch.setattr(redaction, "_library", lambda: None)
    assert not leaked(row, redact(row["text"]))


@pytest.mark.parametrize("sample", BENIGN)
def test_a_sentence_about_a_credential_stays(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("name", ["secrets_benign.jsonl", "benign_injection.jsonl"])
def test_the_other_benign_corpora_stay_clean(name: str) -> None:
    """The developer notes of both corpora (many in other languages) come out unchanged."""
    touched = [row["text"] for row in _load(name) if redact(row["text"]) != row["text"]]
    assert not touched, touched


@pytest.mark.parametrize("sample,expected", [
    ("Das Datenbankpasswort ist Xk9#mQ2$vL7pR4tZ.",
     "Das Datenbankpasswort ist [REDACTED:password]."),
    ("パスワード：Xk9#mQ2$vL7pR4tZ", "パスワード：[REDACTED:password]"),  # fullwidth colon
    ("密码是Xk9#mQ2$vL7pR4tZ，别外传", "密码是[REDACTED:password]，别外传"),
    ("データベースのパスワードは Xk9#mQ2$vL7pR4tZ です",
     "データベースのパスワードは [REDACTED:password] です"),
    ("비밀번호를 Xk9#mQ2$vL7pR4tZ로 변경했습니다", "비밀번호를 [REDACTED:password]로 변경했습니다"),
    # what follows the value: a note, or more of the sentence
    ("数据库密码是 Xk9#mQ2$vL7pR4tZ #11", "数据库密码是 [REDACTED:password] #11"),
    ("password は Xk9#mQ2$vL7pR4tZ (staging)", "password は [REDACTED:password] (staging)"),
    ("密码是 Xk9#mQ2$vL7pR4tZ 别外传", "密码是 [REDACTED:password] 别外传"),
    ("密钥是 AES256 加密的", "密钥是 AES256 加密的"),
    ("トークンはOAuth2で取得します", "トークンはOAuth2で取得します"),
    # English prose is read as before
    ("The database password is Xk9#mQ2$vL7pR4tZ", "The database password is [REDACTED:password]"),
])
def test_only_the_value_is_replaced(sample: str, expected: str) -> None:
    assert redact(sample) == expected


@pytest.mark.both_stores
def test_ingest_keeps_them_out_of_every_field(engine: MemoryEngine) -> None:
    def memory(row: dict[str, Any]) -> NewMemory:  # the short ones as project and tag too
        short = row["text"] if len(row["text"]) <= MAX_TAG_CHARS else None
        return NewMemory(row["text"], project=short,
                         tags=[f"id:{row['id']}", *([short] if short else [])])

    results = engine.ingest([memory(row) for row in SECRETS], batch_is_session=False)
    assert all(r.status == "new" for r in results), [r.reason for r in results]
    for memory in engine.list(limit=1000):
        stored = "\n".join([memory.content, memory.project or "", *memory.tags])
        row = next(r for r in SECRETS if f"id:{r['id']}" in memory.tags)
        assert not leaked(row, stored), stored
    results = engine.ingest([NewMemory(text) for text in BENIGN], batch_is_session=False)
    assert all(r.status == "new" for r in results)
    assert set(BENIGN) <= {m.content for m in engine.list(limit=1000)}


def test_a_real_service_stores_no_secret_and_every_benign_sentence(tmp_path: Path) -> None:
    svc: Service = start_service(tmp_path)
    try:
        with svc.client() as http:
            uids = {}
            for n, row in enumerate(SECRETS):  # numbered, as a user's notes often are
                answer = http.post("/ingest", json={"content": f"{row['text']} #{n}",
                                                    "project": "i18n"})
                assert answer.status_code == 200 and answer.json()["status"] == "new", answer.text
                uids[row["id"]] = answer.json()["uid"]
            for row in SECRETS:
                stored = http.get(f"/api/memories/{uids[row['id']]}").json()["content"]
                assert not leaked(row, stored) and all(k in stored for k in row["keep"]), stored
            for text in BENIGN:
                answer = http.post("/ingest", json={"content": text, "project": "i18n-benign"})
                stored = http.get(f"/api/memories/{answer.json()['uid']}").json()["content"]
                assert stored == text
    finally:
        svc.stop()


@pytest.mark.parametrize("hostile", [
    "Datenbankpasswort ist " * 50_000,
    "la contraseña " + "de " * 300_000,
    "пароль от " * 100_000,
    "Zugangsdaten " * 80_000,
    ("password for " * 8_000 + ": ") * 10,
    "パスワードは" * 150_000,
    "トークンを" * 150_000,
    "密码是" + "a!" * 500_000,
    "password は " + "a" * 1_000_000 + "に",
    "パスワード（" * 150_000,
])
def test_a_hostile_megabyte_is_redacted_in_linear_time(hostile: str) -> None:
    assert_linear(redact, hostile)
