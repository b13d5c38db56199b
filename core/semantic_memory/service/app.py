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
LAST_EVENT_ID_HEADER = b"last-event-id"


def without_last_event_id(scope: dict[str, Any]) -> dict[str, Any]:
    """`scope` without a `Last-Event-ID` header. The service keeps no event history (no event
    store), so there is nothing to resume: the spec lets a server ignore the header (it MAY
    replay), and a reconnecting GET then opens a new stream. Passed on, the SDK answered
    nothing and uvicorn sent its plain-text 500."""
    headers = scope["headers"]
    if not any(name.lower() == LAST_EVENT_ID_HEADER for name, _ in headers):
        return scope
    return {**scope, "headers": [(n, v) for n, v in headers
                                 if n.lower() != LAST_EVENT_ID_HEADER]}


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
        cap = settings.mcp_max_sessions
        #: Sessions closed at the cap, and openings refused there, said in counted lines.
        self.evictions = CountedLine(
            "closed %d least recently used idle MCP session(s) at the cap of %d since the "
            "last such line (one a minute at most)", cap)
        self.refusals = CountedLine(
            "refused %d new MCP session(s) (503): all %d sessions were busy (one line a "
            "minute at most)", cap)

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
        try:
            self.admit_with_room(mcp.session_manager)
        except AttributeError as exc:  # a later SDK renamed its session table: its own 503
            log.warning("MCP sessions at the cap are refused (503), not made room for: this "
                        "SDK has no %s", exc.name)
        quiet_sdk_refusals()
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
            await self.forward(without_last_event_id(scope), receive, send)

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
            elif not started:  # uvicorn would answer its plain-text 500
                log.warning("the MCP SDK sent no answer to a %s /mcp", scope["method"])
                await send_json(send, 500, {"error": "the MCP endpoint sent no answer"})
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

    def admit_with_room(self, manager: Any) -> None:
        """Make `manager`'s admission of a new session close the least recently used idle
        session first when the table is at the cap, in one step.

        The SDK bounds the count itself but answers 503 at the cap, and has no public way to
        list sessions. Its `_admit_session` runs under its session creation lock with no await:
        evicting there (a session is forgotten by taking it out of `_server_instances`, as the
        SDK's own `_discard_session` does first; its transport is ended in the SDK's task
        group) makes checking, evicting and admitting atomic. Done before that, outside the
        lock, two `initialize`s crossing each other saw one session to evict between them and
        one got the 503 with idle sessions left. Should a later SDK rename these, the SDK's
        own bound stays: a 503 at the cap (one warning line says so).
        """
        admit = manager._admit_session
        sessions: dict[str, Any] = manager._server_instances
        owners: dict[str, Any] = manager._session_owners

        def admit_session(requestor: Any) -> Any:
            if len(sessions) >= self.settings.mcp_max_sessions:
                try:
                    lru = least_recently_used_idle(sessions)
                except AttributeError:  # a transport without `idle_scope`: the SDK's 503
                    lru = None
                if lru is not None:
                    sid, transport = lru
                    sessions.pop(sid, None)
                    owners.pop(sid, None)
                    manager._task_group.start_soon(manager._discard_session, sid, transport)
                    self.evictions.count()
            transport = admit(requestor)
            if transport is None:  # every session is busy: the SDK answers 503
                self.refusals.count()
            return transport

        manager._admit_session = admit_session

    def say_evictions(self, at_exit: bool = False) -> None:
        """Say the sessions closed, and the openings refused, at the cap since the last such
        lines (`CountedLine`)."""
        self.evictions.say(at_exit)
        self.refusals.say(at_exit)


def least_recently_used_idle(sessions: dict[str, Any]) -> tuple[str, Any] | None:
    """(id, transport) of the session idle the longest, or None when every one is busy. An
    idle session's idle-scope deadline is when its last request ended plus the idle timeout;
    one with a request in flight (an open GET stream too), or not yet serving its opening
    request, has none (inf, or no scope yet)."""
    idle = [(timer.deadline, sid, transport) for sid, transport in sessions.items()
            if (timer := transport.idle_scope) is not None and timer.deadline != math.inf]
    if not idle:
        return None
    _, sid, transport = min(idle, key=lambda item: item[0])
    return sid, transport


class CountedLine:
    """A log line about events that can come in floods (clients that open a session per call
    and never close it), said for the first at once, then at most once a EVICTION_LOG_S with
    how many since; `LazyMCP.run`'s timer and the shutdown say the rest, so the lines add up
    to every event."""

    def __init__(self, template: str, cap: int) -> None:
        self.template, self.cap = template, cap
        self._count = 0
        self._logged_at = -math.inf

    def count(self) -> None:
        self._count += 1
        self.say()

    def say(self, at_exit: bool = False) -> None:
        now = time.monotonic()
        if self._count and (at_exit or now - self._logged_at >= EVICTION_LOG_S):
            log.info(self.template, self._count, self.cap)
            self._count, self._logged_at = 0, now


class RefusalFilter(logging.Filter):
    """Drops the SDK's own warning for each session it refuses at the cap (`Refusing to open a
    new session`, four lines in its rich format, one per refusal): `LazyMCP.refusals` says
    them in one line, at most once a minute."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Refusing to open a new session")


def quiet_sdk_refusals() -> None:
    """RefusalFilter on the SDK's session manager's logger, once."""
    sdk = logging.getLogger("mcp.server.streamable_http_manager")
    if not any(isinstance(f, RefusalFilter) for f in sdk.filters):
        sdk.addFilter(RefusalFilter())


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
