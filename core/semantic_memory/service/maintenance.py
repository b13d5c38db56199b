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

On a store a team shares, each run first announces this service's grace and TTLs to the store
and takes the longest any of its services announced (`MemoryStore.retention`): a teammate who
set MEMORY_FORGET_GRACE_DAYS=0 purged, at his service's start, what another had forgotten a
minute before and meant to take back within 30 days.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import anyio

from ..pipeline import MemoryEngine, PurgeReport
from ..stores import Retention, StoreError
from . import threads

log = logging.getLogger("semantic_memory.service")


def keep_the_stores_periods(engine: MemoryEngine, own: Retention) -> None:
    """Announce `own` (this service's settings) to the store and give the engine the periods
    the store keeps (`MemoryStore.retention`: `own` on a store of one user, the longest any
    service announced on a shared one), so that its purge, its TTLs and what /api/forgotten
    says of a forgotten memory (`purged_after`) are the store's."""
    periods = engine.store.retention(own)
    if periods != Retention.of(engine.settings):
        if periods != own:
            log.info("maintenance: keeping what this store's services keep longest: %s "
                     "(this service's own settings: %s)", periods.items(), own.items())
        engine.settings = replace(engine.settings, **periods.items())


def maintain(engine: MemoryEngine, own: Retention) -> PurgeReport | None:
    """One maintenance run with the store's periods (`keep_the_stores_periods`)."""
    keep_the_stores_periods(engine, own)
    return engine.startup_maintenance()


async def run(engine: MemoryEngine, after: anyio.Event | None = None) -> None:
    """`maintain` in the write lane, once `after` is set (the warm-up: the first hooks'
    recall comes first), then every MEMORY_MAINTENANCE_INTERVAL_S. A failure is logged; the
    service serves on, and the next run tries again. With maintenance off the service purges
    nothing, but still announces its periods once: its user expects a forget to stay
    restorable that long on a shared store too."""
    own = Retention.of(engine.settings)
    if after is not None:
        await after.wait()
    if not engine.settings.maintenance_on_start:
        try:
            await threads.write(keep_the_stores_periods, engine, own)
        except StoreError as exc:
            log.warning("announcing this service's grace and TTLs failed: %s", exc)
        return
    while True:
        try:
            await threads.write(maintain, engine, own)
        except StoreError as exc:  # e.g. another process held the write lock all along
            log.warning("maintenance skipped: %s", exc)
        except Exception:  # noqa: BLE001 - maintenance is optional; serving is not
            log.exception("maintenance failed; serving anyway")
        await anyio.sleep(engine.settings.maintenance_interval_s)
