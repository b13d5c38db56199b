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
import os
import resource
import sys
import time
from typing import Any

from httptools import HttpParserCallbackError, HttpParserError
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .. import peer
from ..config import Settings
from .edges import error_body, one_line

log = logging.getLogger("semantic_memory.service")

#: File descriptors kept free for the store, logs and the MCP SDK when capping connections.
RESERVED_FDS = 100


class JSONErrorHttpToolsProtocol(HttpToolsProtocol):
    def send_error(self, status: int, message: str, close: bool = True) -> None:
        """Answer `{"error": message}` with `status` straight on the socket, and close it
        (`close=False`: end only the answer's side, and let the client close)."""
        start, body = error_body(status, message, [(b"connection", b"close")])
        content = [STATUS_LINE[status]]
        for name, value in [*self.server_state.default_headers, *start["headers"]]:
            content += [name, b": ", value, b"\r\n"]
        content += [b"\r\n", body["body"]]
        self.transport.write(b"".join(content))
        if close:
            self.transport.close()
        elif self.transport.can_write_eof():
            self.transport.write_eof()

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
        self.send_error(400, f"invalid HTTP request: {detail}" if detail
                        else "invalid HTTP request")


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
        self._refused = self._refuse_other_users()
        if not self._refused:
            self._enforce_caps()

    def data_received(self, data: bytes) -> None:
        if not self._refused:  # a refused connection's request is read and dropped
            super().data_received(data)

    def _refuse_other_users(self) -> bool:
        """Answer 403 to a loopback connection another OS user's process opened, before any
        byte of its request is read: on a machine several people use, each one's memories
        are theirs (`peer.owner`; root and an owner the kernel does not tell are let in). The
        request is then read and dropped until the client closes (or the header timeout
        does): closing with it unread would reset the connection, and the answer with it."""
        uid = peer.owner(self.client, self.server) if self.client and self.server else None
        if uid is None or peer.trusted(uid):
            return False
        _note("refusal", "refused a connection from another user's process (uid %d): this "
                         "service serves only its own user (and root)", uid)
        self.send_error(403, f"this service holds another user's memories (it runs as uid "
                             f"{os.getuid()}, the connection is uid {uid}'s): start your own "
                             "(MEMORY_PORT=0 memory-mcp serve, or MEMORY_PLUGIN_AUTOSTART=1)",
                        close=False)
        return True

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
        _note("cap", "too many open %s: closing the slowest (a client holding connections open "
                    "without sending its requests?)", what)
        victim._stop_header_timer()
        victim.transport.close()


#: When each kind of `_note` was last logged.
_last_notes: dict[str, float] = {}


def _note(kind: str, message: str, *args: object) -> None:
    """One log line per minute at most of each kind, while the thing it tells of goes on."""
    now = time.monotonic()
    if now - _last_notes.get(kind, -60.0) >= 60:
        _last_notes[kind] = now
        log.warning(message, *args)


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
