"""Write-side hygiene: redact secrets from every memory; refuse prompt-injection tool output.

Memory content ends up inside prompts later, so what is stored must neither leak a credential
nor carry instructions aimed at a future agent.
"""

from __future__ import annotations

import re

from ..config import Settings
from ..models import NewMemory
from ..errors import Rejected
from ..plugins import hookimpl

REDACTED = "[REDACTED]"

SECRET_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}\b"),
    re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"),  # OpenAI / Anthropic keys
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),  # JWT
    re.compile(r"(?i)\b(authorization:\s*bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(
        r"(?i)\b((?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
        r"\s*[:=]\s*)(['\"]?)[^\s'\"]{4,}\2"
    ),
]

#: Classic prompt-injection phrasings; tool output that contains them is not remembered.
INJECTION_PATTERNS = [
    re.compile(r"(?i)\bignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above)\s+"
               r"(?:instructions|prompts|messages|rules)"),
    re.compile(r"(?i)\bdisregard\s+(?:all\s+)?(?:the\s+)?(?:previous|prior|above|your)\s+"
               r"(?:instructions|prompts|rules)"),
    re.compile(r"(?i)\byou\s+are\s+now\s+(?:in\s+)?(?:developer|dan|jailbreak)"),
    re.compile(r"(?i)<\s*/?\s*(?:system|im_start|im_end)\b"),
    re.compile(r"忽略.{0,12}(?:指令|指示|提示)"),
    re.compile(r"(?i)\bnew\s+system\s+prompt\b"),
]

#: Sources whose content comes from outside the conversation (tool results, files, web).
UNTRUSTED_SOURCES = frozenset({"tool"})


def redact(text: str) -> str:
    for pattern in SECRET_PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def looks_like_injection(text: str) -> bool:
    return any(p.search(text) for p in INJECTION_PATTERNS)


@hookimpl
def filter_ingest(memory: NewMemory, settings: Settings) -> None:
    if isinstance(memory.content, str):
        memory.content = redact(memory.content)
        if (memory.source in UNTRUSTED_SOURCES or memory.kind == "artifact") and (
            looks_like_injection(memory.content)
        ):
            raise Rejected("tool output matches a prompt-injection pattern; not stored")
