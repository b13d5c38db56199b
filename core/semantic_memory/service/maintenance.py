"""The service's maintenance (MEMORY_MAINTENANCE_ON_START): the memories forgotten over
MEMORY_FORGET_GRACE_DAYS ago purged, TTLs applied, in the background once the service is
serving, and again every MEMORY_MAINTENANCE_INTERVAL_S while it serves (run only at the start,
an artifact past its TTL was recalled and injected for as long as the service ran). The grace is what lets a forget be taken back (`memory-mcp unforget`): purging every
forgotten memory here made an agent's `memory_forget` permanent at the next restart, unseen.

It used to run before the service listened, as `MemoryEngine.purge` (`memory-mcp purge`): that
merges every FTS index and VACUUMs whenever anything at all went, ~11 s of write lock at 1M
memories for a single forgotten one, and every hook in that window injected nothing. Here the
purge runs in the write lane (threads.py) after the warm-up, and the merge and VACUUM only when
what went is a real share of the store (pipeline.STARTUP_RECLAIM_SHARE).
"""

from __future__ import annotations

import logging

import anyio

from ..pipeline import MemoryEngine
from ..stores import StoreError
from . import threads

log = logging.getLogger("semantic_memory.service")


async def run(engine: MemoryEngine, after: anyio.Event | None = None) -> None:
    """`MemoryEngine.startup_maintenance` in the write lane, once `after` is set (the warm-up:
    the first hooks' recall comes first), then every MEMORY_MAINTENANCE_INTERVAL_S. A failure
    is logged; the service serves on, and the next run tries again."""
    if not engine.settings.maintenance_on_start:
        return
    if after is not None:
        await after.wait()
    while True:
        try:
            await threads.write(engine.startup_maintenance)
        except StoreError as exc:  # e.g. another process held the write lock all along
            log.warning("maintenance skipped: %s", exc)
        except Exception:  # noqa: BLE001 - maintenance is optional; serving is not
            log.exception("maintenance failed; serving anyway")
        await anyio.sleep(engine.settings.maintenance_interval_s)
