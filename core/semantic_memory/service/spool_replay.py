"""The service drains the write spool (spool.py) into its own store: once at start, then every
SCAN_S seconds, so what hooks spooled while it was down, hung or slow lands without waiting for
another hook. Each write goes through /ingest's own code (`ingest_body`), so it is validated,
filtered and deduplicated exactly like a live one: a write that had landed already replays as a
duplicate. The service also ends the hooks' back-off when it starts (backoff.py).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from .. import backoff, spool
from ..config import Settings
from ..errors import one_line
from ..pipeline import MemoryEngine
from .errors import ApiError
from .rest import ingest_body, spool_watch

log = logging.getLogger("semantic_memory.service")

#: Seconds between two looks at the spool (a look is one directory listing).
SCAN_S = 3.0


def drain(engine: MemoryEngine, settings: Settings) -> spool.Replayed:
    """Replay every queued write into `engine`; logs one line when it did anything."""

    def send(path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The service's answer: `spool.replay` keeps the items it refused one by one."""
        if path != "/ingest":
            raise spool.Refused(f"unknown spooled request path {path!r}")
        try:
            return ingest_body(engine, body)
        except ApiError as exc:
            raise spool.Refused(exc.message) from None

    done = spool.replay(settings.spool_path, send)
    if done.sent:  # the store takes writes again: the hooks' slow mark is out of date
        backoff.clear(backoff.slow_path(settings.backoff_path))
    if done.sent or done.rejected:
        log.info("spool: replayed %d write(s)%s%s", done.sent,
                 f", {done.rejected} refused (see `memory-mcp spool list`)"
                 if done.rejected else "",
                 f", {done.left} left for the next try" if done.left else "")
    return done


async def run(engine: MemoryEngine, settings: Settings) -> None:
    """Drain the spool now and every SCAN_S seconds until cancelled, keeping what each look
    found in the spool's watch (rest.SpoolWatch), which /health and /api/stats show. A replay
    that fails (a full or failing disk, a folder or file this user may not use) is logged in
    one line, once until its reason changes or a replay works: it was a 39-line traceback
    every SCAN_S seconds for as long as the disk was full."""
    backoff.clear(settings.backoff_path)
    folder = settings.spool_path
    watch = spool_watch(settings)
    while True:
        try:
            # Release dead replayers' claims first: `pending` leaves claimed writes out, so a
            # spool holding nothing else (a hook or `spool replay` killed mid-write) would
            # never drain. A folder this user may not list or write is said (spool.Stuck), not
            # taken for an empty one or for writes another replayer holds.
            released = spool.release_stale(folder)
            watch.pending = None  # unknown until the folder is listed
            waiting = spool.pending(folder, strict=True)
            watch.pending = len(waiting)
            if released or waiting:
                watch.pending = (await anyio.to_thread.run_sync(drain, engine, settings)).left
            watch.blocked = None
        except Exception as exc:  # noqa: BLE001 - a bad spool must not stop the service
            log.debug("spool: replay failed", exc_info=True)
            reason = str(exc) if isinstance(exc, spool.Stuck) else one_line(exc)
            if reason != watch.blocked:
                log.warning("spool: replay failed (%s); the writes stay queued and are "
                            "tried again every %g s", reason, SCAN_S)
            watch.blocked = reason
        await anyio.sleep(SCAN_S)
