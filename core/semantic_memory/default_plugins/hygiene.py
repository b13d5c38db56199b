"""Write-side hygiene: redact secrets from every memory; refuse prompt-injection tool output.

Memory content ends up inside prompts later, so what is stored must neither leak a credential
nor carry instructions aimed at a future agent. The secret rules live in `redaction`; the
injection patterns below match text folded by `normalize_for_matching` (NFKC, no zero-width or
other format characters, one space per whitespace run, casefolded), so they are written in
plain lowercase and cannot be dodged with look-alike letters or invisible characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import Settings
from ..errors import Rejected
from ..models import MAX_PROJECT_CHARS, MAX_TAG_CHARS, NewMemory
from ..plugins import hookimpl
from .redaction import has_substance, redact_many
from .textnorm import normalize_for_matching

# --- "ignore previous instructions", in its many wordings -----------------------------------
_VERB = (
    r"(?:ignore|disregard|forget|override|bypass|skip|discard|dismiss|abandon|neglect"
    r"|do not follow|don't follow|stop following|no longer follow|set aside|put aside)"
)
_DETERMINERS = r"(?:(?:all|any|of|the|your|my|these|those|every|each)\s+)*"
_EARLIER = (
    r"(?:previous|previously given|prior|preceding|earlier|above|aforementioned|foregoing"
    r"|former|initial|original)"
)
_TARGET = (
    r"(?:instructions?|directions?|directives?|guidelines?|rules?|context|prompts?|commands?"
    r"|orders?|guidance|messages?|constraints?|restrictions?|conversation|programming|training"
    r"|policies|safeguards)"
)
_WORDS = r"(?:\S+\s+){0,2}?"  # a couple of words in between: "all previous *safety* rules"

# After one of the verbs: "(all) previous … rules", "the rules above", "your … rules",
# "all instructions", "everything above", "everything you were told".
_OVERRIDE = (
    rf"\b{_VERB}\s+(?:"
    rf"{_DETERMINERS}{_EARLIER}\s+{_WORDS}{_TARGET}\b"
    rf"|{_DETERMINERS}{_WORDS}{_TARGET}\s+(?:(?:given|written|stated|provided)\s+)?"
    r"(?:above|earlier|previously|before this|so far|from before|from earlier)\b"
    rf"|(?:whatever\s+)?{_DETERMINERS}{_WORDS}{_TARGET}\s+(?:that\s+)?you(?:'ve| have)?\s+"
    r"(?:\S+\s+)?(?:received|been given|were given|got|were told)\b"
    rf"|(?:all\s+)?(?:of\s+)?your\s+{_WORDS}{_TARGET}\b"
    r"|(?:all|any)\s+(?:of\s+)?(?:the\s+)?(?:\S+\s+)?"
    r"(?:instructions|directions|directives|guidelines|prompts)\b"
    r"|(?:everything|anything|all(?: of)?(?: the)?)\s+"
    r"(?:above|before this|so far|until now|up to now|earlier|previously)\b"
    r"|(?:everything|anything|all|what)(?: that)?\s+"
    r"(?:you(?:'ve| have)? (?:were |been )?(?:told|given|instructed)|was (?:said|written) above)"
    r")"
)
_NEW_ORDERS = (
    r"\byour (?:new|real|actual|updated|true) (?:instructions|task|goal|objective|directives?)"
    r" (?:is|are)\b"
)


def _other_language(verbs: str, scope: str, nouns: str, *, scope_after: bool) -> str:
    """verb … scope … noun ("ignoriere alle vorherigen Anweisungen"), or with the scope after
    the noun as Romance languages put it ("ignora las instrucciones anteriores")."""
    gap = r"(?:\s+\S+){0,3}?\s+"
    if scope_after:
        return rf"\b(?:{verbs})\b{gap}(?:{nouns})(?:\s+\S+)?\s+(?:{scope})"
    return rf"\b(?:{verbs})\b{gap}(?:{scope})(?:\s+\S+)?\s+(?:{nouns})"


_OTHER_LANGUAGES = [
    # Chinese (simplified and traditional): verb, scope, noun within a few characters.
    r"(?:忽略|无视|無視|忽视|忽視|不要理会|不要理會|忘记|忘記|忘掉|跳过|跳過|绕过|繞過).{0,6}?"
    r"(?:之前|以前|先前|上面|上述|此前|前面|所有|全部|一切).{0,6}?"
    r"(?:指令|指示|提示|说明|說明|规则|規則|命令|设定|設定|要求)",
    # Japanese: scope, noun, then the verb.
    r"(?:以前|前|これまで|上記|先ほど|上|全て|すべて)の.{0,10}?"
    r"(?:指示|命令|指令|ルール|プロンプト|設定).{0,8}?(?:無視|忘れ)",
    # Spanish, Portuguese, Italian.
    _other_language(
        r"ignora\w*|ignore\w*|olvid\w*|omit\w*|descart\w*|desconsider\w*|dimentica\w*"
        r"|haz caso omiso|no sigas",
        r"anteriores|previas|precedentes|de arriba|prévias|precedenti|sopra",
        r"instrucciones|indicaciones|órdenes|reglas|directrices|instruções|regras"
        r"|orientações|istruzioni|regole",
        scope_after=True),
    _other_language(
        r"ignora\w*|ignore\w*|olvid\w*|omit\w*|descart\w*|desconsider\w*|dimentica\w*",
        r"todas las|todas as|tutte le|tus|suas|tue",
        r"instrucciones|indicaciones|reglas|instruções|regras|istruzioni|regole",
        scope_after=False),
    # French.
    _other_language(
        r"ignore[rz]?|oublie[rz]?|néglige[rz]?|ne (?:tiens|tenez) pas compte",
        r"précédentes|antérieures|ci-dessus|d['’]avant|préalables",
        r"instructions|consignes|directives|règles|indications|ordres",
        scope_after=True),
    _other_language(
        r"ignore[rz]?|oublie[rz]?|néglige[rz]?",
        r"toutes les|tous les|tes|vos",
        r"instructions|consignes|directives|règles|indications",
        scope_after=False),
    # German, verb first or last ("die vorherigen Anweisungen ignorieren").
    _other_language(
        r"ignorier\w*|vergiss|vergesst|vergessen sie|missacht\w*|übergeh\w*|überspring\w*",
        r"vorherig\w*|vorangegangen\w*|bisherig\w*|obig\w*|früher\w*|vorig\w*|alle|deine|ihre",
        r"anweisung\w*|instruktion\w*|befehl\w*|regeln|vorgaben|richtlinien|anordnung\w*",
        scope_after=False),
    r"\b(?:vorherig\w*|vorangegangen\w*|bisherig\w*|obig\w*)\s+(?:anweisung\w*|instruktion\w*"
    r"|befehl\w*|regeln|vorgaben)\s+(?:\S+\s+)?(?:ignorier\w*|vergess\w*|missacht\w*)",
    # Russian.
    _other_language(
        r"игнорир\w*|проигнорир\w*|забудь\w*|забудьте|пренебреги\w*|отбрось\w*"
        r"|не обращай\w* внимания на",
        r"предыдущ\w*|прежн\w*|вышеуказанн\w*|вышеизложенн\w*|прошл\w*|все|всё|твои|ваши|свои",
        r"инструкц\w*|указани\w*|правил\w*|команд\w*|директив\w*|установк\w*|распоряжени\w*",
        scope_after=False),
]

# --- chat-template role markers and fake system headers -------------------------------------
_ROLE_MARKERS = [
    r"<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|start_header_id"
    r"|end_header_id|eot_id)\|>",
    r"\[/?inst\]",
    r"<<\s*/?\s*sys\s*>>",
    r"<\s*/?\s*(?:system|im_start|im_end|start_of_turn|end_of_turn)\b",
    r"#{2,}\s*(?:system|instructions?)\s*:",
    r"\b(?:system|developer|admin(?:istrator)?)\s+(?:prompt|message|instructions?|override)\s*:",
    r"\b(?:new|updated|real|actual|revised) system (?:prompt|message|instructions?)\b",
    r"\b(?:begin|start|end) (?:of )?(?:the )?system prompt\b",
]

# --- persona switches -----------------------------------------------------------------------
_PERSONA = [
    r"\byou(?: are|'re) now (?:an? |the |my |in )?(?:\S+ ){0,2}?(?:ai|assistant|chatbot|bot"
    r"|language model|agent|dan|jailbroken|unrestricted|unfiltered|uncensored|evil"
    r"|(?:developer|dev|god|jailbreak|unrestricted|dan) mode)\b",
    r"\bfrom now on,? (?:you (?:will |shall |must |are going to )?(?:act|behave|respond|answer"
    r"|pretend|role-?play|be an?|are an?)|(?:act|behave|pretend|role-?play) (?:as|like|to be))\b",
    r"\bpretend (?:that )?you(?:'re| are)\b",
    r"\bpretend to be an? (?:\S+ )?(?:ai|assistant|model|chatbot|bot)\b",
    r"\b(?:act|behave|respond|role-?play) as (?:an? |the )?(?:dan|jailbroken|unrestricted"
    r"|unfiltered|uncensored|evil)\b",
    r"\bact as if you (?:have no|are not bound|were not|had no)\b",
    r"\bdo anything now\b",
    r"\b(?:developer|jailbreak|god) mode (?:enabled|activated|on)\b",
]

# --- text addressed to the agent reading it -------------------------------------------------
_AGENT = (
    r"(?:ai|llm|(?:ai |language )?model|assistant|agent|chatbot|ai agent|ai assistant"
    r"|coding agent|claude|chatgpt|copilot|gemini)"
)
_ADDRESSED = [
    rf"\b(?:attention|hey|dear|note to|message to|instructions? (?:for|to))\s+"
    rf"(?:the\s+|all\s+|any\s+)?{_AGENT}s?\b",
    r"\b(?:ai|llm)\s+(?:assistant|agent|model)s?\s*[:,]\s*(?:please\s+)?(?:run|execute|ignore"
    r"|send|delete|print|reveal|output|fetch|curl|download|open|write|do|you must|you should)\b",
    r"\b(?:ai|llm) (?:assistant|agent|model)s? (?:must|should|need to|are required to|shall)\b",
    rf"\bif you(?:'re| are) an? {_AGENT}\b",
    rf"\b{_AGENT}s? (?:reading|processing) this\b",
]

# --- exfiltration asks ----------------------------------------------------------------------
_EXFILTRATION = [
    r"\b(?:send|post|upload|exfiltrate|transmit|forward|email|leak|curl|wget|beam)\b.{0,40}?"
    r"(?:~/\.ssh|\.ssh/|id_rsa|id_ed25519|\.aws/credentials|/etc/(?:passwd|shadow)|\.netrc"
    r"|contents of (?:the )?\S*\.env\b|(?:your|the user'?s?) (?:\S+ )?(?:secrets|credentials"
    r"|passwords|api keys|tokens|private keys|environment variables|env vars|ssh keys)"
    r"|(?:your|the) system prompt|(?:the|this) (?:conversation|chat) history)",
    r"\b(?:reveal|disclose|leak|dump|exfiltrate|recite)\s+(?:me\s+)?(?:your|the)\s+(?:\S+\s+)?"
    r"(?:system prompt|system message|hidden instructions|initial instructions|original"
    r" instructions|developer message|instructions above|prompt above)",
    r"\b(?:print|show|output|display|repeat|tell me|give me|share|write out)\s+(?:me\s+)?your\s+"
    r"(?:\S+\s+)?(?:system prompt|system message|instructions|initial prompt|hidden prompt"
    r"|developer message|rules)",
]


@dataclass(frozen=True)
class _Family:
    """Patterns that run only if one of `needles` occurs in the folded text: a substring test
    costs a fraction of a regex scan, and most text holds none of a family's needles."""

    needles: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]


def _family(needles: tuple[str, ...], *patterns: str) -> _Family:
    return _Family(needles, tuple(re.compile(p) for p in patterns))


FAMILIES = (
    _family(("ignore", "disregard", "forget", "override", "bypass", "skip", "discard", "dismiss",
             "abandon", "neglect", "follow", "aside"), _OVERRIDE),
    _family(("your new", "your real", "your actual", "your updated", "your true"), _NEW_ORDERS),
    _family((  # their nouns, rarer in ordinary text than their verbs
        "指令", "指示", "提示", "说明", "說明", "规则", "規則", "命令", "设定", "設定", "要求",
        "ルール", "プロンプト", "instruc", "indicac", "órdenes", "reglas", "directrices",
        "instruç", "regras", "orientaç", "istruzioni", "regole", "consignes", "directives",
        "règles", "indications", "ordres", "anweisung", "instruktion", "befehl", "regeln",
        "vorgaben", "richtlinien", "anordnung", "инструкц", "указани", "правил", "команд",
        "директив", "установк", "распоряжени",
    ), *_OTHER_LANGUAGES),
    _family(("<|", "[inst", "[/inst", "sys", "im_start", "im_end", "_of_turn", "##",
             "developer", "admin"), *_ROLE_MARKERS),
    _family(("you are now", "you're now", "from now on", "pretend", "act as", "behave as",
             "respond as", "roleplay", "role-play", "anything now", "mode on", "mode enabled",
             "mode activated"), *_PERSONA),
    _family((" ai", "llm", "model", "assistant", "agent", "chatbot", "claude", "chatgpt",
             "copilot", "gemini"), *_ADDRESSED),  # each pattern names the agent
    _family(("ssh", "id_rsa", "id_ed25519", "credentials", "/etc/", "netrc", ".env", "secrets",
             "passwords", "api keys", "tokens", "private keys", "environment variables",
             "env vars", "system prompt", "history", "system message", "instructions",
             "initial prompt", "hidden prompt", "developer message", "prompt above", "rules"),
            *_EXFILTRATION),
)

#: Sources whose content comes from outside the conversation (tool results, files, web).
UNTRUSTED_SOURCES = frozenset({"tool"})


def looks_like_injection(text: str) -> bool:
    """Whether `text` carries instructions aimed at an agent (matched on the folded text)."""
    folded = " " + normalize_for_matching(text)  # the space lets " ai" match at the start
    return any(
        any(p.search(folded) for p in family.patterns)
        for family in FAMILIES
        if any(needle in folded for needle in family.needles)
    )


@hookimpl
def filter_ingest(memory: NewMemory, settings: Settings) -> None:
    """Redact every stored free-text field; refuse untrusted content that reads as injection."""
    _redact_fields(memory)
    if isinstance(memory.content, str):
        if (memory.source in UNTRUSTED_SOURCES or memory.kind == "artifact") and (
            looks_like_injection(memory.content)
        ):
            raise Rejected("tool output matches a prompt-injection pattern; not stored")
        if not has_substance(memory.content):
            raise Rejected("content: nothing but a redacted secret is left; not stored")


def _redact_fields(memory: NewMemory) -> None:
    """Content, project and each tag redacted with one library call (`redact_many`). A marker
    can be longer than the secret it replaces: cut to the field's limit rather than refuse the
    memory for it."""
    tags = memory.tags if isinstance(memory.tags, list) else []
    fields = [memory.content, memory.project, *tags]
    redacted = iter(redact_many([f for f in fields if isinstance(f, str)]))
    content, project, *tags = [next(redacted) if isinstance(f, str) else f for f in fields]
    memory.content = content
    if isinstance(project, str):
        memory.project = project[:MAX_PROJECT_CHARS]
    if isinstance(memory.tags, list):
        memory.tags = [t[:MAX_TAG_CHARS] if isinstance(t, str) else t for t in tags]
