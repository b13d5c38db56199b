"""The service's and the proxy's log set-up: `memory-mcp: ` lines on stderr, and the MCP SDK's
tracebacks for a client that went away made debug lines. Its own module, free of the SDK and
of the service's app, so the stdio proxy imports it without either."""

from __future__ import annotations

import logging
import sys


def setup_logging() -> None:
    """The `semantic_memory` logger on stderr (once), and the SDK's filter."""
    logger = logging.getLogger("semantic_memory")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memory-mcp: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    sdk = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, ClientGoneFilter) for f in sdk.filters):
        sdk.addFilter(ClientGoneFilter())


class ClientGoneFilter(logging.Filter):
    """The MCP SDK logs a full traceback when a client closes its stream or session while a
    reply is on its way (a stream already closed, under load: a race in the SDK's router, see
    modelcontextprotocol/python-sdk#2064). Nothing is lost: the client is gone. Those become
    debug lines without a traceback; every other SDK error is logged as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        import anyio

        exc = record.exc_info[1] if record.exc_info else None
        gone = (anyio.ClosedResourceError, anyio.BrokenResourceError)
        if isinstance(exc, BaseExceptionGroup):
            leaves = exc.exceptions
        else:
            leaves = (exc,)
        if exc is None or not all(isinstance(e, gone) for e in leaves):
            return True
        record.exc_info = record.exc_text = None
        record.msg = f"{record.getMessage()}: the client went away ({type(leaves[0]).__name__})"
        record.args = ()
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
