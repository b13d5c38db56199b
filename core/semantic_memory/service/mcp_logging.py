"""MCP log notifications (`notifications/message`) for what an MCP client should see: a memory
the server refused to store, and recall running on the keyword channels (BM25) only because the
configured embedder is unavailable.

The server declares the logging capability by serving `logging/setLevel`. The level a client
sets holds for its own session (over HTTP the `Mcp-Session-Id` header names it; stdio has a
single client), and a message below it is not sent; until a client sets one, `info` and above
go out.

The 2026-07-28 protocol revision deprecates this capability for a per-request opt-in, which the
SDK's `Context.log` applies by itself; clients that connect with the `initialize` handshake
(protocol 2025-11-25 and earlier, which Claude Code, opencode and the MCP Inspector speak) still
use `logging/setLevel`, so it is served on purpose.
"""

from __future__ import annotations

import logging
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, get_args

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams

from ..pipeline import MemoryEngine

# The SDK flags every use of the logging API (see above) with a warning on stderr; it is used
# deliberately here, so only that one warning is silenced.
warnings.filterwarnings("ignore", message="The logging capability is deprecated",
                        category=MCPDeprecationWarning)

log = logging.getLogger("semantic_memory.service")

#: The protocol's levels, least severe first.
LEVELS: tuple[str, ...] = get_args(LoggingLevel)
DEFAULT_LEVEL = "info"
#: The `logger` field of every notification.
LOGGER_NAME = "semantic-memory"
#: Sessions whose level is remembered; the least recently set is dropped beyond that (a session
#: that ended never says so), and falls back to DEFAULT_LEVEL.
MAX_REMEMBERED = 1024


def session_key(headers: Mapping[str, str] | None) -> str | None:
    """Which client a request comes from: its MCP session id; None on stdio (one client)."""
    return headers.get("mcp-session-id") if headers is not None else None


class ClientLog:
    """Per-session log levels (`logging/setLevel`) and the notifications sent under them."""

    def __init__(self) -> None:
        self.levels: OrderedDict[str | None, str] = OrderedDict()

    async def set_level(self, ctx: ServerRequestContext[Any, Any],
                        params: SetLevelRequestParams) -> EmptyResult:
        """The `logging/setLevel` handler (registered on the low-level server)."""
        key = session_key(getattr(ctx.request, "headers", None))
        self.levels[key] = params.level
        self.levels.move_to_end(key)
        while len(self.levels) > MAX_REMEMBERED:
            self.levels.popitem(last=False)
        return EmptyResult()

    def wants(self, key: str | None, level: str) -> bool:
        return LEVELS.index(level) >= LEVELS.index(self.levels.get(key, DEFAULT_LEVEL))

    async def send(self, ctx: Context[Any, Any] | None, level: LoggingLevel, message: str
                   ) -> None:
        """Send `message` to the client of this request when its level lets it through. A
        notification is advice: failing to deliver one never fails the call."""
        if ctx is None:  # called outside a request (a direct call in a test)
            return
        try:
            if self.wants(session_key(ctx.headers), level):
                await ctx.log(level, message, logger_name=LOGGER_NAME)
        except Exception:  # noqa: BLE001 - e.g. the client went away mid-call
            log.debug("could not send an MCP log notification", exc_info=True)


def embedder_fallback(engine: MemoryEngine) -> str | None:
    """Why recall is on the keyword channels only although an embedding model is configured
    (MEMORY_MODEL_PATH), or None when it is not (vectors are on, or none were asked for)."""
    if not engine.settings.model_path:
        return None
    info = engine.embedder_info()
    if info is not None and info.get("active") is not False:
        return None
    reason = (info or {}).get("reason") or "no embedder plugin is installed"
    return (f"vector recall is unavailable ({reason}); recall is falling back to the keyword "
            "(BM25) channels only")
