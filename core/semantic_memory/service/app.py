"""The one Starlette app: REST sidecar routes plus MCP streamable HTTP at `/mcp`.

Right after start, a worker thread does the first-query work of a recall (`warm_up`), so the
first hook after a restart does not pay it; the hook-facing routes need no pydantic either
(fastparse.py). The MCP SDK takes about a second to import, several times the rest of the
service's start-up, so it is loaded in a worker thread once that warm-up is done (at once when a
`/mcp` request arrives first): `/health` and the REST routes answer meanwhile, and an early
`/mcp` request simply waits until MCP is ready. The SDK's session manager runs inside this
app's lifespan (it must: its task group serves the sessions).

MCP sessions are bounded: one idle for `MEMORY_MCP_SESSION_IDLE_S` is closed by the SDK, and at
`MEMORY_MCP_MAX_SESSIONS` opening another (an `initialize`) closes the least recently used idle
one first (agents that die never close their session, so refusing newcomers would lock live
agents out).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from ..config import Settings
from ..pipeline import MemoryEngine
from . import browse, embed_queue, maintenance, spool_replay
from .auth import GuardMiddleware, sdk_transport_security, send_json
from .edges import BodyGuard, header, is_json, read_body, replaying, with_media_type_lowered
from .mcp_front import fill_here
from .rest import EXCEPTION_HANDLERS, ROUTES

log = logging.getLogger("semantic_memory.service")

#: Seconds after start-up before the MCP SDK is loaded when no /mcp request asks for it sooner
#: (and not before the warm-up is done); keeps the import, which holds the GIL, out of the way
#: of the first /health probes and the first recall.
MCP_LOAD_DELAY_S = 0.3
#: The longest start-up waits for the warm-up before it listens: a BM25-only store is warm by
#: then (its first request pays nothing); an embedder's model load goes on in the background.
WARM_UP_WAIT_S = 0.25
#: What the warm-up recalls: ordinary words (the keyword indexes are read), then a word no
#: memory holds (no confident keyword hit, so an active embedder embeds it too).
WARM_UP_QUERIES = ("where is the project configuration kept", "zqxwarmupvbk")


def warm_up(engine: MemoryEngine) -> None:
    """What the first /recall after a start would pay, done once in a worker thread: the
    engine's channel threads and their SQLite connections, the index pages, the smoothed
    channel costs recall plans with, an active embedder and its vectors. Stores nothing."""
    try:
        for query in WARM_UP_QUERIES:
            hits = engine.recall(query, 10, relevant_only=True)
            engine.injection_block(query, hits, 2_000)
    except Exception as exc:  # noqa: BLE001 - a failed warm-up only means a slower first request
        log.warning("the warm-up recall failed (%s); serving anyway", str(exc).splitlines()[0]
                    if str(exc) else type(exc).__name__)


async def first_of(*events: anyio.Event) -> None:
    """Wait until one of `events` is set."""
    async with anyio.create_task_group() as tg:
        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


SESSION_HEADER = b"mcp-session-id"
PROTOCOL_HEADER = b"mcp-protocol-version"


def request_key(session: str | None, message: Any) -> tuple[str, Any] | None:
    """`id_key` of a request; None for a notification or anything not JSON-RPC."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    return id_key(session, message.get("id"))


def id_key(session: str | None, request_id: Any) -> tuple[str, Any] | None:
    """(session, id) of a request in a session, the id as the SDK correlates it ("7" is 7);
    None outside a session (a request opening one) or for no valid id."""
    from mcp.shared.dispatcher import coerce_request_id

    if session is None or isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return session, coerce_request_id(request_id)


def handshake_era(scope: dict[str, Any]) -> bool:
    """Whether a request is of the protocol's `initialize` handshake era, whose sessions
    the SDK keeps (no protocol version header, or one of that era's); the 2026 protocol's
    requests are served without a session."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    version = header(scope, PROTOCOL_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


#: Sessions closed at the cap are logged together, at most once in this many seconds: clients
#: that open a session per call and never close it made one log line each.
EVICTION_LOG_S = 60.0


class LazyMCP:
    """ASGI endpoint for `/mcp` that forwards to the SDK's app once it is built and running."""

    def __init__(self, engine: MemoryEngine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.state = "starting"  # -> "ready" | "failed"
        self.app: Any = None
        self.manager: Any = None
        self.mcp: Any = None  # the MemoryMCP
        self._ready: anyio.Event | None = None
        self._wanted: anyio.Event | None = None
        #: The requests being answered, (session id, request id as the SDK correlates it) ->
        #: whether it is a write (MemoryMCP.uncancellable).
        self.requests: dict[tuple[str, Any], bool] = {}
        #: Sessions closed at the cap since the last log line about it, and when that was.
        self._evicted = 0
        self._evictions_logged_at = -math.inf

    def _events(self) -> tuple[anyio.Event, anyio.Event]:
        if self._ready is None or self._wanted is None:
            self._ready, self._wanted = anyio.Event(), anyio.Event()
        return self._ready, self._wanted

    def _build(self) -> tuple[Any, Any]:
        from . import schemas  # noqa: F401  (warm the REST request models too)
        from .mcp_tools import build_mcp

        mcp = build_mcp(self.engine)
        app = mcp.streamable_http_app(
            streamable_http_path="/mcp",
            transport_security=sdk_transport_security(),
            max_request_body_size=self.settings.max_body_bytes,
            session_idle_timeout=self.settings.mcp_session_idle_s,
            max_sessions=self.settings.mcp_max_sessions,
        )
        return mcp, app

    async def run(self, warmed: anyio.Event | None = None) -> None:
        """Build the MCP server in a thread (after `warmed`, unless /mcp asks sooner), then
        run its session manager until cancelled."""
        ready, wanted = self._events()
        try:
            with anyio.move_on_after(MCP_LOAD_DELAY_S):
                await wanted.wait()
            if warmed is not None:
                await first_of(warmed, wanted)
            mcp, app = await anyio.to_thread.run_sync(self._build)
            async with mcp.session_manager.run():
                self.app, self.manager, self.mcp = app, mcp.session_manager, mcp
                self.state = "ready"
                ready.set()
                threading.Thread(target=fill_here, args=(self.settings,), daemon=True,
                                 name="proxy-cache").start()
                while True:  # the evictions counted since the last line are said in time
                    await anyio.sleep(EVICTION_LOG_S / 4)
                    self.say_evictions()
        except Exception:
            log.exception("the MCP endpoint could not start; REST keeps working")
            self.state = "failed"
        finally:
            ready.set()
            self.say_evictions(at_exit=True)
            if self.state == "ready":
                self.state = "stopped"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        ready, wanted = self._events()
        wanted.set()
        with anyio.move_on_after(60):
            await ready.wait()
        if self.state != "ready":
            await send_json(send, 503, {"error": f"MCP endpoint is {self.state}"})
            return
        if scope["method"] == "POST":
            await self.post(scope, receive, send)
        else:
            await self.forward(scope, receive, send)

    async def post(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """A message for the SDK, read here first: a body the guard refuses (over
        MEMORY_MAX_BODY_BYTES, chunked) never reaches the SDK, whose read would log a
        ClientDisconnect traceback; what the SDK would answer badly is answered here."""
        body = await read_body(receive)
        if body is None:
            return  # the client went away, or the guard answers
        scope = with_media_type_lowered(scope)
        if not is_json(scope["headers"]):
            await self.forward(scope, replaying(body, receive), send)  # the SDK's 415
            return
        from .mcp_server import read_message

        session = header(scope, SESSION_HEADER)
        message, refused = read_message(body)
        if refused is None:
            refused = self.refusal(scope, session, message)
        if refused is not None:
            await send_json(send, 400, refused)
            return
        if session is not None and self.cancels_a_write(session, message):
            # Not passed on (MemoryMCP.uncancellable): the write is answered as usual.
            log.debug("a cancellation of a write in flight was not passed on")
            await send({"type": "http.response.start", "status": 202, "headers": [
                (b"content-type", b"application/json"), (b"content-length", b"0"),
                (SESSION_HEADER, session.encode("latin-1"))]})
            await send({"type": "http.response.body", "body": b""})
            return
        if session is None and handshake_era(scope):
            await self.make_room()  # an `initialize` (`refusal`): it opens a session
        key = request_key(session, message)
        if key is None:
            await self.forward(scope, replaying(body, receive), send)
            return
        self.requests[key] = self.mcp.uncancellable(message)
        try:
            # Answered once its last byte goes out: a client may send its next request, with
            # the same id, before the SDK's handler has returned.
            await self.forward(scope, replaying(body, receive), send,
                               answered=lambda: self.requests.pop(key, None))
        finally:
            self.requests.pop(key, None)

    def refusal(self, scope: dict[str, Any], session: str | None,
                message: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON-RPC error a valid message is refused with before the SDK sees it, or None:
        a handshake-era request without a session that is no `initialize` (the SDK's answer
        too, but only after it admitted a session for it: at the cap, "503 Too many open
        sessions"), and a request with the id of one in flight in its session (the SDK keys a
        session's answers by id: the second took the first one's place, and one of the two
        was never answered)."""
        from mcp_types import INVALID_REQUEST

        from .mcp_server import error_answer

        if session is None and handshake_era(scope) and message.get("method") != "initialize":
            return error_answer(None, INVALID_REQUEST, "Bad Request: Missing session ID")
        key = request_key(session, message)
        if key is not None and key in self.requests:
            return error_answer(message["id"], INVALID_REQUEST,
                                f"duplicate request id {message['id']!r}: a request with this "
                                "id is still in flight in this session")
        return None

    async def forward(self, scope: dict[str, Any], receive: Any, send: Any,
                      answered: Callable[[], Any] | None = None) -> None:
        """Pass a request to the SDK's app; `answered` runs as its answer's last part goes
        out."""
        started = finished = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started, finished
            started = started or message["type"] == "http.response.start"
            finished = finished or (message["type"] == "http.response.body"
                                    and not message.get("more_body", False))
            if finished and answered is not None:
                answered()
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
            if started and not finished:
                await self._end_stream(send)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The session closed while this request was on its way in: a leaving client's last
            # notification crossing its DELETE, under load. The SDK has answered (202, then an
            # error the body guard drops) and re-raises from its error handler; the client is
            # gone, so this is a debug line, not uvicorn's traceback.
            log.debug("an MCP request met its session already closed; the client went away")
            if not started:
                await send_json(send, 404, {"error": "the MCP session has been closed"})

    def cancels_a_write(self, session: str, message: Any) -> bool:
        """Whether `message` is a `notifications/cancelled` of a write in flight in
        `session`."""
        from .mcp_server import cancelled_id

        key = id_key(session, cancelled_id(message)) if isinstance(message, dict) else None
        return key is not None and self.requests.get(key, False)

    @staticmethod
    async def _end_stream(send: Any) -> None:
        """End a response the SDK started and left open: its GET event stream when the
        service stops (the session manager cancelled under it), which uvicorn logged as
        `ERROR: ASGI callable returned without completing response` at every restart."""
        try:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went first
            pass

    async def make_room(self) -> None:
        """At the session cap, close the least recently used idle session.

        The SDK bounds the count itself but answers 503 at the cap, and has no public way to
        list sessions; this reads its session table (`_server_instances`) and ends a session the
        way the SDK's own idle timeout does (`_discard_session`). Should a later SDK rename them,
        nothing is evicted and the SDK's 503 remains the bound.
        """
        sessions = getattr(self.manager, "_server_instances", None)
        discard = getattr(self.manager, "_discard_session", None)
        if not isinstance(sessions, dict) or discard is None:
            return
        if len(sessions) < self.settings.mcp_max_sessions:
            return
        # An idle session's idle-scope deadline is when its last request ended plus the idle
        # timeout; a session with a request in flight (an open GET stream too) has none (inf).
        idle = [(timer.deadline, sid, transport) for sid, transport in list(sessions.items())
                if (timer := getattr(transport, "idle_scope", None)) is not None
                and timer.deadline != math.inf]
        if not idle:
            return  # every session is busy: the SDK answers 503
        _, sid, transport = min(idle, key=lambda item: item[0])
        self._evicted += 1
        self.say_evictions()
        await discard(sid, transport)

    def say_evictions(self, at_exit: bool = False) -> None:
        """Log the sessions closed at the cap since the last such line: the first at once,
        then at most one line a minute (clients that open a session per call and never close
        it), the rest by `run`'s timer or at shutdown, so the lines add up to every one."""
        now = time.monotonic()
        if self._evicted and (at_exit or now - self._evictions_logged_at >= EVICTION_LOG_S):
            log.info("closed %d least recently used idle MCP session(s) at the cap of %d "
                     "since the last such line (one a minute at most)", self._evicted,
                     self.settings.mcp_max_sessions)
            self._evicted, self._evictions_logged_at = 0, now


def create_app(engine: MemoryEngine, settings: Settings | None = None, *,
               start_up_maintenance: bool = False) -> Starlette:
    """The service app over an open engine (the caller owns and closes the engine). With
    `start_up_maintenance` (the service's start), the lifespan runs maintenance.run in the
    background once the warm-up is done."""
    settings = settings or engine.settings
    lazy = LazyMCP(engine, settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        warmed = anyio.Event()

        async def warm() -> None:
            try:
                await anyio.to_thread.run_sync(warm_up, engine)  # also starts a worker thread
            finally:
                warmed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(warm)
            tg.start_soon(lazy.run, warmed)
            with anyio.move_on_after(WARM_UP_WAIT_S):
                await warmed.wait()
            tg.start_soon(spool_replay.run, engine, settings)
            tg.start_soon(embed_queue.run, engine, settings)
            if start_up_maintenance:
                tg.start_soon(maintenance.run, engine, warmed)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    app = Starlette(
        routes=[*ROUTES, *browse.ROUTES, Route("/mcp", lazy)],
        # BodyGuard outermost: the Guard's early 401/421 answers get the same draining and the
        # JSON error shape as everything else.
        middleware=[Middleware(BodyGuard, settings=settings),
                    Middleware(GuardMiddleware, settings=settings)],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.settings = settings
    app.state.mcp = lazy
    return app
