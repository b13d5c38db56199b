"""uvicorn's httptools protocol with a JSON body on the 400 its parser sends, and bounds on
slow clients (`guarded_protocol`).

A request the HTTP parser itself refuses (malformed request line, unknown method, a bad or
duplicated Content-Length, Content-Length together with Transfer-Encoding, …) never reaches the
ASGI app, so no middleware can shape that answer: uvicorn writes `400 Invalid HTTP request
received.` as text/plain straight to the socket. Passing this subclass as `uvicorn.Config(http=…)`
is the narrowest hook there is: one overridden method, `send_400_response`, which uvicorn calls
from exactly that place; the parsing, flow control and keep-alive logic stay uvicorn's own.
(httptools is a dependency of the package, so this is the protocol uvicorn would pick anyway.)
"""

from __future__ import annotations

import asyncio
import logging
import resource
import sys
import time
from typing import Any

from httptools import HttpParserCallbackError, HttpParserError
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ..config import Settings
from .edges import error_body, one_line

log = logging.getLogger("semantic_memory.service")

#: File descriptors kept free for the store, logs and the MCP SDK when capping connections.
RESERVED_FDS = 100


class JSONErrorHttpToolsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this inside `except httptools.HttpParserError`: the parser's own reason
        # ("Invalid method encountered", …) is the more useful message.
        reason = sys.exc_info()[1]
        if isinstance(reason, HttpParserCallbackError):
            # Raised in one of uvicorn's callbacks, the reason is "User callback error"; the
            # error behind it, when httptools' own (a URL over 65,535 bytes: "url is too
            # long: …"), says what was wrong. Anything else is uvicorn's, not for the client.
            cause = reason.__context__
            reason = cause if isinstance(cause, HttpParserError) else None
        detail = one_line(str(reason), 400) if reason is not None and str(reason) else ""
        message = f"invalid HTTP request: {detail}" if detail else "invalid HTTP request"
        start, body = error_body(400, message, [(b"connection", b"close")])
        content = [STATUS_LINE[400]]
        for name, value in [*self.server_state.default_headers, *start["headers"]]:
            content += [name, b": ", value, b"\r\n"]
        content += [b"\r\n", body["body"]]
        self.transport.write(b"".join(content))
        self.transport.close()


class GuardedProtocol(JSONErrorHttpToolsProtocol):
    """Slow clients cannot starve the others (slowloris): headers must arrive within
    `header_timeout_s` of a request's first byte (uvicorn has no such deadline), and at most
    `max_connections` connections are open, `max_per_client` from one address. A connection
    over a cap evicts the oldest connection still waiting for its headers (of that address,
    for the per-client cap), and is itself closed only when every open connection is busy
    with a real request, so a flood of half-open requests cannot lock `/health` or a hook out.
    Bodies have their own deadline (edges.BodyGuard); idle keep-alive, uvicorn's."""

    header_timeout_s = 10.0
    max_connections = 1000
    max_per_client = 250

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._waiting_since = time.monotonic()
        self._arm_header_timer()
        self._enforce_caps()

    def _arm_header_timer(self) -> None:
        self._waiting_since = time.monotonic()
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    @property
    def awaiting_headers(self) -> bool:
        return self._header_timer is not None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()  # a keep-alive connection's next request

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def _enforce_caps(self) -> None:
        peer = self.client[0] if self.client else None
        everyone = [c for c in self.connections if isinstance(c, GuardedProtocol)]
        if len(everyone) > self.max_connections:
            self._make_room(everyone, "connections")
        if peer is not None and not self.transport.is_closing():
            mine = [c for c in everyone if c.client and c.client[0] == peer]
            if len(mine) > self.max_per_client:
                self._make_room(mine, f"connections from {peer}")

    def _make_room(self, group: list[GuardedProtocol], what: str) -> None:
        """Close the oldest connection of `group` still waiting for its headers; this one
        when there is none."""
        slow = [c for c in group if c is not self and c.awaiting_headers
                and not c.transport.is_closing()]
        victim = min(slow, key=lambda c: c._waiting_since) if slow else self
        _note_cap(what)
        victim._stop_header_timer()
        victim.transport.close()


_last_cap_note = 0.0


def _note_cap(what: str) -> None:
    """One log line per minute at most while a cap is being hit."""
    global _last_cap_note
    now = time.monotonic()
    if now - _last_cap_note >= 60:
        _last_cap_note = now
        log.warning("too many open %s: closing the slowest (a client holding connections "
                    "open without sending its requests?)", what)


def guarded_protocol(settings: Settings) -> type[GuardedProtocol]:
    """The protocol class uvicorn runs, with this service's bounds. The connection cap stays
    below the process's file-descriptor limit (raised to its hard limit first), so a flood
    never makes `accept` fail for everyone."""
    fds = raise_fd_limit()
    cap = max(min(settings.max_connections, fds - RESERVED_FDS), 16)
    bounds: dict[str, Any] = {"header_timeout_s": settings.header_timeout_s,
                              "max_connections": cap,
                              "max_per_client": min(settings.max_connections_per_client, cap)}
    return type("GuardedProtocol", (GuardedProtocol,), bounds)


def raise_fd_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20
