"""Write-side hygiene: redact secrets from every memory; refuse prompt-injection tool output.

Memory content ends up inside prompts later, so what is stored must neither leak a credential
nor carry instructions aimed at a future agent. The secret rules live in `redaction`, the
injection rules in `injection_filter`.
"""

from __future__ import annotations

from ..config import Settings
from ..errors import Rejected
from ..limits import MAX_PROJECT_CHARS, MAX_SESSION_CHARS, MAX_TAG_CHARS
from ..models import NewMemory
from ..hookspecs import hookimpl
from ..safety.injection_filter import looks_like_injection
from ..safety.private_fields import strip_private_fields
from ..safety.redaction import has_substance, redact_many
from ..sources import UNTRUSTED_SOURCES

__all__ = ["UNTRUSTED_SOURCES", "filter_ingest", "looks_like_injection"]

# UNTRUSTED_SOURCES (sources.py): content from outside the conversation (tool results, files,
# web pages); any `kind` `artifact` counts too. What the user says in chat (a "remember …"
# prompt, an MCP store the agent makes for the user, compaction of the conversation) is not
# checked.


@hookimpl
def filter_ingest(memory: NewMemory, settings: Settings) -> None:
    """Redact every stored free-text field; refuse untrusted content that reads as injection."""
    strip_private_fields(memory)  # first: no later rule (or its refusal reason) sees it
    if isinstance(memory.content, str):
        # Checked before redaction: a base64 run that hides an instruction may read as a secret.
        if (memory.source in UNTRUSTED_SOURCES or memory.kind == "artifact") and (
            looks_like_injection(memory.content)
        ):
            raise Rejected("tool output matches a prompt-injection pattern; not stored")
    _redact_fields(memory, settings.max_content_chars)
    if isinstance(memory.content, str) and not has_substance(memory.content):
        raise Rejected("content: nothing but a redacted secret is left; not stored")


def _redact_fields(memory: NewMemory, max_content_chars: int) -> None:
    """Content, project, session, each tag, kind and source redacted with one library call
    (`redact_many`). A marker can be longer than the secret it replaces: each field (content
    too, which was within `max_content_chars` as sent) is cut to its limit rather than the
    memory refused for it. A kind or source is an identifier that a marker cannot stand in:
    one holding a secret is refused."""
    tags = memory.tags if isinstance(memory.tags, list) else []
    fields = [memory.kind, memory.source, memory.content, memory.project, memory.session, *tags]
    redacted = iter(redact_many([f for f in fields if isinstance(f, str)]))
    kind, source, content, project, session, *tags = [
        next(redacted) if isinstance(f, str) else f for f in fields]
    for name, before, after in (("kind", memory.kind, kind), ("source", memory.source, source)):
        if after != before:
            raise Rejected(f"{name}: holds a secret; not stored")
    memory.content = _within(content, max_content_chars)
    if isinstance(project, str):
        memory.project = project[:MAX_PROJECT_CHARS]
    if isinstance(session, str):
        memory.session = session[:MAX_SESSION_CHARS]
    if isinstance(memory.tags, list):
        memory.tags = [t[:MAX_TAG_CHARS] if isinstance(t, str) else t for t in tags]


def _within(content: object, limit: int) -> object:
    """Redacted `content` cut to `limit` where its markers made it longer: the spaces at its
    end first, then the last characters (what the markers added, at most)."""
    if not isinstance(content, str) or len(content) <= limit:
        return content
    return content.rstrip()[:limit]
