"""The service's side of `<private>…</private>` (rule in `semantic_memory.private`): removed
from a memory's content and tags before redaction, any channel, or the store sees it.

Writers strip it too before they spool or log (hook adapters, MCP proxy, opencode plugin);
this catches every write that did not come through them (REST, MCP, CLI, spool replay)."""

from __future__ import annotations

from ..errors import Rejected
from ..models import NewMemory
from ..private import strip_private

__all__ = ["strip_private_fields"]


def strip_private_fields(memory: NewMemory) -> None:
    """Strip private spans from content and tags in place; refuse a memory with nothing else."""
    if isinstance(memory.content, str):
        content = strip_private(memory.content)
        if content is not memory.content and not content.strip():
            raise Rejected("content: nothing but <private> text; not stored")
        memory.content = content
    if isinstance(memory.tags, list):
        tags = [strip_private(t) if isinstance(t, str) else t for t in memory.tags]
        memory.tags = [t for t in tags if not isinstance(t, str) or t.strip()]
