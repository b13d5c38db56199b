"""Secret redaction: one corpus sample (at least) per rule, and prose that must stay intact.

Provider token prefixes are split across string literals ("sk_" "live_") so that this file
does not itself look like a leaked credential to secret scanners.
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

import pytest
from semantic_memory.safety import redaction
from semantic_memory.safety.redaction import RULES, redact
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine
from timing import assert_linear

pytestmark = pytest.mark.both_stores
CORPUS = Path(__file__).parent / "corpora" / "secrets.jsonl"

A24 = "aB3dE5gH7jK9mN1pQ3sT5vW7"  # a random-looking body
# 40 characters, random: AWS's documented sample (`…EXAMPLEKEY`) is left alone on purpose
AWS_SECRET = "odJFCrnl2edlBDdz1C5Jau2RJtBRnlWmTSHf6pWk"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4"

#: (sample, kind, a fragment that must not survive)
SECRETS: list[tuple[str, str, str]] = [
    # private keys: complete, truncated, PGP, JSON-escaped
    (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
     "private-key", "MIIEvQ"),
    (f"key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n\nrotated since", "private-key",
     "VJTUt9"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOYBF0abcdefghijklmnopqrstuv"
     "wxyz0123\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----", "private-key", "lQOYBF0"),
    ('{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n'
     '-----END PRIVATE KEY-----\\n"}', "private-key", "MIIEvQ"),
    ("private_key = 'c2VjcmV0a2V5bWF0ZXJpYWw'", "private-key", "c2VjcmV0"),
    # AWS
    ("aws " "AKIA" "ABCDEFGHIJKLMNOP in the config", "aws-access-key-id", "ABCDEFGHIJKLMNOP"),
    (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "aws-secret-key", "odJFCrnl2"),
    (f"[default]\naws_secret_access_key = {AWS_SECRET}", "aws-secret-key", "odJFCrnl2"),
    (f'"SecretAccessKey": "{AWS_SECRET}"', "aws-secret-key", "odJFCrnl2"),
    # provider tokens
    ("token " "ghp_" "abcdefghijklmnopqrstuvwxyz0123456789", "github-token", "abcdefghijkl"),
    ("github_" "pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789", "github-token", "11ABCD"),
    ("CI_TOKEN=glpat" "-xxYYzz0123456789abcdEF", "gitlab-token", "xxYYzz"),
    ("//registry.npmjs.org/:_authToken=npm" "_abcdefghijklmnopqrstuvwxyz0123456789",
     "npm-token", "abcdefghijkl"),
    (f"STRIPE_KEY=sk_" f"live_{A24}", "stripe-key", A24),
    (f"restricted rk_" f"live_{A24}", "stripe-key", A24),
    ("maps key AI" "zaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "google-api-key", "SyDdI0hCZ"),
    ("SLACK_BOT=xoxb" "-123456789012-abcdefghijkl", "slack-token", "123456789012"),
    ("https://hooks.slack.com/services/" "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
     "slack-webhook", "T00000000"),
    ("twilio SK" "0123456789abcdef0123456789abcdef", "twilio-api-key", "0123456789abcdef"),
    ("SENDGRID=SG" ".abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
     "sendgrid-key", "abcdefghijklmnopqrstuv"),
    ("HF_TOKEN=hf" "_abcdefghijklmnopqrstuvwxyzABCDEFGH", "huggingface-token", "abcdefghijkl"),
    ("ANTHROPIC_API_KEY=sk-ant" "-api03-abcdefghijklmnopqrstuvwxyz", "anthropic-key", "api03"),
    ("export OPENAI_API_KEY=sk-proj" "-abcdefghijklmnopqrstuvwxyz123456", "openai-key",
     "abcdefghijkl"),
    ("cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9P",
     "jwt", "dozjgNryP4J3"),
    # headers
    ("curl -H 'Authorization: Bearer abc.def.ghi-very-secret'", "bearer-token", "very-secret"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "basic-auth", "dXNlcjpw"),
    # ... in a Python f-string or a JS template literal
    ("headers = {'Authorization': f'Bearer 3c7cc76d9e2a4f18b0d5c6e7a8b9f0e1'}", "bearer-token",
     "3c7cc76d"),
    ("const res = await fetch(url, {headers: {Authorization: `Bearer 4e8d2f1a9b7c6e5d4c3b2a1f`}})",
     "bearer-token", "4e8d2f1a"),
    ("requests.get(url, headers={'X-Api-Key': f'7c9e6679f4a1b2c3d4e5'})", "api-key", "7c9e6679"),
    # credentials in URLs
    ("DATABASE_URL=postgres://app:s3cr3tpw@db/prod", "db-url-password", "s3cr3tpw"),
    ("mysql://root:rootpw99@localhost:3306/app", "db-url-password", "rootpw99"),
    ("mongodb+srv://admin:pa55word@cluster0.mongodb.net/test", "db-url-password", "pa55word"),
    ("REDIS_URL=redis://:redispass1@cache:6379/0", "db-url-password", "redispass1"),
    ("amqp://guest:guestpw1@rabbit:5672/", "db-url-password", "guestpw1"),
    ("postgresql+psycopg://u:p%40ss@h/db", "db-url-password", "p%40ss"),
    ("git clone https://deploy:ghpass123@git.example.com/repo.git", "url-password", "ghpass123"),
    # assignments: env, ini, YAML, JSON, quoted, CLI
    ("DB_PASSWORD=hunter2", "password", "hunter2"),
    ("db password: hunter2hunter2", "password", "hunter2"),
    ("password = S3cr3t!pass", "password", "S3cr3t"),
    ('{"password": "correct horse battery staple"}', "password", "horse"),
    ("password: 'S3cr3t!pass'", "password", "S3cr3t"),
    ("db:\n  password: hunter\n  host: db", "password", "hunter"),
    ("mysql -u root --password hunter22 -h db", "password", "hunter22"),
    ("psql --password=pg-Secret9", "password", "pg-Secret9"),
    ("MYSQL_ROOT_PWD=r00tr00t", "password", "r00tr00t"),
    # a name that contains `pass` (in any language), whatever the value holds: `#` and `$` keep
    # a value from the keyword + entropy rule
    ("MYPASS=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("export SMTPPASS='r7#Lq2$wN'", "password", "r7#Lq2"),
    ("DB_PASSWORT=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("passwort = Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("KENNWORT=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("mot_de_passe=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("DB_CONTRASENA=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("SENHA_BANCO=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("пароль=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("deploy --mypass=Xk9#mQ2$vL7pR4tZ", "password", "Xk9#mQ2"),
    ("client_secret: 9f8e7d6c5b4a", "secret", "9f8e7d6c5b4a"),
    ("SECRET_KEY = 'django-insecure-abc123'", "secret", "django-insecure"),
    ('SECRET_KEY = r"k7#P2x!v9@Lq$W4m^zR8&nT1"', "secret", "k7#P2x"),  # a raw string literal
    ("token = Qx7vB2mN9kL4pR8sT1wY6zA3cD5fG0hJ2kL7mN9p", "token", "Qx7vB2mN"),  # not code
    ("app --token=foo", "token", "foo"),
    ("TWILIO_AUTH_TOKEN=0123456789abcdef0123456789abcdef", "token", "0123456789abcdef"),
    ("access_token: ya29.a0AfH6SMBx", "token", "ya29"),
    ("x-api-key: 7c9e6679f4a1", "api-key", "7c9e6679"),
    ("apikey=Zm9vYmFyYmF6", "api-key", "Zm9vYmFy"),
    ("deploy --api-key k3yk3yk3y99", "api-key", "k3yk3y"),
    # prose with neither verb nor separator: only a generated-looking value
    ("the aws secret Qx7vB2mN9kL4pR8sT1wY6zA3cD5fG0hJ2kL7mN9p for the backup bucket", "secret",
     "Qx7vB2mN9kL4"),
    ("staging deploy token 9fKqZ2mX7vB4nR8sL1wP3yT6, rotate monthly", "secret", "9fKqZ2mX"),
    ("I used aws configure with secret key 7yOh3FZ9kQ2mX8vB4nR1sL6wP3yT0zA5cD7fG9hJ for staging",
     "secret", "7yOh3FZ9"),
]

#: Prose and code that mention secrets without containing one: stored unchanged.
BENIGN = [
    "the password reset flow lives in auth/reset.py",
    "token budget is 2000",
    "set api_key in the settings page",
    "password: stored in the vault, ask ops",
    "token: see below",
    "api_key: <your-key>",
    "export GITHUB_TOKEN=$GITHUB_TOKEN",
    'PASSWORD="${DB_PASSWORD}"',
    "max_tokens=4096 for the summariser",
    "def connect(password: str, token: Optional[str] = None) -> Conn:",
    "client = Client(api_key=api_key, password=self.password)",
    "token = os.environ['GITHUB_TOKEN']",
    "AUTH_PASSWORD_VALIDATORS = [",
    "private_key: ~/.ssh/id_rsa",
    "use the --password flag to be prompted",
    "use the --password flag.",
    "password: changeme",
    "secret: true",
    "the tokenizer splits on whitespace",
    "secrets are loaded from AWS Secrets Manager",
    "Secret rotation runs weekly (see ops/rotate.sh)",
    "token_url: https://auth.example.com/oauth/token",
    "see https://docs.python.org/3/library/secrets.html",
    "postgres://localhost:5432/app has no credentials in dev",
    "redis://cache:6379/0",
    "ssh://git@github.com:22/org/repo.git",
    "Authorization: Bearer $TOKEN is added by the client",
    "the JWT is validated in middleware/auth.py",
    "AKIA prefix marks long-lived AWS access keys",
    "sk-learn is scikit-learn's nickname",
    "password_min_length: 12",
    "token_ttl=3600",
    "the -p flag sets the port",
    "mysql -u root -p",
    "PGPASSWORD is read by psql if set",
    "hash the password with bcrypt before storing it",
    "DB_PASSWORD_FILE=/run/secrets/db_password",
    "api-key header is required for /v2 endpoints",
    "the login form posts username and password to /session",
    "-----BEGIN CERTIFICATE----- blocks are public, fine to keep",
    "ghp_ tokens are rejected by the new org policy",
    "git log --author=alice --since=2.weeks",
    "the secret sauce is the RRF fusion",
    "Password: ********",
    "api_key: xxxxxxxx",
    "the api key ListObjectsV2Permission is required",
    "token validation happens in middleware/auth.py",
    "secret rotation runs through scripts/rotate_secrets.py",
    "the access key AwsAccessKeyIdentifier is read from the profile",
    # code: a keyword or a call is where a value comes from, not the value
    "const token = await getToken();",
    "token = await session.refresh()",
    "const secret = new TextEncoder().encode(process.env.JWT_SECRET);",
    "const token = yield call(fetchToken);",
    "let token = try await client.refreshToken()",
    "return { token: undefined, expiresAt: 0 };",
    "const token = getToken();",
    "the token fix landed in 3f2a9c1b7d4e5f60718293a4b5c6d7e8f9012345",
    # names that hold `pass` without naming a password, or a value that is none
    "bypass=cache",
    "BYPASS_PROXY=internal.corp",
    "compass=north-east",
    "trespass: field7",
    "passenger_count=3",
    "PASS_THROUGH=true",
    "first_pass = tokenize(x)",
    "passes=3",
]


@pytest.mark.parametrize("sample,kind,leak", SECRETS,
                         ids=[f"{kind}-{i}" for i, (_, kind, _) in enumerate(SECRETS)])
def test_secret_is_redacted_with_its_kind(sample: str, kind: str, leak: str) -> None:
    out = redact(sample)
    assert f"[REDACTED:{kind}]" in out, out
    assert leak not in out, out
    assert out.count("[REDACTED:") == 1, out  # one secret, one marker: no double redaction


def test_every_rule_has_a_corpus_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rule's kind shows up redacting this file's samples or tests/corpora/secrets.jsonl
    with the rules alone (the library off)."""
    monkeypatch.setattr(redaction, "_library", lambda: None)
    corpus = [json.loads(line)["text"] for line in CORPUS.read_text().splitlines() if line]
    seen = {m for text in [s for s, _, _ in SECRETS] + corpus
            for m in re.findall(r"\[REDACTED:([\w.-]+)\]", redact(text))}
    assert {r.kind for r in RULES} <= seen


@pytest.mark.parametrize("sample", BENIGN)
def test_prose_and_code_are_left_alone(sample: str) -> None:
    assert redact(sample) == sample


@pytest.mark.parametrize("sample,expected", [
    ("DATABASE_URL=postgres://app:s3cr3t@db/prod",
     "DATABASE_URL=postgres://app:[REDACTED:db-url-password]@db/prod"),
    ('{"user": "app", "password": "p4ss word", "port": 5432}',
     '{"user": "app", "password": "[REDACTED:password]", "port": 5432}'),
    ("mysql --password hunter22 -h db", "mysql --password [REDACTED:password] -h db"),
    ("f(password=hunter2)", "f(password=[REDACTED:password])"),
    ("https://hooks.slack.com/services/" "T0/B0/abcdefghijklmnopqrstuvwx",
     "https://hooks.slack.com/services/[REDACTED:slack-webhook]"),
    ("key:\n-----BEGIN PRIVATE KEY-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n\nRotated in May.",
     "key:\n[REDACTED:private-key]\n\nRotated in May."),
    # the sentence goes on past a line break (a wrapped chat message, a pasted note)
    ("the admin password is\nHunter2Secret99", "the admin password is\n[REDACTED:password]"),
    ("the admin password\nis Hunter2Secret99", "the admin password\nis [REDACTED:password]"),
    ("the vpn password was:\n  Hunter2Secret99\nthanks",
     "the vpn password was:\n  [REDACTED:password]\nthanks"),
    ("the password is\nstored in the vault", "the password is\nstored in the vault"),
])
def test_only_the_secret_part_is_replaced(sample: str, expected: str) -> None:
    assert redact(sample) == expected


_RNG = random.Random(20240611)
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _b64(n: int) -> str:
    return "".join(_RNG.choice(_B64) for _ in range(n))


SESSION_TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ" + _b64(850) + "=="
OPENSSH_KEY = base64.b64encode(
    ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(_b64(70) for _ in range(19))
     + "\n-----END OPENSSH PRIVATE KEY-----\n").encode()).decode()  # ~1,800 characters
COOKIE = _b64(1500).replace("+", "-").replace("/", "_")
SIGNING_KEY = base64.b64encode(_b64(3300).encode()).decode()  # 4,400: a PEM, base64 again

#: (text, the secret in it, its kind, text around it that stays)
LONG_SECRETS = [
    (f"export AWS_ACCESS_KEY_ID=ASIA{'Q' * 16}\nexport AWS_SESSION_TOKEN={SESSION_TOKEN}\n"
     "export AWS_REGION=eu-west-1", SESSION_TOKEN, "token", "AWS_REGION=eu-west-1"),
    ("apiVersion: v1\nkind: Secret\ntype: kubernetes.io/ssh-auth\ndata:\n"
     f"  ssh-privatekey: {OPENSSH_KEY}\nmetadata:\n  name: deploy-key",
     OPENSSH_KEY, "private-key", "name: deploy-key"),
    (f'{{"Credentials": {{"AccessKeyId": "ASIA{"Q" * 16}", "SessionToken": "{SESSION_TOKEN}", '
     '"Expiration": "2024-06-11T12:00:00Z"}}', SESSION_TOKEN, "token", '"Expiration"'),
    (f"Cookie: session={COOKIE}; theme=dark", COOKIE, "session-cookie", "theme=dark"),
    (f"the session token {SESSION_TOKEN} expires at noon", SESSION_TOKEN, "secret",
     "expires at noon"),
    (f"JWT_SIGNING_KEY={SIGNING_KEY}\nJWT_TTL=3600", SIGNING_KEY, "generic-secret", "JWT_TTL"),
]


@pytest.mark.parametrize("sample,secret,kind,kept", LONG_SECRETS,
                         ids=[kind for _, _, kind, _ in LONG_SECRETS])
def test_a_long_secret_goes_whole(sample: str, secret: str, kind: str, kept: str) -> None:
    """Whatever its length: a value cut at a length cap left the rest of it in the text."""
    out = redact(sample)
    assert f"[REDACTED:{kind}]" in out and kept in out, out[:200]
    left = [secret[i : i + 12] for i in range(0, len(secret) - 12, 6) if secret[i : i + 12] in out]
    assert not left, f"{len(left)} pieces of the secret are left: {out[:200]}"


def test_a_marker_longer_than_its_secret_never_costs_the_memory(engine: MemoryEngine) -> None:
    tag = "release-" + "a" * 32 + " password=hunter22"  # 58 characters, 69 once redacted
    result = engine.store_one(NewMemory("release checklist", tags=[tag]))
    assert result.status == "new"
    stored = engine.get(result.uid).tags[0]
    assert len(stored) == 64 and " password=[REDACTED:pass" in stored and "hunter" not in stored


def test_every_stored_free_text_field_is_redacted(engine: MemoryEngine) -> None:
    gh = "ghp_" "abcdefghijklmnopqrstuvwxyz0123456789"
    engine.store_one(NewMemory("deploy notes", project="acme api_key=k3yk3yk3y99", tags=[gh]))
    memory = engine.list(limit=1)[0]
    assert memory.project == "acme api_key=[REDACTED:api-key]"
    assert memory.tags == ["[REDACTED:github-token]"]
    # A kind or source is an identifier no marker can stand in: one holding a secret is refused.
    for field in ("kind", "source"):
        refused = engine.store_one(NewMemory("deploy notes again", **{field: gh}))
        assert refused.status == "rejected"
        assert refused.reason == f"{field}: holds a secret; not stored"
    assert engine.count() == 1
    engine.record_injection(uids=[memory.uid], project="x password=hunter22",
                            query="why does postgres://app:pw9secret@db/prod time out")
    report = engine.injections()[0]
    assert report["project"] == "x password=[REDACTED:password]"
    assert "pw9secret" not in report["query"] and "[REDACTED:db-url-password]" in report["query"]


@pytest.mark.parametrize("hostile", [
    "-----BEGIN PRIVATE KEY-----" * 40_000,
    "-----BEGIN PRIVATE KEY-----\n" + "QUJD" * 250_000,
    "password=" * 120_000,
    "password: " + "a " * 500_000,
    "--password " * 100_000,
    "://a:" * 200_000,
    "postgres://" + "a:" * 500_000,
    "token" * 200_000,
    "a" * 1_000_000,
    " " * 1_000_000,
    "eyJ" + "a" * 1_000_000,
    # values without a length cap: one long run, runs that end in punctuation, open quotes
    "token=" + "A1b2" * 250_000,
    "token=" + ".:" * 500_000,
    "token=.: " * 100_000,
    "password: '" + "a" * 1_000_000,
    "password='" * 100_000,
    "Cookie: session=" + "a" * 1_000_000,
    "Authorization: f`Bearer " + "a" * 1_000_000,
    "the secret key " + "aB3" * 333_333 + "é",
    "| api_token | " + "x" * 1_000_000,
    "curl -u ci:" + "a" * 1_000_000,
    "X-Amz-Security-Token=" + "a" * 1_000_000,
    "mysql -p" + "a" * 1_000_000,
])
def test_a_hostile_megabyte_is_redacted_in_linear_time(hostile: str) -> None:
    """Ten times the text costs about ten times the time (a ratio from the same run, with a
    wide margin: the machine is shared), never the quadratic or worse of backtracking."""
    assert_linear(redact, hostile)
