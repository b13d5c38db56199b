"""Where a secret's value really ends, secrets hidden in base64, documented samples, and a
memory that redaction makes longer than the content limit.

A security QA pass found: the punctuation an unquoted `.env` value ends in (`…pR!!`) or holds
(`abc;def,ghi`) left outside the marker; a generated value cut by a line wrap or a string
concatenation redacted only up to the cut; `echo <base64 of NAME=secret> | base64 -d` stored
as sent; AWS's documented `…EXAMPLE` keys and `"tokenType": "Bearer"` redacted; and a memory
within MEMORY_MAX_CONTENT_CHARS as sent refused because its markers made it longer. The
corpus rows for the same rules (bare provider tokens, CJK without a verb, look-alikes that
stay) are in tests/corpora/ and run by test_hygiene_secret_corpus.py and
test_hygiene_secrets_i18n.py. Values here are seeded random fakes written for this file.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import replace

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety import redaction
from semantic_memory.safety.redaction import redact
from test_service_support import start_service
from timing import assert_linear

TOKEN_A, TOKEN_B = "Vq7Lm2Xr9Tk4Wn8Pz3Hs", "Rb6Jd1Fy5Gc0Qe7Ua2No"  # a value cut in two
B64_LINE = 76  # `base64`'s line width
_RNG = random.Random(20250214)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# --- a bare value runs to the end of its setting ---------------------------------------------

@pytest.mark.parametrize("sample,expected", [
    ("n7 SMTP_PASSWORD=Lw8rT2qZ!!!", "n7 SMTP_PASSWORD=[REDACTED:password]"),
    ("APP_PORT=80\nAPI_TOKEN=Gh5Kx9Qm2Vb.\nAPP_ENV=prod",
     "APP_PORT=80\nAPI_TOKEN=[REDACTED:token]\nAPP_ENV=prod"),
    ("export DB_PASS=c4Nf;x8Rq,Lm2?", "export DB_PASS=[REDACTED:password]"),
    ("services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD=Tz3w;Kp9.",
     "services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD=[REDACTED:password]"),
    ("redis:\n  password: Hq2v;Rx8!\n  port: 6379", "redis:\n  password: [REDACTED:password]\n"
     "  port: 6379"),
    (f"SIGNING_KEY={TOKEN_A}!\r\nNEXT=1", "SIGNING_KEY=[REDACTED:generic-secret]\r\nNEXT=1"),
])
def test_an_env_value_goes_whole_with_its_punctuation(sample: str, expected: str) -> None:
    assert redact(sample) == expected


@pytest.mark.parametrize("sample,expected", [
    # code and prose: the assignment does not start a setting, its punctuation stays
    ("f(password=hunter2)", "f(password=[REDACTED:password])"),
    ("call login(user, password=Pw9xLq2).", "call login(user, password=[REDACTED:password])."),
    ("?user=app&password=Kd8sLq2!", "?user=app&password=[REDACTED:password]!"),
    # a value followed by more words on its line keeps the old reading
    ("DB_PASSWORD=Xk9mQ2vL! then restart", "DB_PASSWORD=[REDACTED:password]! then restart"),
    ("the field is password: Zq8vR2! on staging",
     "the field is password: [REDACTED:password]! on staging"),
    # a closing bracket after the value closes a call
    ("  db_password=Tz3wKp9)", "  db_password=[REDACTED:password])"),
])
def test_a_value_inside_code_or_prose_stops_where_it_did(sample: str, expected: str) -> None:
    assert redact(sample) == expected


# --- a value that goes on past a line wrap or a concatenation --------------------------------

@pytest.mark.parametrize("sample,expected", [
    (f"the deploy token is {TOKEN_A}\n{TOKEN_B}", "the deploy token is [REDACTED:password]"),
    (f"the deploy token is {TOKEN_A}\n  {TOKEN_B}\nthanks",
     "the deploy token is [REDACTED:password]\nthanks"),
    (f"CI_SECRET={TOKEN_A}\n{TOKEN_B}==\nCI_URL=https://ci.acme.io",
     "CI_SECRET=[REDACTED:secret]\nCI_URL=https://ci.acme.io"),
    (f'api_key = "{TOKEN_A}" + "{TOKEN_B}"', 'api_key = "[REDACTED:api-key]"'),
    (f"const secret = '{TOKEN_A}' +\n  '{TOKEN_B}';", "const secret = '[REDACTED:secret]';"),
    (f'SECRET_KEY = (\n    "{TOKEN_A}"\n    "{TOKEN_B}"\n)',
     'SECRET_KEY = (\n    "[REDACTED:secret]"\n)'),
])
def test_a_value_cut_in_pieces_goes_whole(sample: str, expected: str) -> None:
    assert redact(sample) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize("sample,kept", [
    ("the admin password is Hunter2Secret99\nthanks, see you", "\nthanks, see you"),
    (f"the deploy token is {TOKEN_A}\nCHANGELOG.md", "\nCHANGELOG.md"),
    (f"the deploy token is {TOKEN_A}\nsee the runbook", "\nsee the runbook"),
    (f"the deploy token is {TOKEN_A}\n2024-06-11T12:00:00Z", "\n2024-06-11T12:00:00Z"),
    (f'api_key = "{TOKEN_A}" + " for the staging tenant"', ' + " for the staging tenant"'),
    (f'api_key = "{TOKEN_A}", "{TOKEN_B}"', f', "{TOKEN_B}"'),  # a second argument
])
def test_a_following_line_or_literal_that_is_no_token_stays(sample: str, kept: str) -> None:
    out = redact(sample)
    assert "[REDACTED:" in out and TOKEN_A not in out and kept in out, out


# --- base64 ------------------------------------------------------------------------------------

ENV_FILE = "DB_HOST=db.internal\nDB_USER=app\nDB_NAME=orders\nDB_PASSWORD=Zq8vR2mLx7Tq9Kp3Wn\n"


@pytest.mark.parametrize("sample,encoded", [
    (f"echo {b64('PASSWORD=Zq8vR2mLx7Tq9K')} | base64 -d", b64("PASSWORD=Zq8vR2mLx7Tq9K")),
    (f"echo {b64('TOKEN=Rb6Jd1Fy5Gc0Qe7U').rstrip('=')} | base64 -d",
     b64("TOKEN=Rb6Jd1Fy5Gc0Qe7U").rstrip("=")),  # `base64 -w0 | tr -d =`
    (f"data:\n  app.env: {b64(ENV_FILE)}\nkind: Secret", b64(ENV_FILE)),
    (f"$ base64 .env\n{base64.encodebytes(ENV_FILE.encode()).decode()}$ ", "\n".join(
        base64.encodebytes(ENV_FILE.encode()).decode().split())),  # wrapped at 76
    (f"blob: {b64('[default]' + chr(10) + 'aws_secret_access_key = ' + TOKEN_A * 2)}",
     b64("[default]\naws_secret_access_key = " + TOKEN_A * 2)),
])
def test_base64_of_a_secret_is_redacted(sample: str, encoded: str) -> None:
    out = redact(sample)
    assert "[REDACTED:base64-secret]" in out, out
    assert not [line for line in encoded.split("\n") if line in out], out
    assert redact(out) == out


@pytest.mark.parametrize("sample", [
    f"echo {b64('hello from the build machine, nothing secret here')} | base64 -d",
    f"the config blob {b64('LOG_LEVEL=info' + chr(10) + 'PORT=8080' + chr(10))} is harmless",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb7x9kLmQ2vR8tY4uI0oP3aS6dF1gH5jK9lZ2xC7vB3 me@laptop",
    "integrity sha512-Q2hlY2sgdGhlIGxvY2tmaWxlIGZvciB0aGlzIGludGVncml0eSBoYXNo+bm90aGluZw==",
    "icon: data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAYAAAAf8/9hAAAAGElEQVR42mNk",
    f"a 2 KB run of A's: {'A' * 2048}",
])
def test_base64_of_anything_else_stays(sample: str) -> None:
    assert redact(sample) == sample


def test_base64_is_decoded_once_not_recursively() -> None:
    """A run inside a decoded text is not decoded again: the cost stays one pass."""
    inner = b64("PASSWORD=Zq8vR2mLx7Tq9K")
    outer = b64(f"note: {inner}")
    assert redact(f"blob {outer}") == f"blob {outer}"


# --- documented samples and names that say what a value is like ----------------------------

@pytest.mark.parametrize("sample", [
    "the SDK guide's pair: AKIAI44QH8DHBEXAMPLE / je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
    "export AWS_ACCESS_KEY_ID=ASIAJEXAMPLEXEG2JICEA",
    '{"tokenType": "Bearer", "expires_in": 3599}',
    'headers = {"authScheme": "Basic"}; tokenFormat = "jwt"',
    "passwordPolicy: strict-mode-v2\ntokenEndpoint: /oauth2/v2.0/token",
    "secretRef: db-creds-7f9c2a1b8d, apiKeyHeader: X-Api-Key-3a9f",
])
def test_documented_samples_and_descriptive_names_stay(sample: str) -> None:
    assert redact(sample) == sample


def test_a_real_key_next_to_a_sample_still_goes() -> None:
    out = redact("sample AKIAI44QH8DHBEXAMPLE, ours AKIA" "Q7WERT2YUI4OPAS6 (rotate)")
    assert out == "sample AKIAI44QH8DHBEXAMPLE, ours [REDACTED:aws-access-key-id] (rotate)"


# --- the rules read each text in linear time -------------------------------------------------

@pytest.mark.parametrize("hostile", [
    "password=ab;" * 80_000,
    "password=ab; " * 80_000,
    "DB_PASSWORD=ab;" * 80_000 + " x",
    "x password=ab!" * 70_000,
    f"the token is {TOKEN_A}\n" * 40_000,
    f"the token is {TOKEN_A}" + f"\n{TOKEN_B}" * 50_000,
    f'api_key = "{TOKEN_A}"' + f' + "{TOKEN_B}"' * 40_000,
    'token = "hunter2x" "abcd"' * 40_000,
    "QUJD" * 250_000,
    b64("TOKEN=" + TOKEN_A * 35_000),
    (b64(ENV_FILE)[:B64_LINE] + "\n") * 13_000,
    "密钥 " + f"{TOKEN_A} " * 45_000,
    "このキー" * 200_000,
    ("printenv API_TOKEN\n" + TOKEN_A + "\n") * 40_000,
    # the library's keyword rules cost the square of a run after `TOKEN=` (100 s for 28 KB):
    # it sees the first KB of a run, the rules all of it
    "TOKEN=" + "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(20_000)),
])
def test_a_hostile_megabyte_stays_linear(hostile: str) -> None:
    assert_linear(redact, hostile)


# --- a memory within the limit as sent is not refused for its markers ------------------------

@pytest.mark.both_stores
def test_markers_never_push_a_memory_over_the_limit(settings: Settings) -> None:
    limit = 2_000
    engine = MemoryEngine(replace(settings, max_content_chars=limit))
    try:
        body = ("build log line ok " * 200)[: limit - 23]  # 1,977 characters
        text = body + "\nDB_PASSWORD=Hx7q2Lm9Vt"  # 10 characters become 19
        assert len(text) == limit
        [result] = engine.ingest([NewMemory(text)])
        assert result.status == "new", result.reason
        stored = engine.get(result.uid).content
        assert len(stored) == limit and stored.startswith(body) and "Hx7q2" not in stored
        # a secret in the middle: the markers' extra characters come off the end
        middle = "token=Qx7vB2mL9 " + ("build log line ok " * 200)[: limit - 16]
        assert len(middle) == limit
        [result] = engine.ingest([NewMemory(middle)])
        assert result.status == "new", result.reason
        stored = engine.get(result.uid).content
        assert len(stored) == limit and stored.startswith("token=[REDACTED:token] build log")
        # an edit through the same filters
        edited = engine.update(result.uid, content=text.replace("ok", "OK", 1))
        assert edited.status == "updated", edited.reason
        assert len(engine.get(result.uid).content) == limit
    finally:
        engine.close()


def test_rest_ingest_at_the_limit_is_stored_not_refused(tmp_path) -> None:  # noqa: ANN001
    """The QA's path: REST /ingest on a real service with MEMORY_MAX_CONTENT_CHARS."""
    svc = start_service(tmp_path, MEMORY_MAX_CONTENT_CHARS="5000")
    try:
        text = ("deploy output line " * 300)[:4977] + "\nDB_PASSWORD=Hx7q2Lm9Vt"
        with svc.client() as client:
            answer = client.post("/ingest", json={"content": text})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        result = body["results"][0] if "results" in body else body
        assert result["status"] == "new", body
        assert "filter_ingest" not in answer.text
    finally:
        svc.stop()


def test_without_the_library_the_new_rules_still_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Context rules are the rules' job: a platform without the library's wheel has them."""
    monkeypatch.setattr(redaction, "_library", lambda: None)
    assert redact("n7 SMTP_PASSWORD=Lw8rT2qZ!!!") == "n7 SMTP_PASSWORD=[REDACTED:password]"
    assert "[REDACTED:base64-secret]" in redact(f"echo {b64('PASSWORD=Zq8vR2mLx7Tq9K')}")
    assert redact(f"the deploy token is {TOKEN_A}\n{TOKEN_B}") == (
        "the deploy token is [REDACTED:password]")
