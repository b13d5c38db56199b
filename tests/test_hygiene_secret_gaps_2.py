"""A second security QA pass on the redaction rules: gaps and false positives.

It found: the login/credentials pair rule reading across a line break and taking a YAML key for
the user (`uses: docker/login-action@v3` under a `Login` step redacted); the value a
secret-fetching command prints alone on the next line (`terraform output -raw`, `vault read
-field=`, `op read`, `kubectl get secret … | base64 -d`) stored; XML elements and attributes
(`<password>`, `<add key="SmtpPassword" value=…/>`), "password X" mid-sentence with a short
generated value, Laravel's `APP_KEY=base64:…`, a key block whose BEGIN line was cut off, and
the password word in Polish, Dutch, Turkish, Greek, Hebrew, Arabic and Hindi stored; and docs
placeholders (`ghp_xxxx…`, `sk-...your key here...`, `user:password@localhost`) damaged. The
corpus rows for the same rules are appended to tests/corpora/ (run by
test_hygiene_secret_corpus.py and test_hygiene_secrets_i18n.py). Values are seeded random
fakes written for this file, not the QA's strings.
"""

from __future__ import annotations

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.safety import redaction
from semantic_memory.safety.redaction import redact
from timing import assert_linear

LONG = "9jYg7SjjPvttfbfMLZuPjII4OoaQmzBinnpy3MPN"  # a generated 40-character value
MID = "ZEPFqzi0OZUrNsPqPdQ1Og7Y"
SHORT = ("ujyN2F3%u1uU", "iUduMzTISP#2", "jU&yLPCL6YSx", "gN@568up1awl", "6403*kjddCeW",
         "Egzp7cD!XIuK", "IrT3Xa7PB!H0", "og6%cDlyf6kc")
KEY_LINES = ("xt5VIlrBkEOcuEzLg/xno4Itx4snLr4w0WbnCBS87zapeoJegg4fdF1OVcJmKfI6",
             "3lTLFgmozMBcD7vdmttAAGcxkkO411BjcAfz2bHLnt+Ge4NwME7Wvx6kuGpsYtfX",
             "N2tAPT8aTPrZT2Z1zeexHbV1XMTp5JKkW6ryWEWlS3EgTuWg6nvx6m+J62R3p8iT")


def gone(sample: str, *secrets: str) -> str:
    out = redact(sample)
    assert not [s for s in secrets if s in out], out
    assert redact(out) == out  # a second pass changes nothing
    return out


# --- F4: the login/credentials pair stays on its line, and a `key:` is no user ---------------

@pytest.mark.parametrize("sample", [
    "- name: Login\n  uses: docker/login-action@v3\n  with:\n    username: ci-bot",
    "credentials:\n  provider: aws-v2\n  region: eu-central-1",
    "aws:\n  credentials:\n    profile: staging-2026",
    "## Login\nsee: docs/auth-v3.md",
    "Login with: gitlab/oauth2",
    "creds from: vault/kv2",
    "logins are: sso/okta2 only",
])
def test_yaml_and_markdown_around_login_words_stay(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("sample,secret", [
    (f"login is admin / {SHORT[0]}", SHORT[0]),
    (f"creds: deploy:{SHORT[1]}", SHORT[1]),
    (f"Grafana credentials are admin/{SHORT[2]}", SHORT[2]),
    (f"Zugangsdaten für Grafana: admin / {SHORT[3]}", SHORT[3]),
    (f"- name: Login\n  uses: docker/login-action@v3\n  with:\n    password: {SHORT[4]}",
     SHORT[4]),
])
def test_the_login_pair_still_goes(sample: str, secret: str) -> None:
    out = gone(sample, secret)
    assert "login-action@v3" in out or "login-action" not in sample


# --- F5: a command that prints a secret, then the value alone ---------------------------------

@pytest.mark.parametrize("command", [
    "terraform output -raw db_admin_password",
    "$ terraform output -raw stripe_api_key",
    "$ vault read -field=password database/creds/app",
    "vault kv get -mount=secret -field=api_token payments",
    "$ op read op://prod/postgres/password",
    "$ kubectl get secret db-creds -o jsonpath='{.data.password}' | base64 -d",
    "aws secretsmanager get-secret-value --secret-id prod/db --query SecretString --output text",
    "aws ssm get-parameter --name /prod/db/pass --with-decryption --query Parameter.Value",
    "$ gcloud secrets versions access latest --secret=smtp",
    "az keyvault secret show --vault-name kv1 --name smtp --query value -o tsv",
    "doppler secrets get SMTP --plain",
    "security find-generic-password -s github -w",
    "heroku config:get SENDGRID_API_KEY -a shop",
])
@pytest.mark.parametrize("value", [LONG, SHORT[5]])
def test_the_value_a_secret_fetching_command_prints_goes(command: str, value: str) -> None:
    out = gone(f"{command}\n{value}\n$ ls", value)
    assert out.endswith("[REDACTED:secret]\n$ ls"), out


@pytest.mark.parametrize("sample", [
    "terraform output -raw db_endpoint\nacme-prod.c9x2kq1.eu-west-1.rds.amazonaws.com",
    f"terraform output -raw vpc_id\nvpc-{MID[:17].lower()}",
    "vault read -field=lease_duration database/creds/app\n2764800s",
    "vault kv get -field=username secret/app\ndeploy-bot",
    "$ kubectl get secret db-creds\nNAME       TYPE     DATA   AGE",
    "$ op read op://prod/postgres/username\npostgres",
    "$ echo $TOKEN_URL\nhttps://auth.acme.io/oauth2/token",
])
def test_what_such_a_command_prints_that_is_no_secret_stays(sample: str) -> None:
    assert redact(sample) == sample


# --- F6: XML, "password X" mid-sentence, an encoding prefix, a key without its head ------------

@pytest.mark.parametrize("sample,secret", [
    (f"<server>\n  <id>nexus</id>\n  <password>{SHORT[6]}</password>\n</server>", SHORT[6]),
    (f"<secret>{SHORT[7]}</secret>", SHORT[7]),
    (f"<apiKey>{MID}</apiKey>", MID),
    (f'<add key="SmtpPassword" value="{SHORT[0]}" />', SHORT[0]),
    (f'<property name="spring.datasource.password" value="{SHORT[1]}"/>', SHORT[1]),
    (f'<entry key="api.token">{SHORT[2]}</entry>', SHORT[2]),
    (f'<add key="ClientSecret" value="{SHORT[3]}"/>', SHORT[3]),
])
def test_xml_credentials_go(sample: str, secret: str) -> None:
    out = gone(sample, secret)
    assert out.count("[REDACTED:") == 1 and out.startswith(sample[:5]), out


@pytest.mark.parametrize("sample", [
    "<password>${env.NEXUS_PASSWORD}</password>",
    "<password>{DESede}</password>",
    "<tokenType>Bearer</tokenType>",
    "<password>stored in the vault</password>",
    "<title>Reset your password</title>",
    '<add key="PasswordMinLength" value="12"/>',
    '<entry key="token.ttl">3600</entry>',
    '<add key="ApiKeyHeader" value="X-Api-Key"/>',
])
def test_xml_that_holds_no_credential_stays(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("sample,secret", [
    (f"ssh root@10.0.0.9 (password {SHORT[4]})", SHORT[4]),
    (f"the NAS root password {SHORT[5]} works again", SHORT[5]),
    (f"use password {SHORT[6]} for the root account", SHORT[6]),
    (f"log in with password '{SHORT[7]}' and change it", SHORT[7]),
])
def test_password_then_a_short_generated_value_goes(sample: str, secret: str) -> None:
    gone(sample, secret)


@pytest.mark.parametrize("sample", [
    "the password reset flow lives in auth/reset.py",
    "ship the password-protected zip to legal",
    "rotate the password bcrypt(12) hashes first",
    "the password field accepts UTF-8 now",
    "a password v2 policy draft",
])
def test_password_then_words_stays(sample: str) -> None:
    assert redact(sample) == sample


def test_a_key_after_an_encoding_prefix_goes() -> None:
    app_key = "7EyVmLfqrK/1zmFelnSWt2MvK3uolnEqWVfCJJZ2+34="
    out = gone(f"APP_NAME=shop\nAPP_KEY=base64:{app_key}\nAPP_ENV=prod", app_key)
    assert "APP_NAME=shop" in out and "APP_ENV=prod" in out


@pytest.mark.parametrize("head", ["", "...(log cut)\n", "  key: "])
def test_a_key_block_without_its_begin_line_goes(head: str) -> None:
    body = "\n".join(KEY_LINES)
    out = gone(f"{head}{body}\n-----END RSA PRIVATE KEY-----\n(the tail of the key in the log)",
               *KEY_LINES)
    assert out.endswith("[REDACTED:private-key]\n(the tail of the key in the log)"), out


@pytest.mark.parametrize("sample", [
    "\n".join(KEY_LINES) + "\n-----END CERTIFICATE-----",
    "\n".join(KEY_LINES) + "\n-----END PUBLIC KEY-----",
    "\n".join(KEY_LINES) + "\nsee the private key docs",
])
def test_base64_lines_before_no_private_key_end_stay(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("sample,secret", [
    (f"hasło do bazy: {SHORT[0]}", SHORT[0]),
    (f"hasło jest {SHORT[1]}", SHORT[1]),
    (f"Het databasewachtwoord is {SHORT[2]}", SHORT[2]),
    (f"Wachtwoord van de NAS: {SHORT[3]}", SHORT[3]),
    (f"Veritabanı şifresi: {SHORT[4]}", SHORT[4]),
    (f"ο κωδικός πρόσβασης είναι {SHORT[5]}", SHORT[5]),
    (f"το συνθηματικό: {SHORT[6]}", SHORT[6]),
    (f"הסיסמה היא {SHORT[7]}", SHORT[7]),
    (f"סיסמת המנהל: {SHORT[0]}", SHORT[0]),
    (f"كلمة المرور هي {SHORT[1]}", SHORT[1]),
    (f"وكلمة السر: {SHORT[2]}", SHORT[2]),
    (f"पासवर्ड है {SHORT[3]}", SHORT[3]),
    (f"सर्वर का पासवर्ड: {SHORT[4]}", SHORT[4]),
])
def test_the_password_word_in_seven_more_languages(sample: str, secret: str) -> None:
    gone(sample, secret)


@pytest.mark.parametrize("sample", [
    "hasło jest za krótkie", "het wachtwoord is te kort", "şifre: en az 8 karakter",
    "το συνθηματικό είναι πολύ μικρό", "הסיסמה היא חזקה", "كلمة المرور هي قصيرة",
    "पासवर्ड है बहुत लंबा", "the password for the NAS is down: see the runbook",
])
def test_sentences_about_a_password_without_one_stay(sample: str) -> None:
    assert redact(sample) == sample


# --- F7: docs placeholders stay --------------------------------------------------------------

@pytest.mark.parametrize("sample", [
    "GitHub docs: ghp_" + "x" * 36 + " is a placeholder",
    "set GITLAB_TOKEN=glpat-" + "X" * 20,
    "OPENAI_API_KEY=sk-...your key here...",
    "ANTHROPIC_API_KEY=sk-ant-... (from the console)",
    "DATABASE_URL=postgres://user:password@localhost:5432/mydb",
    "REDIS_URL=redis://:secret@localhost:6379/0",
    "amqp://guest:${RABBIT_PASSWORD}@mq:5672/",
    # a URL masked already (how a store's error line prints it, in MCP as in REST)
    "postgresql://postgres:***@/team?host=/tmp/pg is unavailable: connection refused",
    "mysql://root:****@db:3306/app",
])
def test_documented_placeholders_stay(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("sample,secret", [
    (f"postgres://app:{SHORT[5]}@db:5432/prod", SHORT[5]),
    (f"postgres://app:%40{SHORT[6][1:]}@db/prod", SHORT[6][1:]),  # a percent-encoded password
    (f"the real one: ghp_{LONG[:36]}", LONG[:36]),
    (f"OPENAI_API_KEY=sk-proj-{MID}...", MID),  # a real token shortened is still one
])
def test_real_values_next_to_placeholder_shapes_still_go(sample: str, secret: str) -> None:
    gone(sample, secret)


# --- every rule stays linear; the real ingest path ------------------------------------------

@pytest.mark.parametrize("hostile", [
    ("~ " + KEY_LINES[0] + "\n") * 14_000 + "-----END PRIVATE KEY-----",
    ("# " + KEY_LINES[0] + "\n" + KEY_LINES[1] + "\n-----END PRIVATE KEY-----\n") * 6_000,
    (KEY_LINES[0] + "\n") * 15_000 + "-----END CERTIFICATE----- private key",
    ("terraform output -raw db_password\n" + LONG + "\n") * 20_000,
    "vault read " + "-field=token " * 80_000 + "\n" + LONG,
    "<password>" * 100_000 + "x",
    '<add key="password" ' * 50_000 + "value=",
    "login " * 150_000 + "is admin",
    "password " * 120_000 + SHORT[0],
    "hasło " * 150_000 + ": x",
])
def test_a_hostile_megabyte_stays_linear(hostile: str) -> None:
    assert_linear(redact, hostile)


def test_the_rules_hold_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "_library", lambda: None)
    gone(f"$ op read op://prod/db/password\n{SHORT[0]}", SHORT[0])
    gone(f"<password>{SHORT[1]}</password>", SHORT[1])
    assert redact("Login with: gitlab/oauth2") == "Login with: gitlab/oauth2"


def test_stored_through_the_engine_on_a_real_sqlite_file(tmp_path) -> None:  # noqa: ANN001
    """What `MemoryEngine.ingest` stores (content and tags) on a real SQLite file."""
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), device="cpu"))
    try:
        texts = [f"terraform output -raw db_admin_password\n{LONG}",
                 f"Maven settings: <password>{SHORT[2]}</password> for nexus",
                 "- name: Login\n  uses: docker/login-action@v3\n  with:\n    username: ci-bot",
                 "GitHub docs: ghp_" + "x" * 36 + " is a placeholder"]
        engine.ingest([NewMemory(t, project="acme", tags=[f"note-{i}"])
                       for i, t in enumerate(texts)], batch_is_session=False)
        raw = (tmp_path / "m.db").read_bytes()
        wal = tmp_path / "m.db-wal"
        raw += wal.read_bytes() if wal.exists() else b""
        assert LONG.encode() not in raw and SHORT[2].encode() not in raw
        assert b"uses: docker/login-action@v3" in raw
        assert ("ghp_" + "x" * 36).encode() in raw
    finally:
        engine.close()
