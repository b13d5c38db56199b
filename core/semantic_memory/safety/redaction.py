"""Secret redaction: a maintained ruleset plus the project's own context rules, each secret
replaced in place by `[REDACTED:<kind>]`.

Two layers. The library (`betterleaks`, Betterleaks' ~460 provider rules: registries, chat bots,
SaaS, CI, clouds) finds the long tail of vendor tokens; it reports findings, not spans, so each
finding is mapped back onto the text here (`_library_spans`). The rule table below covers what a
token scanner is not built for: secrets that are secrets only because of their context (CLI
flags and positional arguments, SDK constructors, URL userinfo, key=value connection strings,
prose, auth headers, docker/kube configs, vault-style tables, keyword + entropy assignments),
plus the provider shapes the library misses or names less precisely. docs/security.md has the
measurements behind the choice (detect-secrets, Kingfisher and Betterleaks were compared).
Only the secret part of a match is replaced, so `DATABASE_URL=postgres://app:[REDACTED:...]@db`
keeps what is not secret, but all of it: a value goes to where it really ends (`_to_line_end`,
`_value_end`: an .env value's trailing punctuation, a token cut by a line wrap or a string
concatenation), and a base64 run goes whole when its decoded text holds a secret (last rule).
Both layers read the text as a reader (and the injection block) sees it, NFKC and without
invisible characters (`textnorm.visible`): a zero-width space inside a token hides it from
nobody but a regex. No regex nests unbounded repetition, so none can backtrack catastrophically
(tests/test_hygiene_secrets.py and test_hygiene_secret_gaps.py time hostile megabytes).
"""

from __future__ import annotations

import base64
import codecs
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .textnorm import INVISIBLE_IN_TOKEN, visible, visible_origins

try:
    import resource
except ImportError:  # Windows: no address-space limit to check
    resource = None  # type: ignore[assignment]

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
    also: tuple[str, ...] = ()  # and one of these too (two common words, rarely together)


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
# A string literal may carry a prefix: Python's `f"…"`, `rb'…'`, C#'s `$"…"`, `@"…"`.
_STRING_PREFIX = r"(?:[rRbBuUfF$@]{1,2}(?=[\"'`]))?"
# Where a header value opens: bare, quoted, an f-string or a JS template literal.
_HEADER_OPEN = rf"{_STRING_PREFIX}[\"'`]?"
# A quoted value may hold spaces; a bare one ends at whitespace, a quote or a separator, and
# does not end in punctuation (`f(password=pw)`, "use the --password flag."). Neither has a
# length cap: a capped run stops inside a long token (a 900-character AWS session token, a
# base64 key) and leaves its tail in the text. Unbounded is still linear: the run is one
# character class, and a match consumes it (the only backtracking is off trailing punctuation).
_BARE = r"[^\s\"'`,;]*[^\s\"'`,;.:!?)\]}>]"
# A quoted value may open a parenthesised concatenation (`KEY = (\n "…"\n "…"\n)`).
_VALUE = (rf"(?:\((?=\s*{_STRING_PREFIX}[\"'])\s*)?{_STRING_PREFIX}(?P<q>[\"'])?"
          rf"(?P<secret>(?(q)[^\"'\n]+|{_BARE}))(?(q)(?P=q))")
# A code identifier (snake_case, UPPER_CASE, camelCase), unlike a token's mixed-case salad.
_IDENT = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[A-Za-z][a-z]+(?:[A-Z][a-z]+)*)"
# Right-hand sides that stand for a credential rather than being one: templates, variables,
# code, types, paths, masks.
_PLACEHOLDER = re.compile(
    r"[<{$%*\[]|~?\.{0,2}/"  # templates, variables, masks, paths
    r"|(?i:xxx|\.\.\.|your[_-]|example|placeholder|changeme|redacted|dummy)"
    r"|(?i:none|null|nil|true|false|yes|no|required|optional|string|str|bytes|int|env|secret"
    r"|password|token|hidden|masked"
    # An auth scheme's name (`"tokenType": "Bearer"`, `auth: Basic`) says how, not what.
    r"|bearer|basic|digest|negotiate|ntlm|jwt|oauth2?"
    # The keyword a bare value stops at in `token = await getToken()`, `secret = new
    # TextEncoder()…`, `token = yield call(…)`: the start of an expression, not a credential.
    r"|await|async|new|yield|typeof|void|delete|lambda|function|try|match|when|not|undefined"
    r"|nullptr)$"
    rf"|{_IDENT}(?:\.{_IDENT})+$|[\w.]+[(\[]"  # `self.password`, `os.environ[...]`, `get()`
)
# `password=db_password`, `token=accessToken`: a variable holding the credential.
_VARIABLE = re.compile(r"(?:[a-z]\w*_|[a-z]+[A-Z])\w*")
_KEYWORD = re.compile(r"(?i)pass|pwd|secret|token|key")
_PROSE_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
# `secret_name`, `token_url`, `password_file` name where a credential is, not the credential.
# A bare `session` names a conversation (the hooks' `session:<id>` tags, a transcript's
# "session": …), not a session cookie.
_NOT_A_CREDENTIAL_NAME = re.compile(
    r"(?i)^[\"']?session[\"']?$|[_.-](?:name|id|ids|path|file|dir|arn|ref|url|uri|endpoint|env|type|kind|length|len"
    r"|count|limit|budget|size|ttl|timeout|expiry|expires|header|field|prompt|policy|rotation"
    r"|manager|store|provider|backend|hint|reset|strength|min|max|version|source|var|stdin|accessor"
    r"|duration|renewable|policies|algorithm|algo|format|scheme|mode|usage|prefix|owner|user)$"
)
_FIELD_END = re.compile(r"\s*(?:$|[\n`'\"|;&)\]},]|-{1,2}\w)")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _points_elsewhere(name: str) -> bool:
    """Whether a setting's name says where a credential is or what it is like, not the
    credential itself: `token_url`, `password_file`, and in camelCase `tokenType`,
    `secretName`, `apiKeyHeader` (read as `token_Type` …)."""
    return _NOT_A_CREDENTIAL_NAME.search(_CAMEL_HUMP.sub("_", name)) is not None


def _is_value(m: re.Match[str]) -> bool:
    """Whether an assignment's right-hand side looks like a credential, not prose, code or a
    placeholder: `password: hunter2x` yes; `password: stored in vault`, `token=$TOKEN`,
    `api_key: <your-key>`, `api_key=api_key`, `token_budget=2000` no."""
    value = m.group("secret")
    if not _named_value(value, m.group("name")):
        return False
    loose = m.group("q") is None and "=" not in m.group("sep")  # `name: value`, `--name value`
    if loose and _PROSE_WORD.fullmatch(value):
        # A bare word after a colon is a value only where the field ends ("password: hunter",
        # "--password foo -h db"), not inside a sentence ("password: stored in the vault").
        return bool(_FIELD_END.match(m.string, m.end("secret")))
    return True


def _named_value(value: str, name: str) -> bool:
    """Whether `value`, given under `name`, may be a credential: a letter in it, no
    placeholder, no variable named for one, and a name that does not point elsewhere."""
    return not (
        len(value) < 3
        or not re.search(r"[^\W\d_]", value)  # no letter: a count, a port, a size
        or _PLACEHOLDER.match(value)
        or (_VARIABLE.fullmatch(value) and _KEYWORD.search(value))
        or _points_elsewhere(name)
    )


def _xml_value(m: re.Match[str]) -> bool:
    """An XML element's text or a `value` attribute under a credential's name: a value as an
    assignment's would be; element text with a space in it only if it reads as a credential
    (`<password>stored in the vault</password>` stays)."""
    value = m.group("secret").strip()
    return _named_value(value, m.group("name")) and (" " not in value or _credential_like(m))


# An XML element or a `key`/`name` attribute that names a credential.
_XML_CREDENTIAL = r"(?:passw|pwd|secret|token|api_?key|private_?key|access_?key|credential)"
_XML_NEEDLES = ("passw", "pwd", "secret", "token", "key", "credential")
_XML_NAMED = (r"[^<>\n]{0,200}?\b(?:key|name)[ \t]*=[ \t]*[\"'](?P<name>[^\"'<>\n]{0,40}?"
              rf"{_XML_CREDENTIAL}[^\"'<>\n]{{0,40}}+)[\"']")


def _mixed_classes(m: re.Match[str]) -> bool:
    """A short value that reads as generated: 8+ characters, three of lower case, upper
    case, digits and symbols, not mostly lower-case words, no placeholder."""
    value = m.group("secret")
    classes = sum(bool(re.search(c, value)) for c in (r"[a-z]", r"[A-Z]", r"\d", r"[^\w\s]"))
    return (len(value) >= 8 and classes >= 3 and not _PLACEHOLDER.match(value)
            and not _wordy(m) and not _documented_sample(value))


# A setting named for a password: `DB_PASSWORD`, `passwd`, `MYSQL_ROOT_PWD`, `PASSWORT`,
# `mot_de_passe`, `contraseña`, `senha`, `пароль`, and a name that ends in `pass` (`DB_PASS`,
# `MYPASS`, `smtppass`) unless the word is another one (`bypass`, `compass`, `trespass` …);
# `passenger_count` and `PASS_THROUGH` do not end in it. What the value looks like is still
# checked (`_is_value`: `PASS_THROUGH=true`, `bypass: 2` are no credentials).
_PASSWORD_NAME = (
    r"(?:pass(?:word|wort|wd|phrase|code|(?<!bypass)(?<!compass)(?<!kompass)(?<!trespass)"
    r"(?<!surpass)(?<!overpass)(?<!underpass)(?=\s*[:=]))"
    r"|kennwort|mot[_-]?de[_-]?passe|contrase(?:ñ|n)a|senha|пароль|(?<=[_-])pwd\b)"
)


def _assignment(name: str, *, cli: bool = False) -> re.Pattern[str]:
    """`NAME=value`, `name = value`, `name: value`, `"name": "value"`, `--name value`."""
    sep = r"(?P<sep>=|\s+)" if cli else r"(?P<sep>[\"']?\s*(?::=|=>|[:=])\s*)"
    prefix = r"--[\w-]{0,30}?" if cli else ""
    # Possessive: the separator cannot start with a name character, so giving back never helps
    # (and a lazy run costs 40 tries at each of a megabyte of "token"s).
    return re.compile(rf"(?i){prefix}(?P<name>{name}[\w.-]{{0,40}}+){sep}{_VALUE}")


# --- the project's own context rules -------------------------------------------------------
# A value standing alone (after a flag, in prose, in a table cell): quoted, or bare up to
# whitespace, not ending in punctuation; no length cap, as for `_VALUE`.
_LONE = (r"(?P<q>[\"'])?(?P<secret>(?(q)[^\"'\n]+|[^\s\"'`]*[^\s\"'`,;.:!?)\]}>]))"
         r"(?(q)(?P=q))")
# `admin / X`, `admin:X` on one line: a `user: X` (a space after the colon) is a YAML key.
_USER_PASS = rf"[\w.@+-]{{1,64}}(?:[ \t]*/[ \t]*|:(?![ \t]|$)){_LONE}"
# Two quoted arguments in a row, the second being the secret: `("user", "pw")`.
_PAIR = r"\s*[\"'][^\"'\n]{0,120}[\"']\s*,\s*[\"'](?P<secret>[^\"'\n]+)[\"']"
# --- prose in other languages --------------------------------------------------------------
# The languages the injection filter reads (German, French, Spanish, Portuguese, Italian,
# Russian, Chinese, Japanese, Korean), Vietnamese, and the password word in Polish, Dutch,
# Turkish, Greek, Hebrew, Arabic and Hindi. A secret word, up to eight words that are
# not the verb ("la contraseña del usuario de la base de datos es X"), the verb ("ist",
# "lautet", "est", "es", "é", "è", "là", optionally "now") or a colon or dash, then the value,
# which must read as a credential (`_credential_like`: "das Passwort ist zu kurz" stays).
# German and Dutch compounds end in the word (`Datenbankpasswort`, `AWS-Geheimschlüssel`,
# `databasewachtwoord`); a bare `mã` (code) or `khóa` (lock, course), Greek `κωδικός` (code)
# need a word that makes them a credential; Hebrew and Arabic write "the", "and", "for" as a
# prefix of the word (`הסיסמה`, `وكلمة`), Turkish a possessive as a suffix (`şifresi`).
_FOREIGN_SECRET = (
    r"(?:(?:passwort|kennwort|schlüssel|wachtwoord)(?!\w)"
    r"|\b(?:mot de passe|mdp|clé|jeton|contraseña|contrasena|clave|secreto|senha|palavra-passe"
    r"|chave|segredo|chiave|segreto|parola d['’]ordine|парол\w{1,3}|ключ\w{0,3}|токен\w{0,3}"
    r"|секрет\w{0,3}|mật khẩu|kh(?:óa|oá) (?:bí mật|api|truy cập|riêng)"
    r"|mã (?:thông báo|bí mật|truy cập|pin)|has[łl](?:o|a|em|u)|[şs]ifre\w{0,4}"
    r"|συνθηματικ\w{1,3}|κωδικ\w{1,3} πρόσβασης|पासवर्ड)\b"
    r"|(?<![\u0590-\u05ff])[הובלשמכ]{0,2}סיסמ(?:ה|א|ת|אות)(?![\u0590-\u05ff])"
    r"|(?<![\u0600-\u06ff])[وبلف]{0,2}(?:كلم[ةه] (?:ال)?(?:مرور|سر)|الرقم السري)"
    r"(?![\u0600-\u06ff]))"
)
_FOREIGN_NEEDLES = ("passwort", "kennwort", "schlüssel", "mot de passe", "mdp", "clé", "jeton",
                    "contrase", "clave", "secreto", "senha", "palavra-passe", "chave", "segredo",
                    "chiave", "segreto", "parola d", "парол", "ключ", "токен", "секрет",
                    "mật khẩu", "khóa", "khoá", "mã ", "wachtwoord", "hasło", "hasła",
                    "hasłem", "hasłu", "haslo", "hasla", "haslem", "haslu", "şifre", "sifre",
                    "συνθηματικ", "κωδικ", "पासवर्ड", "סיסמ", "كلمة", "كلمه", "الرقم السري")
# Russian has no "is" in the present: "пароль теперь X", "пароль — X". Polish "jest", Greek
# "είναι", Hebrew "היא"/"הוא", Arabic "هي", Hindi "है" ("पासवर्ड है X"); Dutch "is" only after
# a foreign word (the English rule reads "password … is X", and "password for the NAS is
# down: X" reads on to its colon).
_FOREIGN_VERB = (r"(?:ist|war|lautet|lautete|est|était|es|era|é|è|là|теперь|сейчас|это"
                 r"|был[аио]?|jest|είναι|ήταν|היא|הוא|هي|है|था|थी)")


def _is_or_colon(verb: str) -> tuple[str, str]:
    """The verb (then an adverb, a colon) before a value, and that or a colon or a dash."""
    verb_then = (rf"(?:\s+{verb}(?:\s+(?:jetzt|nun|noch|aktuell|derzeit|maintenant"
                 r"|désormais|toujours|ahora|todavía|agora|ainda|ora|adesso|ancora|bây giờ"
                 r"|hiện tại))?\s*:?\s+)")
    return verb_then, rf"(?:{verb_then}|\s*[:—–]\s*)"


_FOREIGN_IS, _FOREIGN_IS_OR_COLON = _is_or_colon(_FOREIGN_VERB)
_NATIVE_IS_OR_COLON = _is_or_colon(rf"(?:{_FOREIGN_VERB}|is)")[1]
_FOREIGN_IS_NEEDLES = (" ist ", " war ", " lautet", " est ", " es ", " era ", " était ", " é ",
                       " è ", " là ", " jest ", " είναι ", " ήταν ", " היא ", " הוא ", " هي ",
                       " है ", " था ", " थी ")
# Words between, none of them the verb; a dot only inside one (`db.example.com`), so a gap does
# not run on into the next sentence.
_PROSE_GAP = rf"(?:\s+(?!{_FOREIGN_VERB}\b)(?:[\w@/'’-]|\.(?=\w)){{1,40}}){{0,8}}?"
# "Zugangsdaten für Grafana: admin / X", as "creds: admin:X" is in English.
_FOREIGN_LOGIN = (r"\b(?:zugangsdaten|anmeldedaten|logindaten|identifiants|credenciales"
                  r"|credenciais|credenziali|уч[её]тные данные|данные для входа)")
_FOREIGN_LOGIN_NEEDLES = ("zugangsdaten", "anmeldedaten", "logindaten", "identifiants",
                          "credenciales", "credenciais", "credenziali", "учётные", "учетные",
                          "данные для входа")
# Chinese, Japanese and Korean: the word, a note in brackets, a particle and a value of ASCII
# characters. After a topic particle or a colon (は, 是, 为, 는, 은, `:`) a value that ends its
# clause (punctuation, です, 입니다, a line's end, a space and more that is not Chinese,
# Japanese or Korean: " #4", " (staging)") goes as any value does; one the sentence goes on
# from only if it reads as generated (`_cjk_credential`), so "パスワードは8文字以上" and "토큰은
# OAuth2 흐름으로 받습니다" hold none; after a subject or object particle (が, を, 가, 를 …)
# only "changed to X" counts ("パスワードが X に変わりました", "비밀번호를 X로 변경").
# `キー` and `키` (also "height") need a word that makes them a credential.
_CJK_SECRET = (
    r"密码|密碼|口令|密钥|密鑰|秘钥|秘鑰|私钥|私鑰|令牌|权杖|權杖|金钥|金鑰|凭证|凭据|憑證|憑據"
    r"|認証情報"
    r"|パスワード|パスフレーズ|暗証番号|秘密鍵|トークン|シークレット(?:アクセス)?キー|シークレット"
    r"|(?:アクセス|api ?|ライセンス|秘密|認証)キー"
    r"|비밀번호|비번|패스워드|토큰|시크릿|(?:api|액세스|비밀|시크릿|보안) ?키|자격 ?증명"
)
_CJK_NEEDLES = ("密码", "密碼", "口令", "密钥", "密鑰", "秘钥", "秘鑰", "私钥", "私鑰", "令牌",
                "权杖", "權杖", "金钥", "金鑰", "凭证", "凭据", "憑證", "憑據", "認証情報", "증명",
                "パスワード", "パスフレーズ", "暗証番号", "秘密鍵", "トークン", "シークレット", "キー",
                "비밀번호", "비번", "패스워드", "토큰", "시크릿", "키")
_ENGLISH_SECRET = r"password|passwd|passphrase|passcode|token|secret|(?:api|access|secret) ?key"
_CJK_LETTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_CJK_TAIL = (
    r"(?:\s*[(（][^)）\n]{0,20}[)）])?\s*(?:(?P<topic>は|是|为|為|는|은|:|=)[、,:]?|が|を|가|이|를|을)"
    r"\s*[「『]?(?P<secret>[!#-&(-_a-~]*(?![,;.:!?)\]}>])[!#-&(-_a-~])"
    r"(?(topic)(?=[ \t]*(?:\n|$|[,;.:!?)\]}>\"'`」』）】。、，]|です|でした|だ|で[、,]|입니다"
    r"|이에요|예요|이다|이야|야|요|[喔哦啊呀吧了])"
    rf"|[ \t]*(?P<cjk>[{_CJK_LETTERS}])|[ \t]+)"
    r"|(?=[ \t]*(?:に(?:変更|変わ|設定|な[りっ]|リセット)|(?:로|으로)[ \t]*(?:변경|바꾸|바꿨|바뀌"
    r"|설정|재설정)|です|でした|입니다|이에요|예요)))"
)
_CJK_PARTICLES = ("は", "是", "为", "為", "는", "은", "が", "を", "가", "이", "를", "을")
# Characters of a credential rather than of a word, a path or an identifier.
_CREDENTIAL_MARK = re.compile(r"\d|[!@#$%^&*+=~?]|[a-z][A-Z]|[A-Z]{2}[a-z]")


def _credential_like(m: re.Match[str]) -> bool:
    """A value that reads as a credential: not a placeholder, a letter and a digit, a symbol or
    mixed case somewhere (so `stored`, `required`, `2000`, `prod/payments/stripe` are not)."""
    value = m.group("secret")
    return (len(value) >= 4 and not _PLACEHOLDER.match(value)
            and bool(re.search(r"[^\W\d_]", value))  # a count, a port, a date is no secret
            and bool(_CREDENTIAL_MARK.search(value)))


def _random(m: re.Match[str]) -> bool:
    """A value that reads as generated: ≥ 3 bits of entropy per character over ≥ 16
    characters, with letters and digits or both cases mixed (not a camelCase name)."""
    value = m.group("secret")
    mixed = bool(re.search(r"[a-z]", value) and re.search(r"[A-Z]", value)
                 and not re.fullmatch(_IDENT, value))
    if len(value) < 16 or not (mixed or re.search(r"\d", value) and re.search(r"[A-Za-z]", value)):
        return False
    return _entropy(value) >= 3.0 and "--" not in value  # not a run of chained CLI flags


def _entropy(value: str) -> float:
    """Shannon entropy of `value`'s characters, in bits per character."""
    counts = Counter(value)
    return -sum(c / len(value) * math.log2(c / len(value)) for c in counts.values())


def _cjk_credential(m: re.Match[str]) -> bool:
    """A value after a Chinese, Japanese or Korean particle: one the sentence goes on from
    ("密码是 Xk9#mQ2 别外传", "토큰은 OAuth2 흐름으로") must also read as generated: a symbol
    in it, or `_random` (a version, an algorithm or a protocol name has neither)."""
    value = m.group("secret")
    return _credential_like(m) and (m.group("cjk") is None or re.search(r"[^\w]", value)
                                    is not None or _random(m))


# What docs write where a URL's password goes: the field's own name (`user:password@`,
# `:secret@`), a template. Not `_PLACEHOLDER`: a real password may start with `$` or `%`.
# ... or a mask (`postgres://app:***@db`, as the stores print a URL in an error line: the MCP
# tools' error went through redaction and read `[REDACTED:db-url-password]` where REST said ***)
_NAMED_PLACEHOLDER = re.compile(r"(?i)(?:your[_-]?|my[_-]?)?(?:password|passwd|pass|pwd|secret"
                                r"|token|changeme)|\$\{\w+\}|\{\{[^{}]*\}\}|\*+")


def _not_a_named_placeholder(m: re.Match[str]) -> bool:
    return _NAMED_PLACEHOLDER.fullmatch(m.group("secret")) is None


# A name that says credential (a variable, a Terraform output, a secret store's field).
_CREDENTIAL_NAME = r"(?:secret|token|passw|pwd|api_?key|private_?key|access_?key|credential|auth)"
# A command line whose output is a secret: a variable or an output named for one (`echo
# $GITHUB_TOKEN`, `printenv DB_PASSWORD`, `terraform output -raw db_password`, `heroku
# config:get API_KEY`), a secret store's field (`vault read -field=password …`, `vault kv get
# -field=…`: any field but one that points elsewhere, `lease_duration`), or a command that
# reads nothing but secrets (`op read`, `kubectl get secret … | base64 -d`, AWS Secrets
# Manager and SSM with decryption, `gcloud secrets versions access`, Azure Key Vault, Doppler,
# Bitwarden, pass, macOS `security … -w`). Commands are typed in lower case: matched so, with
# a lookahead for their first letters, the scan is 2.5x faster than a case-blind alternation.
_PRINTS_A_SECRET = (
    r"(?=[abdeghklopstv])(?:(?:\becho[ \t]+[\"']?\$\{?|\bprintenv[ \t]+"
    r"|\bheroku[ \t]+config:get[ \t]+"
    r"|\bterraform[ \t]+output[ \t]+(?:-[\w-]{1,20}[ \t]+){0,3})"
    rf"(?P<name>(?i:\w{{0,40}}?{_CREDENTIAL_NAME}\w{{0,40}}+))\}}?[\"']?"
    r"(?:[ \t]+-[\w-]{1,30}(?:[ \t=]+[\w.-]{1,60})?){0,4}"  # `-a shop`, `-state=prod.tfstate`
    r"|\bvault[ \t]+(?:kv[ \t]+get|read)\b[^\n]{0,200}?[ \t]-field[= ](?P<field>[\w.-]{1,60}+)"
    r"[^\n]{0,300}+"
    r"|(?:\bop[ \t]+read|\bkubectl[ \t](?:[^\n|;&]{0,100}?[ \t])?get[ \t]+secrets?"
    r"|\baws[ \t]+secretsmanager[ \t]+get-secret-value"
    r"|\baws[ \t]+ssm[ \t]+get-parameters?\b(?=[^\n]{0,300}--with-decryption)"
    r"|\bgcloud[ \t]+secrets[ \t]+versions[ \t]+access|\baz[ \t]+keyvault[ \t]+secret[ \t]+show"
    r"|\bdoppler[ \t]+secrets[ \t]+get|\bbw[ \t]+get[ \t]+password|\b(?:go)?pass[ \t]+show"
    r"|\blpass[ \t]+show\b(?=[^\n]{0,300}--password)"
    r"|\bsecurity[ \t]+find-(?:generic|internet)-password\b(?=[^\n]{0,300}[ \t]-w\b))"
    r"\b[^\n]{0,300}+)"
)
_PRINTS_NEEDLES = ("echo", "printenv", "heroku", "terraform", "vault", "op read", "kubectl",
                   "secretsmanager", "ssm", "gcloud", "keyvault", "doppler", "bw get",
                   "pass show", "find-generic", "find-internet")


def _printed_secret(m: re.Match[str]) -> bool:
    """A value printed by `_PRINTS_A_SECRET`'s command that reads as generated, the variable
    or field it names not pointing elsewhere (`echo $TOKEN_URL`, `-field=lease_duration`)."""
    name = m.group("name") or m.group("field")
    return _generated(m.group("secret")) and not (name and _points_elsewhere(name))


def _wordy(m: re.Match[str]) -> bool:
    """A value made mostly of lower-case runs of 3+ letters: an identifier with a digit in it
    (`ListObjectsV2Permission`), not a generated token, whose lower-case runs are short."""
    value = m.group("secret")
    return sum(map(len, re.findall(r"[a-z]{3,}", value))) * 2 >= len(value)


_NAME_BEFORE = re.compile(r"[\w.-]{1,80}[\"']?[ \t]*$")
_SECRET_PHRASE = re.compile(rf"(?i)\b(?:key|secret|token|password|passphrase|credentials?)\b"
                            rf"|{_FOREIGN_SECRET}|{_CJK_SECRET}")
_SECRET_WORD = re.compile(r"(?i)key|auth|cred|sig|salt|seed|cookie|session|pass|pwd|token|secret"
                          r"|private|signing|encryption")


def _keyword_name(m: re.Match[str]) -> bool:
    """Whether the name before an assignment's separator says it holds a credential, or (the
    value being random anyway) a few words before it on the line do ("signing key for
    webhooks: …")."""
    if _PLACEHOLDER.match(m.group("secret")):
        return False
    name = _NAME_BEFORE.search(m.string, max(0, m.start() - 80), m.start())
    if name and _SECRET_WORD.search(name.group()):
        return not _points_elsewhere(name.group())
    line_start = m.string.rfind("\n", max(0, m.start() - 40), m.start()) + 1
    return bool(_SECRET_PHRASE.search(m.string, max(line_start, m.start() - 40), m.start()))


_TABLE_KEY = re.compile(r"(?i)token|passw|secret|api_?key|private_?key|access_?key|credential"
                        r"|auth")


def _is_table_value(m: re.Match[str]) -> bool:
    return bool(_TABLE_KEY.search(m.group("name"))) and _is_value(m) and _credential_like(m)


# Control characters that no text holds: what binary (a hash, an image) decodes to.
_B64_HEAD = 64  # characters: 48 bytes, a multiple of 4
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


_B64 = "[A-Za-z0-9+/]"


def _base64_secret(m: re.Match[str]) -> bool:
    """A whole base64 run (not the tail of a base64url one or of an identifier: `_`, `-` on
    either side) whose decoded text holds a secret."""
    text, start, end = m.string, m.start("secret"), m.end("secret")
    if text[start - 1 : start] in ("_", "-") or text[end : end + 1] in ("_", "-"):
        return False
    return _hides_a_secret(m.group("secret"))


def _hides_a_secret(run: str) -> bool:
    """Whether `run` (a base64 run, maybe wrapped) is base64 of text in which the rules or the
    library find a secret. Most runs (hashes, images, keys, long identifiers) are no UTF-8
    text from their first bytes on, which is all that is decoded of them; what is scanned
    again is text someone encoded, and its own base64 runs are not decoded again."""
    run = "".join(run.split())
    try:
        head = base64.b64decode(_padded(run[:_B64_HEAD]), validate=True)
        if _BINARY.search(codecs.getincrementaldecoder("utf-8")().decode(head)):
            return False
        decoded = base64.b64decode(_padded(run), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return False
    if _BINARY.search(decoded):
        return False
    view = visible(decoded)
    return _redact_view(view, _library_spans(view), track=False, nested=True)[0] != view


def _padded(run: str) -> str:
    """`run` with the `=` padding that `base64 -w0`'s users often drop."""
    return run + "=" * (-len(run) % 4) if not run.endswith("=") else run


def _rule(kind: str, pattern: str, needles: tuple[str, ...],
          accept: Callable[[re.Match[str]], bool] | None = _credential_like,
          also: tuple[str, ...] = ()) -> Rule:
    return Rule(kind, re.compile(pattern), needles, accept, also)


#: Provider shapes the library misses or names less precisely (measured on
#: tests/corpora/secrets.jsonl): fixed prefixes, so no accept check.
PROVIDER_GAPS: tuple[Rule, ...] = tuple(_rule(kind, pattern, needles, None)
                                        for kind, pattern, needles in (
    ("nuget-key", r"\boy2[a-z0-9]{43}\b", ("oy2",)),
    ("stripe-webhook-secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}", ("whsec_",)),
    ("newrelic-key", r"\bNR(?:AK|AA|II|JS|RA|SP)-[A-Za-z0-9]{20,}", ("nr",)),
    ("sentry-token", r"\bsntry[su]_[A-Za-z0-9+/=_]{40,}", ("sntr",)),
    ("vault-token", r"\bh(?:vs|vb|vr)\.[A-Za-z0-9_-]{20,}", ("hvs.", "hvb.", "hvr.")),
    ("doppler-token", r"\bdp\.(?:st|ct|sa|scim|audit|pt)\.[\w.-]{30,}", ("dp.",)),
    ("1password-token", r"\bops_eyJ[\w-]{40,}", ("ops_",)),
    ("alibaba-key", r"\bLTAI[A-Za-z0-9]{12,20}\b", ("ltai",)),
    ("telegram-bot-token", r"(?<!\d)\d{8,10}:AA[A-Za-z0-9_-]{33}\b", (":aa",)),
    ("discord-bot-token",
     r"\b[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}\b",
     ("discord", "bot", ".run(")),  # how a bot token is used: `client.run(TOKEN)`
    ("azure-ad-secret", r"(?<![\w~.-])[\w~.-]{3}\dQ~[\w~.-]{31,34}(?![\w~.-])", ("q~",)),
    ("webhook-url", r"(?:discord(?:app)?\.com/api/webhooks/\d+/|webhook\.office\.com/webhookb2/"
     r"|api\.telegram\.org/bot)(?P<secret>[\w@:/-]{30,})", ("webhook", "api.telegram.org/bot")),
    # Prefixes the library knows only next to a keyword ("access_token=ya29…"), or not at all:
    # pasted alone (a CLI's output, a JSON field of another name) they are still tokens.
    ("google-oauth-token", r"\bya29\.[\w-]{20,}", ("ya29.",)),
    ("google-refresh-token", r"(?<![\w/])1//0[\w-]{40,}", ("1//0",)),
    ("google-client-secret", r"\bGOCSPX-[\w-]{24,}", ("gocspx-",)),
    ("heroku-api-key", r"\bHRKU-[\w-]{20,}", ("hrku-",)),
    ("notion-token", r"\bntn_[A-Za-z0-9]{40,}", ("ntn_",)),
    ("planetscale-token", r"\bpscale_(?:tkn|pw|oauth)_[\w.-]{30,}", ("pscale_",)),
    ("tailscale-key", r"\btskey-(?:auth|api|client|scim|webhook)-[\w-]{20,}", ("tskey-",)),
    ("netlify-token", r"\bnfp_[A-Za-z0-9]{36,}", ("nfp_",)),
    ("pinecone-key", r"\bpcsk_[\w-]{40,}", ("pcsk_",)),
    ("sonarqube-token", r"\bsq[uap]_[0-9a-f]{40}\b", ("squ_", "sqp_", "sqa_")),
    ("contentful-token", r"\bCFPAT-[\w-]{40,}", ("cfpat-",)),
    ("dynatrace-token", r"\bdt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", ("dt0c01.",)),
    ("mapbox-secret-token", r"\bsk\.eyJ[\w-]{10,}\.[\w-]{10,}", ("sk.eyj",)),
    ("huggingface-token", r"\bapi_org_[A-Za-z0-9]{30,}", ("api_org_",)),
    ("bitbucket-app-password", r"\bATBB[A-Za-z0-9]{28,}", ("atbb",)),
    ("supabase-secret-key", r"\bsb_secret_[\w-]{24,}", ("sb_secret_",)),
    ("dropbox-token", r"\bsl\.(?:u\.)?[\w-]{130,}", ("sl.",)),
    ("facebook-token", r"\bEAA[B-Z][A-Za-z0-9]{100,}", ("eaa",)),  # Square's is EAAA…, 64 long
    ("render-key", r"\brnd_[A-Za-z0-9]{32,}", ("rnd_",)),
    ("typeform-token", r"\btfp_[\w-]{40,}", ("tfp_",)),
    ("adafruit-key", r"\baio_[A-Za-z0-9]{28}\b", ("aio_",)),
))

#: Secrets that are secrets because of where they stand.
CONTEXT_RULES: tuple[Rule, ...] = (
    # Key files without PEM's PRIVATE KEY words: OpenVPN static keys, PuTTY's private lines.
    _rule("private-key", r"(?i)-----BEGIN [A-Z0-9 ]{0,40}STATIC KEY V\d-----[^-]{0,8192}"
          r"(?:-----END [A-Z0-9 ]{0,40}-----)?", ("static key",), None),
    _rule("private-key",
          r"Private-Lines: \d+\r?\n(?P<secret>(?:[A-Za-z0-9+/=]{1,128}\r?\n?){1,64})",
          ("private-lines",), None),
    # CLI flags that take a password under a short name, per command.
    _rule("password", r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mysqlsh)\b[^\n|;&]{0,200}?\s-p"
          r"(?P<secret>[^\s'\"-][^\s'\"]{2,})", ("mysql", "mariadb")),
    _rule("password", r"\b(?:docker|podman|nerdctl|buildah|skopeo|oras|helm registry)\s+login\b"
          rf"[^\n|;&]{{0,200}}?\s(?:-p|--password)(?:\s+|=){_LONE}", ("login",)),
    _rule("password", rf"\bsshpass\s+-p\s*{_LONE}", ("sshpass",)),
    _rule("password", rf"\bredis-cli\b[^\n|;&]{{0,200}}?\s(?:-a|--pass)\s+{_LONE}", ("redis-cli",)),
    _rule("password", r"\b(?:smbclient|rpcclient|smbmap|crackmapexec|nxc)\b[^\n]{0,200}?\s"
          r"(?:-U|--user)[\s=]+[^\s%]{1,64}%(?P<secret>[^\s'\"]+)", ("%",)),
    _rule("password", r"\bhtpasswd\s+(?:-\w+\s+){0,4}?-\w*b\w*\s+(?:-\w+\s+){0,4}"
          rf"[^\s-]\S{{0,255}}\s+\S{{1,128}}\s+{_LONE}", ("htpasswd",)),
    # Any command with a user flag and then a password flag (`-u sa -P …`, `-l admin -p …`;
    # a port after `-p` has no letter, so `psql -U app -p 5432` is left alone).
    _rule("password", r"(?:^|\s)(?:-u|-U|--user|--username|-l|--login)[\s=]+[^\s-]\S{0,63}"
          r"[^\n|;&]{0,160}?\s(?:-p|-P|--pass|--password|-pw|--pwd)(?:\s+|=)"
          + _LONE, ("-p", "--pass", "-pw", "--pwd")),
    # Positional: `rabbitmqctl add_user NAME PASS`; `aws configure set <secret name> VALUE`.
    _rule("password", rf"\b(?:add_user|change_password|set_user_password|set_password)\s+"
          rf"[\w.@-]{{1,64}}\s+{_LONE}", ("add_user", "_password")),
    _rule("secret", r"(?i)\b(?:configure\s+set|config\s+set|config:set|set)\s+"
          r"(?P<name>[\w./:-]{0,80}?"
          r"(?:secret|passw|token|api[_-]?key|access[_-]?key|auth)[\w./:-]{0,40}+)\s+"
          + _LONE, ("set",), also=("secret", "passw", "token", "key", "auth")),
    # `-u user:pass` (curl, wget, httpie, …).
    _rule("password", r"(?:^|\s)(?:-u|--user|-a|--auth)\s+[\"']?[^\s:\"'/$]{1,64}:"
          r"(?P<secret>[^\s\"'@]{3,})", ("-u", "--user", "-a", "--auth")),
    # SDK calls: `auth=("user", "pw")`, `HTTPBasicAuth("u", "pw")`, `.login("u", "pw")`.
    _rule("password", r"(?:\bauth\s*=\s*[(\[]|\b(?:HTTPBasicAuth|HTTPDigestAuth|BasicAuth"
          r"|DigestAuth"
          r"|NetworkCredential|UsernamePasswordCredential|PasswordCredential)\s*\(|\.(?:login"
          rf"|authenticate|auth|basic_auth|set_credentials|credentials)\s*\(){_PAIR}",
          ("auth=", "auth =", "auth(", "authenticate(", "login(", "credential(", "credentials(",
           "basicauth", "digestauth")),
    # A URL whose userinfo is one token (`https://<token>@github.com`, Sentry DSNs).
    _rule("url-token", r"://(?P<secret>[A-Za-z0-9_~%+-][A-Za-z0-9_~.%+-]{15,255})@[\w-]", ("://",),
          _random),
    # key=value connection strings and query strings (ADO.NET, ODBC, JDBC, Azure, SAS URLs).
    _rule("connection-string", r"(?i)(?<![\w-])(?P<name>accountkey|sharedaccesskey|sharedsecret"
          r"|pwd|passwd|pass|access_?key|secret_?key|sas_?token|x-amz-signature"
          r"|x-amz-security-token|x-goog-signature|x-goog-credential|sig|signature)="
          r"(?P<secret>[^;&\s\"'<>]{4,})",
          ("key=", "secret=", "pwd=", "pass=", "passwd=", "sig=", "signature=", "token=",
           "credential="),
          lambda m: _credential_like(m) and (len(m.group("secret")) >= 12
                                               or "pw" in m.group("name").lower()
                                               or "pass" in m.group("name").lower())),
    # Prose: "the password is X", "the root password for the NAS is now X", "pwd X", "pin: X".
    _rule("password", r"(?i)\b(?:password|passwd|passphrase|passcode|pwd|pin|token|secret"
          r"|api key|key)(?:\s+(?!is\b|was\b)[\w.@/-]{1,40}){0,4}?\s+(?:is|was)"
          r"(?:\s+(?:now|still|currently|temporarily|just|set to|changed to))?\s*:?\s+"
          + _LONE, ("pass", "pwd", "pin", "token", "secret", "key"),
          also=(" is", "\nis", "\tis", " was", "\nwas", "\twas")),  # "is" may end a line
    # The same prose in other languages (see `_FOREIGN_SECRET`, `_CJK_SECRET`), and the English
    # words in a sentence of another language ("la password del NAS è X", "password は X").
    _rule("password", rf"(?i){_FOREIGN_SECRET}{_PROSE_GAP}{_NATIVE_IS_OR_COLON}{_LONE}",
          _FOREIGN_NEEDLES),
    _rule("password", rf"(?i)\b(?:password|passwd|passphrase)\b{_PROSE_GAP}"
          rf"{_FOREIGN_IS_OR_COLON}{_LONE}", ("passw", "passphrase"),
          also=(*_FOREIGN_IS_NEEDLES, ":", "—", "–")),
    _rule("password", rf"(?i)\b(?:token|secret)\b{_PROSE_GAP}{_FOREIGN_IS}{_LONE}",
          ("token", "secret"), also=_FOREIGN_IS_NEEDLES),
    _rule("password", rf"(?i){_FOREIGN_LOGIN}{_PROSE_GAP}{_FOREIGN_IS_OR_COLON}{_USER_PASS}",
          _FOREIGN_LOGIN_NEEDLES),
    _rule("password", rf"(?i)(?:{_CJK_SECRET}){_CJK_TAIL}", _CJK_NEEDLES, _cjk_credential),
    _rule("password", rf"(?i)\b(?:{_ENGLISH_SECRET}){_CJK_TAIL}",
          ("pass", "token", "secret", "key"), _cjk_credential, also=_CJK_PARTICLES),
    _rule("password", rf"(?i)\b(?:pwd|pw|pass|passcode|pin)\s+{_LONE}",
          ("pwd ", "pw ", "pass ", "passcode ", "pin ", "pwd\t", "pass\t")),
    # The word must stand alone: `login.acme.io/oauth2/token` is a host and a path. One line
    # only, and the user is no YAML key: a `Login` step's `uses: docker/login-action@v3`,
    # `credentials:\n  provider: aws-v2` and "Login with: github/oauth2" hold no password.
    _rule("password", r"(?i)\b(?:login|logins|credentials?|creds)"
          rf"(?:[ \t]*(?:\bis\b|\bare\b|:)[ \t]*|[ \t]+){_USER_PASS}", ("login", "cred")),
    # "ssh root@10.0.0.9 (password X)", "use password X for root": a short value after the word
    # only if it reads as generated (three of lower case, upper case, digits and symbols, not
    # mostly words): "password reset", "password-protected", "password hash_v2" stay.
    _rule("password", rf"(?i)\b(?:password|passwd|passphrase)[ \t]+{_LONE}",
          ("passw", "passphrase"), _mixed_classes),
    # XML (Maven `settings.xml`, NuGet, Spring, .NET `appSettings`): `<password>X</password>`,
    # `<apiKey>X</apiKey>`, `<add key="SmtpPassword" value="X"/>`, `<entry key="api.token">X`.
    _rule("password", rf"(?i)<(?P<name>[\w:.-]{{0,40}}?{_XML_CREDENTIAL}[\w:.-]{{0,40}}+)"
          r"(?:[ \t][^<>\n]{0,200}+)?>(?P<secret>[^<>\n]{1,512}+)</", _XML_NEEDLES, _xml_value),
    *(_rule("password", rf"(?i)<[\w:.-]{{1,40}}[ \t]{_XML_NAMED}{tail}", _XML_NEEDLES, _xml_value)
      for tail in (r"[^<>\n]{0,200}?\bvalue[ \t]*=[ \t]*[\"'](?P<secret>[^\"'<>\n]{1,512}+)",
                   r"[^<>\n]{0,200}?>(?P<secret>[^<>\n]{1,512}+)</")),
    # Auth headers with any scheme (`token`, `Token`, `ApiKey`, `SSWS` …) or none at all.
    _rule("auth-header", rf"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*{_HEADER_OPEN}"
          r"(?:[A-Za-z][\w-]{1,24}\s+)?(?P<secret>[A-Za-z0-9._~+/=-]{8,})", ("authorization",)),
    _rule("auth-header", r"(?i)(?<![\w-])(?:x-[\w-]{0,30}?(?:token|key|auth|secret|signature"
          r"|password"
          r"|session)[\w-]{0,20}|private-token|api-?key|apikey)[\"']?\s*:?\s+"
          rf"{_HEADER_OPEN}"
          r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
          ("x-", "private-token", "api-key", "apikey")),
    _rule("session-cookie", r"(?i)\b(?:set-)?cookie[\"']?\s*:[^\n]{0,400}?(?<![\w-])[\w.-]{0,40}"
          r"(?:sess|sid|token|auth|jwt|remember|login)[\w.-]{0,40}=(?P<secret>[^;\s\"']{16,})",
          ("cookie",), None),
    # Config files: docker's `"auth": "<base64>"`, kubeconfig's `*-data:` and netrc/pgpass lines.
    _rule("registry-auth", r"(?i)\"(?:auth|identitytoken|registrytoken)\"\s*:\s*"
          r"\"(?P<secret>[A-Za-z0-9+/=._-]{12,4096})\"", ("\"auth\"", "token\""), None),
    _rule("kubeconfig-data", r"(?im)^[ \t-]{0,40}[\w.-]{0,60}-data\s*:\s*[\"']?"
          r"(?P<secret>[A-Za-z0-9+/=]{32,})", ("-data",), None),
    _rule("password", rf"(?im)^[ \t]*(?:password|passwd)[ \t]+{_LONE}[ \t]*$", ("pass",)),
    _rule("password", rf"(?i)\blogin\s+\S{{1,128}}\s+password\s+{_LONE}", ("login",),
          also=("password",)),
    _rule("password", r"(?m)^[\w.*-]{1,253}:(?:\d{1,5}|\*):[\w.*-]{1,63}:[^\s:]{1,63}:"
          r"(?P<secret>\S{3,256})$", (":",)),
    # Prose with no verb or separator: "aws key AKIA… secret Qx7v…", "the deploy token
    # 9fKq…", "with secret access key 7yOh…": only a generated-looking value (a word, a name or
    # a path stays). The words that may follow the secret word are the ones that name the same
    # thing; any word would take the SHA in "the token fix landed in <commit SHA>" for one.
    _rule("secret", r"(?i)\b(?:secret|token|password|passphrase|api[ _-]?key|access[ _-]?key)"
          r"(?:[ \t]+(?:access[ _-]?)?(?:key|token|value))?"
          r"[ \t]+(?P<secret>[A-Za-z0-9+/][A-Za-z0-9+/=_.~-]{15,}+)(?![\w+/=.~-])",
          ("secret", "token", "pass", "key"), lambda m: _random(m) and not _wordy(m)),
    # The same in Chinese, Japanese and Korean, which need no space or article: "用这个密钥
    # X 访问", "新的访问令牌X今晚过期", "このキー X で", "이 키 X 로". A bare `キー` / `키`
    # counts only as a word of its own (`ホットキー`, `パーティションキー`, `스키` do not).
    _rule("secret", rf"(?i)(?:{_CJK_SECRET}|(?<![\u30a0-\u30ff\uac00-\ud7af])(?:キー|키))"
          r"[ \t]*[「『\"']?(?P<secret>[A-Za-z0-9+/][A-Za-z0-9+/=_.~-]{15,}+)",
          _CJK_NEEDLES, lambda m: _random(m) and not _wordy(m)),
    # A terminal printing a secret, then the value alone on the next line (a wrap of it goes
    # too): see `_PRINTS_A_SECRET`.
    _rule("secret", rf"{_PRINTS_A_SECRET}[ \t]*\r?\n[ \t]*"
          r"(?P<secret>[A-Za-z0-9+/][^\s\"'`]{7,}+)(?=[ \t]*(?:\r?\n|$))", _PRINTS_NEEDLES,
          _printed_secret),
    # Tables: `vault kv get` / `vault token create` output, markdown `| DB_PASSWORD | … |`.
    _rule("secret", r"(?m)^[ \t|]{0,8}(?P<name>[\w.-]{1,80}+)[ \t]*(?P<sep>\|[ \t]*|[ \t]{2,}|\t)"
          r"(?P<q>)(?P<secret>[^\s|]{4,}+)[ \t]*\|?[ \t]*$",
          ("token", "pass", "secret", "key", "credential", "auth"), _is_table_value),
)

RULES: tuple[Rule, ...] = (
    # A PEM/PGP key block, or a truncated paste that never reaches its END line.
    Rule("private-key", re.compile(rf"{_PEM}(?:[^-]*{_PEM_END}|(?:{_B64_LINE})*)"),
         ("-----begin",)),
    # A key block whose head a log or a paste cut off: base64 lines up to its END line (the
    # first after a label: `key: MIIE…`). A run starts where the line before ends in no base64
    # (so each run is read once).
    Rule("private-key", re.compile(
        r"(?m)(?<![A-Za-z0-9+/=]{16}\n)(?<![A-Za-z0-9+/=]{16}\r\n)^(?:[^\n]{0,200}?[^\w+/=\n])?"
        rf"(?P<secret>(?:[A-Za-z0-9+/=]{{16,}}+[ \t]*\r?\n[ \t]*)++{_PEM_END})"),
        ("-----end",), also=("private key",)),
    Rule("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
         ("akia", "asia", "abia", "acca")),
    Rule("aws-secret-key", re.compile(
        r"(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"), ("secret",)),
    Rule("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})"),
         ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    Rule("gitlab-token", re.compile(
        r"\bgl(?:pat|ptt|dt|rt|soat|cbt|imt|agent|oas|ft|ffct|wt)-[A-Za-z0-9_-]{20,}"), ("gl",)),
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
        rf"(?i)\bauthorization[\"']?\s*[:=]\s*{_HEADER_OPEN}bearer\s+"
        r"(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
        ("bearer",)),
    Rule("basic-auth", re.compile(
        rf"(?i)\bauthorization[\"']?\s*[:=]\s*{_HEADER_OPEN}basic\s+"
        r"(?P<secret>[A-Za-z0-9+/=]{8,})"),
        ("basic",)),
    Rule("db-url-password",
         re.compile(rf"(?i)\b(?:{_DB_SCHEMES})(?:\+\w+)?{_URL_CREDENTIALS}"), ("://",),
         _not_a_named_placeholder),
    Rule("url-password", re.compile(_URL_CREDENTIALS), ("://",), _not_a_named_placeholder),
    *PROVIDER_GAPS,
    # Assignments come next, so a provider rule above has already named a known token's kind,
    # then the context rules for what an assignment does not look like.
    *(Rule(kind, _assignment(name, cli=cli), needles, _is_value)
      for cli in (False, True)
      for kind, name, needles in (
          ("password", _PASSWORD_NAME, ("pass", "pwd", "kennwort", "contrase", "senha", "парол")),
          ("private-key", r"private[_-]?key", ("private",)),
          ("api-key", r"api[_-]?key", ("api",)),
          ("secret", r"secret(?!s)", ("secret",)),
          ("token", r"token(?!s|iz)", ("token",)),
      )),
    *CONTEXT_RULES,
    # Any other setting whose name says "key", "auth", "salt"…: only a high-entropy value (after
    # an encoding's prefix too: Laravel's `APP_KEY=base64:…`). The
    # pattern starts at the separator's first character (a keyword alternation tried at every
    # character costs ~0.5 µs a character); the name before it is checked in `_keyword_name`.
    Rule("generic-secret", re.compile(
        r"(?P<sep>(?::=|=>|[:=])[ \t]*)(?P<q>[\"'])?(?!//)(?:base64:|b64:|hex:)?"
        r"(?P<secret>[A-Za-z0-9+/][A-Za-z0-9+/=_.~-]{15,}+)"),
        ("key", "auth", "cred", "sig", "salt", "seed", "cookie", "sess", "pass", "pwd", "token",
         "secret", "private", "signing", "encryption", *_FOREIGN_NEEDLES, *_CJK_NEEDLES),
        lambda m: _keyword_name(m) and _random(m)),
    # Last: a base64 run whose decoded text holds what the rules above (or the library) take
    # for a secret: `echo QVdTX1NF… | base64 -d`, an .env or a credentials file in a
    # Kubernetes `data:` field. The whole run goes; one that decodes to anything else stays.
    # `base64` wraps its output at 76 characters, `openssl base64` at 64: a line of exactly
    # that width goes on with the next. (No lookbehind before the run: a pattern that starts
    # with its character class is scanned for at C speed, twice as fast on notes.)
    Rule("base64-secret", re.compile(
        rf"(?P<secret>{_B64}{{24,}}+(?:(?:(?<=(?<!{_B64}){_B64}{{64}})"
        rf"|(?<=(?<!{_B64}){_B64}{{76}}))\r?\n{_B64}++)*+={{0,2}})"), (), _base64_secret),
)
_BASE64_RULE = RULES[-1]


_NEEDLES = frozenset(needle for rule in RULES for needle in rule.needles)


def _keys(needles: frozenset[str]) -> tuple[str, ...]:
    """The fewest needles such that every needle contains one of them (`pass` stands for
    `passw`, `passwort`, `mot de passe` …): a needle is looked for only once one of its keys
    is found, so a text is scanned once per key, not once per needle."""
    keys: list[str] = []
    for needle in sorted(needles, key=len):
        if not any(key in needle for key in keys):
            keys.append(needle)
    return tuple(keys)


_KEYS = _keys(_NEEDLES)
#: The keys an ASCII text (most of what is stored) can hold: not the other scripts' words.
_ASCII_KEYS = tuple(key for key in _KEYS if key.isascii())
_UNDER = {key: tuple(needle for needle in _NEEDLES if key in needle) for key in _KEYS}
_BY_NEEDLE = {needle: tuple(i for i, rule in enumerate(RULES) if needle in rule.needles)
              for needle in _NEEDLES}
_ALWAYS = frozenset(i for i, rule in enumerate(RULES) if not rule.needles)


def redact(text: str) -> str:
    """`text` with every credential the library or the rules know replaced by
    `[REDACTED:<kind>]`."""
    return redact_many([text])[0]


def redact_many(texts: list[str]) -> list[str]:
    """`redact` of each text, with one library call for all of them (a memory's content,
    project and tags: the call, not the text, is most of the library's cost on short fields)."""
    views = [visible(text) for text in texts]
    split = [view != text and INVISIBLE_IN_TOKEN.search(text) is not None
             for text, view in zip(texts, views)]
    found = _library_spans("\n\n".join(views + [t for t, s in zip(texts, split) if s]))
    return [_redact_one(text, view, both, [f for f in found if f[0] in view or f[0] in text])
            for text, view, both in zip(texts, views, split)]


def _redact_one(text: str, view: str, both: bool, found: list[tuple[str, str]]) -> str:
    """`text` redacted as it reads: the secrets are looked for in `view` (`visible(text)`), so
    that a zero-width space, a soft hyphen or fullwidth letters inside one, which a reader (and
    the injection block) drops or reads through, cannot hide it. What goes there goes from the
    text, invisible characters included; the rest stays as written. With `both` (an invisible
    character inside a token: it may also end one, `AKIA…<U+200B>more`) the text as written is
    searched first."""
    if view == text:
        return _redact_view(text, found, track=False)[0]
    if both:
        written = _redact_view(text, found, track=False)[0]
        if written is not text:
            text, view = written, visible(written)
    redacted, sources = _redact_view(view, found, track=True)
    if sources is None:
        return text  # nothing found: joiners in emoji, direction marks, fullwidth text stay
    return _write_back(text, visible_origins(text), redacted, sources)


def _redact_view(text: str, found: list[tuple[str, str]], *, track: bool, nested: bool = False
                 ) -> tuple[str, list[int] | None]:
    """`text` redacted, and (with `track`, once anything is replaced) for each character of
    the result the index in `text` it was copied from, -1 inside a marker. `nested`: `text`
    was decoded from a base64 run, whose own runs are not decoded again."""
    lowered = text.lower()
    # The rules whose needles occur, in table order (the order names a token's kind).
    keys = _ASCII_KEYS if lowered.isascii() else _KEYS
    due = sorted({i for key in keys if key in lowered
                  for needle in _UNDER[key] if needle in lowered for i in _BY_NEEDLE[needle]}
                 | _ALWAYS)
    sources: list[int] | None = None
    for rule in (RULES[i] for i in due):
        if rule.also and not any(word in lowered for word in rule.also):
            continue
        if nested and rule is _BASE64_RULE:
            continue
        edits: list[tuple[tuple[int, int], str]] = []
        for m in rule.pattern.finditer(text):
            # A match inside the value before it, which went on (`_value_end`), is part of it.
            if (not edits or m.start() >= edits[-1][0][1]) and (span := _secret_span(rule, m)):
                edits.append((span, rule.kind))
        text, sources = _splice(text, edits, sources, track)
    for secret, kind in found:  # what only the library knew, where the rules left it whole
        if secret in text:
            edits = [((m.start(), _value_end(text, m.start(), m.end())), kind)
                     for m in re.finditer(re.escape(secret), text)
                     if not _in_marker(text, m.start())]
            text, sources = _splice(text, _apart(edits), sources, track)
    return text, sources


def _apart(edits: list[tuple[tuple[int, int], str]]) -> list[tuple[tuple[int, int], str]]:
    """`edits` without any that starts inside the one before: a library finding that went on
    (`_value_end`) may have taken in the next place the same text stands."""
    kept: list[tuple[tuple[int, int], str]] = []
    for edit in edits:
        if not kept or edit[0][0] >= kept[-1][0][1]:
            kept.append(edit)
    return kept


def _splice(text: str, edits: list[tuple[tuple[int, int], str]], sources: list[int] | None,
            track: bool) -> tuple[str, list[int] | None]:
    """`text` with each (span, kind) of `edits` (in order, apart) replaced by its marker, and
    `sources` (None: `text` is still the view) kept in step when tracking."""
    if not edits:
        return text, sources
    if track and sources is None:
        sources = list(range(len(text)))
    pieces: list[str] = []
    kept: list[int] = []
    at = 0
    for (start, end), kind in edits:
        marker = MARKER.format(kind)
        pieces += (text[at:start], marker)
        if sources is not None:
            kept += sources[at:start]
            kept += [-1] * len(marker)
        at = end
    pieces.append(text[at:])
    if sources is not None:
        kept += sources[at:]
    return "".join(pieces), kept if sources is not None else None


def _write_back(text: str, origins: list[int], redacted: str, sources: list[int]) -> str:
    """The redacted view's markers put into `text`: each run of the view that was kept is
    copied from `text` with the invisible characters inside it; a marker takes the place of
    all that its secret came from."""
    out: list[str] = []
    i, end, last_view = 0, len(redacted), len(origins) - 1
    sources = [*sources, -1]  # every kept run ends at a -1
    while i < end:
        if sources[i] < 0:  # a marker (or markers side by side)
            j = i + 1
            while j < end and sources[j] < 0:
                j += 1
            out.append(redacted[i:j])
        else:  # a kept run: only a marker cuts one (`_splice`), so its indices are consecutive
            j = sources.index(-1, i)
            first, last = sources[i], sources[j - 1]
            out.append(text[0 if first == 0 else origins[first]
                            : len(text) if last == last_view else origins[last] + 1])
        i = j
    return "".join(out)


# --- the maintained ruleset ------------------------------------------------------------------
# Loaded (0.1 s and a Go runtime) by the service as it starts (`warm`), by a CLI command on
# first use; never by hooks.
_LIBRARY: Any = None
_LIBRARY_ERROR = ""
_MIN_LIBRARY_SECRET = 8  # shorter findings ("admin", "test") would cut ordinary words
# Provider tokens are runs of 12+ token characters with a digit or mixed case in them; text
# without one (most chat) skips the library call.
_TOKEN_RUN = re.compile(r"[\w+/=.~-]{12,}")
_TOKEN_MIX = re.compile(r"\d|[a-z][A-Z]|[A-Z]{2}[a-z]|[A-Z][a-z]+[A-Z]")


def _library() -> Any:
    """The library, loaded on first use; None when it cannot be (`_LIBRARY_ERROR` says why,
    and one warning line is logged once): the rules then run alone."""
    global _LIBRARY, _LIBRARY_ERROR
    if _LIBRARY is None and not _LIBRARY_ERROR:
        _LIBRARY_ERROR = _address_space_short() or ""
        if not _LIBRARY_ERROR:
            try:
                import betterleaks

                betterleaks.scan_string("warm-up")  # compiles the rules once
                _LIBRARY = betterleaks
            except Exception as exc:  # no wheel for this platform, a broken install
                _LIBRARY_ERROR = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        if _LIBRARY_ERROR:
            logging.getLogger("semantic_memory.redaction").warning(
                "secret redaction: betterleaks is not loaded (%s); the project's own rules "
                "run alone", _LIBRARY_ERROR)
    return _LIBRARY


def warm() -> None:
    """Load the library now (the service calls this as it starts): a library that cannot load
    says so at start, in the log, and not at the first write, which may be a spooled one
    replayed at every start."""
    _library()


# Address space the library's Go runtime reserves as it loads and runs its first scan, which
# grows with the number of Ps (GOMAXPROCS, by default the CPUs): measured with `ulimit -v`, the
# smallest headroom above what the process held at which loading + one scan worked in 20 runs
# of 20 was 1.7 GiB at 2 Ps, 2.3 at 16, 2.7 at 64, 3.05 at 256 (≈ 1.5 + 0.2·log2(Ps) GiB;
# just below it some runs abort). Below it the runtime ends the process (`fatal error: out of
# memory`, `pthread_create failed`) where no `except` can catch it: the service died at its
# first text holding a commit SHA, and at every restart while that write was in the spool.
_GO_BASE_GIB, _GO_PER_DOUBLING_GIB, _GO_MARGIN = 1.5, 0.2, 1.25


def _address_space_short() -> str | None:
    """Why the address-space limit (RLIMIT_AS, `ulimit -v`) leaves the library's Go runtime
    too little to load, or None when it leaves enough (or there is none)."""
    if resource is None:
        return None
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    procs = max(_go_procs(), 1)
    need = int((_GO_BASE_GIB + _GO_PER_DOUBLING_GIB * math.log2(procs)) * _GO_MARGIN * 2**30)
    left = limit - _address_space_used()
    if left >= need:
        return None
    return (f"the address-space limit (ulimit -v) allows {_mib(limit)}, {_mib(max(left, 0))} of "
            f"it free; its Go runtime needs about {_mib(need)} on {procs} CPUs")


def _go_procs() -> int:
    """How many Ps the Go runtime will run: GOMAXPROCS, else the CPUs this process may use."""
    try:
        if (procs := int(os.environ.get("GOMAXPROCS", ""))) > 0:
            return procs
    except ValueError:  # unset or not a number: Go ignores it too
        pass
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _address_space_used() -> int:
    """The bytes of address space this process holds (Linux); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _mib(size: int) -> str:
    return f"{size // 2**20} MiB"


def _library_spans(text: str) -> list[tuple[str, str]]:
    """(secret, kind) for each library finding that is a literal part of `text`, longest first
    (a finding inside a base64 blob the library decoded has no span here: the rules see the
    blob). Findings are mapped back by their matched text, so only the value goes."""
    text = _token_lines(text)
    if not text:
        return []  # no run of token characters a provider rule could match: skip the call
    library = _library()
    if library is None:
        return []
    found: dict[str, str] = {}
    for finding in _scan(library, text):
        secret = finding.secret or ""
        if (len(secret) >= _MIN_LIBRARY_SECRET and secret in text and "\n" not in secret
                and not _PLACEHOLDER.match(secret) and not _documented_sample(secret)):
            found.setdefault(secret, finding.rule_id)
    return sorted(found.items(), key=lambda item: -len(item[0]))


def _token_lines(text: str) -> str:
    """The lines of `text` holding a token-like run: what the library needs to see (its rules
    match within a line; key blocks are the rules' job). Most lines of a note are prose or code
    without one, and the library's cost grows with what it scans."""
    lines = text.splitlines()
    keep = [line for line in lines
            if any(_TOKEN_MIX.search(run.group()) for run in _TOKEN_RUN.finditer(line))]
    kept = "\n".join(keep) if len(keep) < len(lines) else text
    return _LONG_RUN.sub(lambda run: run.group()[:_LIBRARY_RUN] + " ", kept)


# The characters of one token run the library sees. Its keyword rules (`TOKEN=<run>`) cost the
# square of the run's length: 0.02 s for 1,000 characters, 1.4 s for 7,000, 100 s for 28,000
# (measured, one core). No provider token is that long, and a value that is goes to the rules.
_LIBRARY_RUN = 1_024
_LONG_RUN = re.compile(rf"[A-Za-z0-9_+/=.~-]{{{_LIBRARY_RUN + 1},}}")


def _scan(library: Any, text: str) -> list[Any]:
    """The library's findings, scanning in overlapping chunks: its cost grows faster than the
    text on some hostile inputs (a megabyte of `-----BEGIN PRIVATE KEY-----`), not per chunk."""
    findings: list[Any] = []
    step = _CHUNK - _OVERLAP
    for start in range(0, max(len(text) - _OVERLAP, 1), step):
        try:
            findings += library.scan_string(text[start : start + _CHUNK])
        except Exception:  # a scan error must not cost the memory: the rules still run
            continue
    return findings


_CHUNK, _OVERLAP = 32_768, 2_048  # a secret shorter than the overlap is whole in one chunk


def ruleset_info() -> dict[str, str]:
    """The secret ruleset in use, for `memory-mcp plugins` and stats."""
    library = _library()
    if library is None:
        return {"name": "betterleaks", "version": "", "status": f"unavailable ({_LIBRARY_ERROR})",
                "own_rules": str(len(RULES))}
    return {"name": "betterleaks", "version": str(getattr(library, "__version__", "")),
            "upstream": str(getattr(library, "__upstream_version__", "")), "status": "loaded",
            "own_rules": str(len(RULES))}


_MARKERS = re.compile(r"\[REDACTED:[\w.-]{1,80}\]")


def has_substance(text: str) -> bool:
    """Whether redacted `text` still says something: three letters or digits outside the
    markers ("deploy key [REDACTED:…]" yes; a pasted token alone, or "[REDACTED:…] ok" no)."""
    if "[REDACTED:" not in text:
        return True
    rest = _MARKERS.sub(" ", text)
    return sum(ch.isalnum() for ch in rest) >= 3 and bool(re.search(r"[^\W\d_]{2}", rest))


def _in_marker(text: str, at: int) -> bool:
    """Whether position `at` lies inside a marker already written (redacting twice is a no-op:
    `://[REDACTED:url-token]@` is not a `user:password@`)."""
    opened = text.rfind("[REDACTED:", max(0, at - 100), at + len("[REDACTED:"))
    return opened >= 0 and "]" not in text[opened:at]


def _secret_span(rule: Rule, m: re.Match[str]) -> tuple[int, int] | None:
    """What `rule` replaces of its match `m` (its `secret` group, or all of it, up to where the
    value really ends: `_value_end`), or None when the match is no secret (`accept`, a
    documented sample) or lies in a marker already written."""
    start, end = m.span("secret") if "secret" in m.re.groupindex else m.span()
    if (_in_marker(m.string, start) or (rule.accept and not rule.accept(m))
            or _documented_sample(m.string[start:end]) or _elided(m.string, start, end)):
        return None
    if "sep" in m.re.groupindex:
        end = _to_line_end(m, end)
    return start, _value_end(m.string, start, end)


# A docs placeholder: a token's prefix and nothing but filler after it (`ghp_xxxx…`,
# `AKIAXXXX…`, `sk-****…`), or an ellipsis (`sk-...your key here...`, `xoxb-…`). A generated
# token is never all x; a value with more in it (Slack's `T00000000/B00000000/XXXX…`) is no
# bare placeholder and goes.
_FILLER = re.compile(r"(?i)(?:[a-z0-9]{0,12}?[_-]){0,3}?[a-z0-9]{0,6}?([x*])\1{7,}(?:[_-]\1+)*$"
                     r"|[a-z0-9]{0,12}[_-]{0,2}(?:\.{3}|…)")


# A token's prefix alone (`sk-ant-`, `ghp_`, `xoxb-`): before an ellipsis, a docs placeholder.
_PREFIX_ONLY = re.compile(r"[A-Za-z0-9]{1,12}(?:[_-][A-Za-z0-9]{1,12}){0,2}[_-]")


def _elided(text: str, start: int, end: int) -> bool:
    """`sk-ant-...`: a value that is a prefix and an ellipsis (a bare value ends before it)."""
    return (text.startswith(("...", "…"), end)
            and _PREFIX_ONLY.fullmatch(text, start, end) is not None)


def _documented_sample(value: str) -> bool:
    """A vendor's documented example (AWS's `AKIAIOSFODNN7EXAMPLE`, `…/bPxRfiCYEXAMPLEKEY`):
    `EXAMPLE` in capitals inside a one-line value (a generated token holds those seven
    letters by chance about once in 10^12 values), or a placeholder made of filler."""
    return "\n" not in value and ("EXAMPLE" in value or _FILLER.match(value) is not None)


# Before a YAML or ini name: nothing on its line but indentation and a list's dash.
_NAME_AT_LINE_START = re.compile(r"(?:^|\n)[ \t]*(?:-[ \t]+)?$")
_NAME_TAIL = re.compile(r"[\w.-]*[\"']?$")
# What closes a call or a literal in code (`…, password=pw).`, `{token=x}`): not the value's.
_CALL_END = re.compile(r"[)\]}>]+[.,;:]?")
# The rest of a bare value's run, when nothing but spaces follow it on its line.
_RUN_TO_LINE_END = re.compile(r"(?P<run>\S*+)[ \t\r]*+(?:\n|\Z)")


def _to_line_end(m: re.Match[str], end: int) -> int:
    """Where an unquoted `NAME=value` (or a YAML/ini `name: value` line) that is the last
    thing on its line ends: at the line's end. In an .env file, a YAML scalar or an ini value
    the punctuation a bare value stops at (`…pR!!`, `abc;def,ghi`) is part of it; in code
    (`f(password=pw)`, `login(user, password=pw).`) the assignment does not start a setting,
    or what follows closes a call. Only a name that starts a setting reads on, so a run of
    text is read once (hostile input stays linear)."""
    text = m.string
    if "q" in m.re.groupindex and m.group("q") or end >= len(text) or text[end].isspace():
        return end
    if "name" in m.re.groupindex:
        name_start = m.start("name")
    else:  # the generic rule starts at its separator; its name stands just before
        name = _NAME_BEFORE.search(text, max(0, m.start() - 80), m.start())
        if name is None:
            return end
        name_start = name.start()
    window = max(0, name_start - 100)
    head = text[window:name_start]
    head = head[: len(head) - len(_NAME_TAIL.search(head).group())]  # `DB_` of `DB_PASS…`
    sep = m.group("sep")
    if "=" in sep:
        starts_setting = head[-1:].isspace() if head else window == 0
    else:
        line = _NAME_AT_LINE_START.search(head)
        starts_setting = ":" in sep and line is not None and (line.group().startswith("\n")
                                                             or window == 0)
    if not starts_setting:
        return end
    rest = _RUN_TO_LINE_END.match(text, end)
    if rest is None or _CALL_END.fullmatch(rest.group("run")):
        return end
    return rest.end("run")


# A line that is only the rest of a token cut by a line wrap: token characters, padding last.
_WRAPPED_LINE = re.compile(
    r"[ \t]*\r?\n[ \t]*(?P<run>[A-Za-z0-9+/_.~-]{8,}+={0,2})[ \t]*(?=\r?\n|$)")
# The next literal of a string concatenation: `"…" + "…"`, `'…' . '…'`, `'…' || '…'`, or
# adjacent literals (Python, C), over a line break too.
_NEXT_LITERAL = re.compile(r"[ \t]*(?:\+|\.|\|\|)?[ \t]*(?:\\?\r?\n[ \t]*(?:\+|\.|\|\|)?[ \t]*)?"
                           r"(?P<q>[\"'`])(?P<run>[A-Za-z0-9+/=_.~-]{4,}+)(?P=q)")
_MAX_PIECES = 8


def _value_end(text: str, start: int, end: int) -> int:
    """`end` moved past the rest of a value that goes on: a generated value cut by a line
    wrap ("the API token is dM2x…\niSPO…"), each whole line after it that is nothing but more
    of the same; a quoted value that a concatenation continues (`"dM2x…" + "iSPO…"`)."""
    quote = text[start - 1] if start > 0 else ""
    if quote and quote in "\"'`" and text.startswith(quote, end):
        for _ in range(_MAX_PIECES):
            piece = _NEXT_LITERAL.match(text, end + 1)
            if piece is None or not _generated(piece.group("run")):
                break
            end = piece.end() - 1  # the closing quote stays
        return end
    if end - start < 16 or not _generated(text[start:end]):
        return end
    for _ in range(_MAX_PIECES):
        line = _WRAPPED_LINE.match(text, end)
        if line is None or not _generated(line.group("run")):
            break
        end = line.end("run")
    return end


def _generated(run: str) -> bool:
    """A piece of a token: letters with digits or with mixed case (not a camelCase name),
    mostly not words, no placeholder, and as varied as its length allows (≥ 3 bits a
    character from 16 characters on)."""
    if (_PLACEHOLDER.match(run) or not re.search(r"[A-Za-z]", run)
            or not (re.search(r"\d", run) or re.search(r"[a-z]", run) and re.search(r"[A-Z]", run)
                    and not re.fullmatch(_IDENT, run))
            or sum(map(len, re.findall(r"[a-z]{3,}", run))) * 2 >= len(run)):
        return False
    return _entropy(run) >= min(3.0, math.log2(len(run)) - 0.5)
