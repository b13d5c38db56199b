"""Secret redaction: a rule table of credential shapes, each replaced by `[REDACTED:<kind>]`.

A rule table rather than a detector library: `detect-secrets` (measured: 0.17 s to import,
~10 ms per 2 KB memory) reports findings rather than spans to cut, misses Google API keys and
flags ordinary prose as high-entropy strings; this table costs ~0.1 ms per 2 KB memory.
Only the secret part of a match is replaced, so `DATABASE_URL=postgres://app:[REDACTED:...]@db`
keeps what is not secret. No regex nests unbounded repetition, so none can backtrack
catastrophically (tests/test_hygiene_secrets.py times hostile megabytes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

MARKER = "[REDACTED:{}]"


@dataclass(frozen=True)
class Rule:
    """One credential shape. The `secret` group is replaced (the whole match when absent). The
    rule runs only if one of `needles` (lowercase) occurs in the text: most memories skip most
    rules for the price of a substring search."""

    kind: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...] = ()
    accept: Callable[[re.Match[str]], bool] | None = None  # extra check on a candidate match


_PEM = r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
# A truncated key's body: base64 lines (or PEM/PGP armor headers), newlines real or escaped.
_B64_LINE = (
    r"(?:\s|\\n){1,8}(?:[A-Za-z0-9+/=]{16,}|(?:Version|Comment|Hash|Proc-Type|DEK-Info): [^\n]*)"
)
_DB_SCHEMES = (
    "postgres|postgresql|mysql|mariadb|mssql|sqlserver|oracle|mongodb|redis|rediss|amqp|amqps"
    "|cockroachdb|clickhouse|couchdb|neo4j|cassandra"
)
_URL_CREDENTIALS = r"://[^\s:/@\"'<>]{0,256}:(?P<secret>[^\s/\"'<>]{1,256})@"
# A quoted value may hold spaces; a bare one ends at whitespace, a quote or a separator, and
# does not end in punctuation (`f(password=pw)`, "use the --password flag.").
_BARE = r"[^\s\"'`,;]{0,255}[^\s\"'`,;.:!?)\]}>]"
_VALUE = rf"(?P<q>[\"'])?(?P<secret>(?(q)[^\"'\n]{{1,256}}|{_BARE}))(?(q)(?P=q))"
# A code identifier (snake_case, UPPER_CASE, camelCase), unlike a token's mixed-case salad.
_IDENT = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[A-Za-z][a-z]+(?:[A-Z][a-z]+)*)"
# Right-hand sides that stand for a credential rather than being one: templates, variables,
# code, types, paths, masks.
_PLACEHOLDER = re.compile(
    r"[<{$%*\[]|~?\.{0,2}/"  # templates, variables, masks, paths
    r"|(?i:xxx|\.\.\.|your[_-]|example|placeholder|changeme|redacted|dummy)"
    r"|(?i:none|null|nil|true|false|yes|no|required|optional|string|str|bytes|int|env|secret"
    r"|password|token|hidden|masked)$"
    rf"|{_IDENT}(?:\.{_IDENT})+$|[\w.]+[(\[]"  # `self.password`, `os.environ[...]`, `get()`
)
# `password=db_password`, `token=accessToken`: a variable holding the credential.
_VARIABLE = re.compile(r"(?:[a-z]\w*_|[a-z]+[A-Z])\w*")
_KEYWORD = re.compile(r"(?i)pass|pwd|secret|token|key")
_PROSE_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# `secret_name`, `token_url`, `password_file` name where a credential is, not the credential.
_NOT_A_CREDENTIAL_NAME = re.compile(
    r"(?i)[_.-](?:name|id|ids|path|file|dir|arn|ref|url|uri|endpoint|env|type|kind|length|len"
    r"|count|limit|budget|size|ttl|timeout|expiry|expires|header|field|prompt|policy|rotation"
    r"|manager|store|provider|backend|hint|reset|strength|min|max|version|source|var)$"
)
_FIELD_END = re.compile(r"\s*(?:$|[\n`'\"|;&)\]},]|-{1,2}\w)")


def _is_value(m: re.Match[str]) -> bool:
    """Whether an assignment's right-hand side looks like a credential, not prose, code or a
    placeholder: `password: hunter2x` yes; `password: stored in vault`, `token=$TOKEN`,
    `api_key: <your-key>`, `api_key=api_key`, `token_budget=2000` no."""
    value = m.group("secret")
    if (
        len(value) < 3
        or not re.search(r"[^\W\d_]", value)  # no letter: a count, a port, a size
        or _PLACEHOLDER.match(value)
        or (_VARIABLE.fullmatch(value) and _KEYWORD.search(value))
        or _NOT_A_CREDENTIAL_NAME.search(m.group("name"))
    ):
        return False
    loose = m.group("q") is None and "=" not in m.group("sep")  # `name: value`, `--name value`
    if loose and _PROSE_WORD.fullmatch(value):
        # A bare word after a colon is a value only where the field ends ("password: hunter",
        # "--password foo -h db"), not inside a sentence ("password: stored in the vault").
        return bool(_FIELD_END.match(m.string, m.end("secret")))
    return True


def _assignment(name: str, *, cli: bool = False) -> re.Pattern[str]:
    """`NAME=value`, `name = value`, `name: value`, `"name": "value"`, `--name value`."""
    sep = r"(?P<sep>=|\s+)" if cli else r"(?P<sep>[\"']?\s*(?::=|=>|[:=])\s*)"
    prefix = r"--[\w-]{0,30}?" if cli else ""
    return re.compile(rf"(?i){prefix}(?P<name>{name}[\w.-]{{0,40}}?){sep}{_VALUE}")


RULES: tuple[Rule, ...] = (
    # A PEM/PGP key block, or a truncated paste that never reaches its END line.
    Rule("private-key", re.compile(rf"{_PEM}(?:[^-]*{_PEM_END}|(?:{_B64_LINE})*)"),
         ("-----begin",)),
    Rule("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
         ("akia", "asia", "abia", "acca")),
    Rule("aws-secret-key", re.compile(
        r"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"), ("secret",)),
    Rule("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})"),
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("gitlab-token", re.compile(r"\bgl(?:pat|ptt|dt|rt|soat)-[A-Za-z0-9_-]{20,}"), ("gl",)),
    Rule("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36,}"), ("npm_",)),
    Rule("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), ("k_",)),
    Rule("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}"), ("aiza",)),
    Rule("slack-token", re.compile(r"\bxox[abposrce]-[A-Za-z0-9-]{10,}"), ("xox",)),
    Rule("slack-webhook", re.compile(
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9/_-]{20,})"),
        ("hooks.slack.com",)),
    Rule("twilio-api-key", re.compile(r"\bSK[0-9a-fA-F]{32}\b"), ("sk",)),
    Rule("sendgrid-key", re.compile(r"\bSG\.[\w-]{16,}\.[\w-]{16,}"), ("sg.",)),
    Rule("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}"), ("hf_",)),
    Rule("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), ("sk-ant-",)),
    Rule("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), ("sk-",)),
    Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
         ("eyj",)),
    Rule("bearer-token", re.compile(
        r"(?i)\bauthorization\s*[:=]\s*[\"']?bearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
        ("bearer",)),
    Rule("basic-auth", re.compile(
        r"(?i)\bauthorization\s*[:=]\s*[\"']?basic\s+(?P<secret>[A-Za-z0-9+/=]{8,})"),
        ("basic",)),
    Rule("db-url-password",
         re.compile(rf"(?i)\b(?:{_DB_SCHEMES})(?:\+\w+)?{_URL_CREDENTIALS}"), ("://",)),
    Rule("url-password", re.compile(_URL_CREDENTIALS), ("://",)),
    # Assignments come last, so a provider rule above has already named a known token's kind.
    *(Rule(kind, _assignment(name, cli=cli), needles, _is_value)
      for cli in (False, True)
      for kind, name, needles in (
          ("password", r"(?:pass(?:word|wd|phrase)|(?<=[_-])pwd\b)", ("pass", "pwd")),
          ("private-key", r"private[_-]?key", ("private",)),
          ("api-key", r"api[_-]?key", ("api",)),
          ("secret", r"secret(?!s)", ("secret",)),
          ("token", r"token(?!s|iz)", ("token",)),
      )),
)


def redact(text: str) -> str:
    """`text` with every credential the rules know replaced by `[REDACTED:<kind>]`."""
    lowered = text.lower()
    for rule in RULES:
        if rule.needles and not any(needle in lowered for needle in rule.needles):
            continue
        text = rule.pattern.sub(partial(_replace, rule), text)
    return text


def _replace(rule: Rule, m: re.Match[str]) -> str:
    start, end = m.span("secret") if "secret" in m.re.groupindex else m.span()
    if m.string.startswith("[REDACTED:", start) or (rule.accept and not rule.accept(m)):
        return m.group()
    return m.string[m.start() : start] + MARKER.format(rule.kind) + m.string[end : m.end()]
