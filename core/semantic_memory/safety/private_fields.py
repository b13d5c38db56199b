"""The service's side of `<private>…</private>` (rule in `semantic_memory.private`): removed
from every free-text field of a memory (content, project, tags, session) before redaction, any channel, or the store sees it.

Writers strip it too before they spool or log (hook adapters, MCP proxy, opencode plugin);
this catches every write that did not come through them (REST, MCP, CLI, spool replay)."""

from __future__ import annotations

from ..errors import Rejected
from ..models import NewMemory
from ..private import strip_private

__all__ = ["strip_private_fields"]


def strip_private_fields(memory: NewMemory) -> None:
    """Strip private spans from every free-text field in place; refuse a memory whose content
    or project is nothing else (a project cannot silently become global)."""
    for name in ("content", "project"):
        value = getattr(memory, name)
        if isinstance(value, str):
            stripped = strip_private(value)
            if stripped is not value and not stripped.strip():
                raise Rejected(f"{name}: nothing but <private> text; not stored")
            setattr(memory, name, stripped.strip() if name == "project" else stripped)
    if isinstance(memory.session, str):
        memory.session = strip_private(memory.session).strip() or None
    if isinstance(memory.tags, list):
        tags = [strip_private(t) if isinstance(t, str) else t for t in memory.tags]
        memory.tags = [t for t in tags if not isinstance(t, str) or t.strip()]
