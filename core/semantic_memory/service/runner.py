"""Process entry points: `serve_http` (MCP + REST on one port) and `serve_stdio` (MCP only)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..config import ConfigError, Settings
from ..pipeline import MemoryEngine
from ..safety import redaction
from ..stdout_guard import stdout_to_stderr
from .auth import check_bind
from .discovery import (
    DISCOVERY_CHECK_S,
    listening_info,
    other_owner,
    publish,
    reclaim,
    retract,
)
from .log_setup import setup_logging

log = logging.getLogger("semantic_memory.service")


class ServiceError(RuntimeError):
    """The service cannot start (port taken, bad bind); the message is one line."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0 = the OS picks one)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ServiceError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ServiceError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def open_engine(settings: Settings) -> MemoryEngine:
    """Open the store for a service (`Settings.serving`). The start-up maintenance runs once it
    serves, in the background (maintenance.py)."""
    settings.make_data_folder()
    return MemoryEngine(replace(settings, serving=True))


def _graceful_exit(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def serve_http(settings: Settings, *, on_listening: Callable[[dict], None] | None = None) -> int:
    """Serve MCP at /mcp and the REST sidecar from one uvicorn process until SIGINT/SIGTERM.

    Prints `MEMORY_MCP_LISTENING {json}` and writes the discovery file once ready; removes the
    file on the way out. Raises ConfigError / ServiceError (one line) when it cannot start.
    """
    check_bind(settings)
    setup_logging()
    # uvicorn re-raises a caught SIGTERM after its graceful shutdown; this turns that into a
    # clean exit 0 that still runs the clean-up below.
    previous = signal.signal(signal.SIGTERM, _graceful_exit)
    engine = None
    sock = None
    published: list[Any] = []

    stopped = threading.Event()
    keeper: list[threading.Thread] = []

    def started(server: Any) -> None:
        host, port = sock.getsockname()[:2]
        info = listening_info(settings, settings.host or host, port)
        if (other := other_owner(settings)) is not None:
            log.warning("another service (pid %s, %s) serves this db too; this one takes the "
                        "discovery file over, and the other takes it back if this one stops",
                        other.get("pid"), other.get("url"))
        path = publish(settings, info)
        if path is not None:  # kept even when not written yet: it is, once it can be
            published.append(path)
            keeper.append(threading.Thread(target=_keep_discovery, args=(path, info, stopped),
                                           name="discovery", daemon=True))
            keeper[0].start()
        # The store's own words: a PostgreSQL URL without its password, or the SQLite file.
        log.info("serving %s (MCP at %s) with db %s", info["url"], info["mcp_url"],
                 engine.store.location if engine is not None else settings.resolved_db_path)
        if on_listening:
            on_listening(info)

    def stopping() -> None:
        stopped.set()
        for thread in keeper:  # not writing the file again as it is removed
            thread.join(timeout=2)
        while published:
            retract(published.pop())

    try:
        sock = bind_socket(settings.host, settings.port)  # fail fast when the port is taken
        engine = open_engine(settings)
        redaction.warm()  # before the spool's replay: a library that cannot load says so now
        import uvicorn

        from .app import create_app
        from .protocol import guarded_protocol

        class Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started:
                    started(self)

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                stopping()
                # Writes still waiting for another process's write lock give up now (503, not
                # stored): else uvicorn cuts their requests off after the graceful timeout
                # while their threads go on and store them later. (A store without the method,
                # PostgreSQL, keeps its own deadlines.)
                stop_waiting = getattr(engine.store, "stop_waiting", None)
                if stop_waiting is not None:
                    stop_waiting()
                await super().shutdown(sockets)

        config = uvicorn.Config(
            create_app(engine, settings, start_up_maintenance=True), log_level="warning",
            access_log=False, lifespan="on", timeout_graceful_shutdown=3, server_header=False,
            # JSON body on the parser's own 400; header deadline and connection caps (protocol.py)
            http=guarded_protocol(settings),
        )
        Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        stopping()
        if sock is not None:
            sock.close()
        if engine is not None:
            engine.close()
        signal.signal(signal.SIGTERM, previous)
    return 0


def _keep_discovery(path: Any, info: dict[str, Any], stopped: threading.Event) -> None:
    """Until the service stops, write its discovery file again whenever it is gone or names a
    process that is gone (`reclaim`): with two services on one db, the one that stopped last
    removed it, and hooks looked for the other, still serving, at the default port; and one
    that could not be written as the service started (its folder not writable yet, a full
    disk) is written once it can be."""
    while not stopped.wait(DISCOVERY_CHECK_S):
        reclaim(path, info)  # logs what it wrote, or why it could not


def serve_stdio(settings: Settings) -> int:
    """Serve the MCP tools over stdin/stdout. Nothing else is written to stdout."""
    setup_logging()
    with stdout_to_stderr():  # a chatty plugin must not corrupt the protocol stream
        engine = open_engine(settings)
        redaction.warm()
        from ..harness.repo_config import approvals_file
        from .mcp_tools import Workspace, build_mcp

        # An agent starts `--stdio` in its working folder, as it starts the proxy: that
        # repository's .semantic-memory.toml binds the tools, and gives stores their project.
        mcp = build_mcp(engine, Workspace(os.getcwd(), settings.project, approvals_file(settings)))
    import anyio

    from . import maintenance
    from .stdio import claim_stdio

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(maintenance.run, engine)
            await mcp.run_stdio_streams(*claim_stdio())
            tg.cancel_scope.cancel()

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
    return 0


__all__ = ["ConfigError", "ServiceError", "bind_socket", "serve_http", "serve_stdio"]
