"""The HTTP edge of the service: how much of a request body is read, for how long, and what an
error looks like on the wire. One ASGI middleware, outermost, so REST and `/mcp` share the rules.

- A body over `MEMORY_MAX_BODY_BYTES` is answered 413, one that has not fully arrived after
  `MEMORY_BODY_TIMEOUT_S` 408 (the MCP SDK reads its bodies with no deadline of its own). The
  inner app is told the client disconnected, and whatever it answers to that is dropped.
- When the answer goes out before the whole body was read (413, 401, 421, …) the rest is read and
  discarded first, up to `DRAIN_LIMIT_BYTES` and the body deadline, and the connection is closed
  after the answer. Closing a socket that still holds unread data makes the kernel send RST; a
  client that writes its whole body before it reads (urllib, most SDKs) would see "connection
  reset" or "broken pipe" instead of the answer.
- Every error answered is JSON with a one-line message and `Content-Type: application/json`:
  an inner app's error in another format (the MCP SDK's plain-text 400/413) becomes
  `{"error": "<its first line>"}`; a JSON error keeps its shape (REST's `{"error", "field"}`,
  the SDK's JSON-RPC `{"error": {"code", "message"}}`, which MCP clients parse) and only a
  multi-line message (the SDK quotes pydantic dumps) is cut to its first line. So is the
  answer to a request a stopping server cuts off (503, not uvicorn's plain-text 500).
- What reads a request before the app it is for (`/mcp` reads a body before the MCP SDK does,
  then hands it on: `read_body`, `replaying`, `header`, `with_media_type_lowered`).
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

import anyio

from ..config import Settings

log = logging.getLogger("semantic_memory.service")

#: Bytes past the point of refusal read and discarded so that the client can read the answer;
#: a client that sends more than this gets its answer and then a closed socket.
DRAIN_LIMIT_BYTES = 64 * 1024 * 1024
#: Longest error message kept from an inner app's error; the error bodies held for rewriting.
MAX_ERROR_CHARS = 300
MAX_ERROR_BODY = 64 * 1024
#: The answer to a request a stopping server cut off before it was answered.
CUT_OFF = ("the service stopped before answering: a write this request had begun may be "
           "stored; one still waiting was not")

Message = dict[str, Any]
DISCONNECT: Message = {"type": "http.disconnect"}


def error_body(status: int, message: str,
               headers: list[tuple[bytes, bytes]] | None = None) -> tuple[Message, Message]:
    """The start and body messages of a `{"error": message}` answer."""
    payload = json.dumps({"error": message}).encode()
    return ({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        *(headers or [])]},
        {"type": "http.response.body", "body": payload, "more_body": False})


def one_line(text: bytes | str, status: int) -> str:
    """The first non-empty line of an error text, or the status phrase when there is none."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:MAX_ERROR_CHARS] or HTTPStatus(status).phrase


def _content_length(value: bytes | None) -> int | None:
    # uvicorn's parser has already refused a malformed or duplicated Content-Length; None here
    # only means "not declared" (or, defensively, unreadable: then the stream decides).
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json" or kind.endswith(b"+json")
    return False


def _one_line_error(data: Any, status: int) -> Any | None:
    """`data` (a JSON error body) with its message cut to one line; None when it already is."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    holder, key = (error, "message") if isinstance(error, dict) else (data, "error")
    message = holder.get(key)
    if not isinstance(message, str) or ("\n" not in message and len(message) <= MAX_ERROR_CHARS):
        return None
    holder[key] = one_line(message, status)
    return data


def error_payload(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes | None:
    """The body an error response should have, or None to send `body` unchanged."""
    if is_json(headers):
        try:
            return _json_bytes(_one_line_error(json.loads(body), status))
        except ValueError:
            pass  # claims JSON but is not: treated as text
    return json.dumps({"error": one_line(body, status)}).encode()


def _json_bytes(data: Any) -> bytes | None:
    return None if data is None else json.dumps(data, ensure_ascii=False).encode()


class BodyGuard:
    """Pure-ASGI middleware: body size and time limits, draining, JSON error bodies."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.limit = settings.max_body_bytes
        self.timeout = settings.body_timeout_s

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await Exchange(self, scope, receive, send).run()


class Exchange:
    """One request and its answer under the guard's rules."""

    def __init__(self, guard: BodyGuard, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.app, self.scope, self._receive, self._send = guard.app, scope, receive, send
        self.limit, self.timeout = guard.limit, guard.timeout
        self.deadline = anyio.current_time() + guard.timeout
        headers = {k.lower(): v for k, v in scope["headers"]}
        self.declared = _content_length(headers.get(b"content-length"))
        self.expect_continue = headers.get(b"expect", b"").lower() == b"100-continue"
        self.body_done = not (self.declared or b"transfer-encoding" in headers)
        self.received = 0
        self.reads = 0  # receive() calls that asked the server for body bytes
        self.failure: tuple[int, str] | None = None
        self.started = False
        self.held: Message | None = None  # an error's start, held until its body is complete
        self.finished = False
        self.error = bytearray()

    def _too_large(self) -> tuple[int, str]:
        return 413, f"request body over the {self.limit}-byte limit (MEMORY_MAX_BODY_BYTES)"

    async def run(self) -> None:
        if self.declared is not None and self.declared > self.limit:
            await self.answer(*self._too_large())
            return
        try:
            await self.app(self.scope, self.receive, self.send)
        except Exception:
            if self.failure is None:
                raise
            # The app choked on the disconnect this guard made up; the guard answers instead.
            log.debug("app error after a %s refusal", self.failure[0], exc_info=True)
        except anyio.get_cancelled_exc_class():
            # uvicorn cancels the requests still running when its graceful shutdown times out,
            # then answers them a plain-text 500 itself; a write's worker thread goes on and
            # may still store it. A JSON 503 says so (the hooks spool it; /ingest recognises
            # the duplicate when it comes back).
            if not self.started:
                await self.answer(503, CUT_OFF)
            raise
        if self.failure is not None and not self.started:
            await self.answer(*self.failure)

    # --- the app's side ------------------------------------------------------------------

    async def receive(self) -> Message:
        if self.failure is not None:
            return DISCONNECT
        if self.body_done:
            return await self._receive()  # e.g. an SSE stream waiting for the disconnect
        self.reads += 1
        message: Message | None = None
        with anyio.CancelScope(deadline=self.deadline):
            message = await self._receive()
        if message is None:
            self.failure = (408, f"request body not received within {self.timeout:g} s "
                                 "(MEMORY_BODY_TIMEOUT_S)")
            return DISCONNECT
        if message["type"] != "http.request":
            self.body_done = True  # the client went away
            return message
        self.received += len(message.get("body", b""))
        if self.received > self.limit:
            self.failure = self._too_large()
            return DISCONNECT
        self.body_done = not message.get("more_body", False)
        return message

    async def send(self, message: Message) -> None:
        if self.finished or (self.failure is not None and not self.started):
            # The app is answering the made-up disconnect (run() answers the client), or the
            # rest of an error body past MAX_ERROR_BODY, or anything after the response ended:
            # the MCP SDK answers a notification 202, then hands it to a session that a leaving
            # client has closed, and its error handler starts a 500 the server would refuse
            # with a traceback ("response already completed").
            if self.finished:
                log.debug("dropped %s after the response ended", message["type"])
            return
        kind = message["type"]
        if kind == "http.response.start":
            message = {**message, "headers": list(message.get("headers", []))}
            if message["status"] >= 400:
                self.held = message  # errors are small: checked whole, then sent
                return
            await self.send_start(message)
        elif kind == "http.response.body" and self.held is not None:
            self.error += message.get("body", b"")
            if len(self.error) > MAX_ERROR_BODY or not message.get("more_body", False):
                await self.send_error(self.held, bytes(self.error))
        elif kind == "http.response.body":
            await self.send_body(message)
        else:
            await self._deliver(message)

    # --- the client's side ---------------------------------------------------------------

    async def send_error(self, start: Message, body: bytes) -> None:
        self.held = None
        payload = error_payload(start["status"], start["headers"], body)
        dropped = {b"content-length", b"transfer-encoding"}
        if payload is not None:
            body, dropped = payload, dropped | {b"content-type"}
        headers = [(k, v) for k, v in start["headers"] if k.lower() not in dropped]
        if payload is not None:
            headers.insert(0, (b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(body)).encode()))
        await self.send_start({**start, "headers": headers})
        await self.send_body({"type": "http.response.body", "body": body, "more_body": False})

    async def answer(self, status: int, message: str,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
        start, body = error_body(status, message, headers)
        await self.send_start(start)
        await self.send_body(body)

    async def send_start(self, message: Message) -> None:
        if not self.body_done:
            # The rest of this body is never parsed as a request: the connection ends here.
            message["headers"].append((b"connection", b"close"))
        self.started = True
        await self._deliver(message)

    async def send_body(self, message: Message) -> None:
        if not message.get("more_body", False):
            await self.drain()  # before the server closes the socket
            self.finished = True
        await self._deliver(message)

    async def _deliver(self, message: Message) -> None:
        """`message` to the server, unless the client has gone. uvicorn marks only the
        request it is reading as disconnected when a client closes its connection: the
        answer to a request pipelined behind it meets the closed socket (uvloop's
        `RuntimeError: unable to perform operation on <TCPTransport closed=True …>`,
        asyncio's OSError), two tracebacks in the log for nobody's fault. Nothing more is
        sent on this exchange."""
        try:
            await self._send(message)
        except (RuntimeError, OSError) as exc:
            if "closed" not in str(exc) and not isinstance(exc, OSError):
                raise
            self.finished = True
            log.debug("client gone before its answer to %s %s: %s", self.scope.get("method"),
                      self.scope.get("path"), exc)

    async def drain(self) -> None:
        """Read and drop what is left of the body, within the drain and time limits."""
        if self.body_done or (self.expect_continue and not self.reads):
            return  # nothing left, or a client that waits for "100 Continue" sent nothing
        if self.declared is not None and self.declared - self.received > DRAIN_LIMIT_BYTES:
            return
        budget = DRAIN_LIMIT_BYTES
        with anyio.CancelScope(deadline=self.deadline):
            while budget > 0:
                message = await self._receive()
                if message["type"] != "http.request":
                    break
                budget -= len(message.get("body", b""))
                if not message.get("more_body", False):
                    self.body_done = True
                    break


# --- reading a request before the app it is for (app.LazyMCP) ------------------------------


async def read_body(receive: Any) -> bytes | None:
    """A request's whole body (BodyGuard bounds its size and time); None when the client
    went away or the guard refused the body (413, 408: the guard answers then)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def header(scope: dict[str, Any], name: bytes) -> str | None:
    """A request header's value (the first, when repeated), or None."""
    return next((value.decode("latin-1") for key, value in scope["headers"]
                 if key.lower() == name), None)


def with_media_type_lowered(scope: dict[str, Any]) -> dict[str, Any]:
    """`scope` with its Content-Type's media type in lower case: media types are
    case-insensitive, and the SDK answered `APPLICATION/JSON` 415."""
    headers = []
    for name, value in scope["headers"]:
        if name.lower() == b"content-type":
            media, sep, parameters = value.partition(b";")
            value = media.strip().lower() + sep + parameters
        headers.append((name, value))
    return {**scope, "headers": headers}


def replaying(body: bytes, receive: Any) -> Any:
    """`receive` for an app that reads the body again: `body` first, then the client's
    further messages (its disconnect, which an event stream waits for)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay
