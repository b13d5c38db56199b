"""The service's start-up maintenance (MEMORY_MAINTENANCE_ON_START): forgotten memories purged,
TTLs applied, in the background once the service is serving.

It used to run before the service listened, as `MemoryEngine.purge` (`memory-mcp purge`): that
merges every FTS index and VACUUMs whenever anything at all went, ~11 s of write lock at 1M
memories for a single forgotten one, and every hook in that window injected nothing. Here the
purge runs in the write lane (threads.py) after the warm-up, and the merge and VACUUM only when
what went is a real share of the store (RECLAIM_SHARE): below it SQLite reuses the freed pages
for new rows and FTS5's automerge folds the deletions in, so there is little to win.
"""

from __future__ import annotations

import logging

import anyio

from ..models import now
from ..pipeline import DAY, MemoryEngine, PurgeReport
from ..stores import StoreError
from . import threads

log = logging.getLogger("semantic_memory.service")

#: Rows a start-up purge must remove, as a share of memories and injection reports, before it
#: merges the indexes and VACUUMs (`memory-mcp purge` always does).
RECLAIM_SHARE = 0.1


def startup_maintenance(engine: MemoryEngine) -> PurgeReport | None:
    """`MemoryEngine.purge`, reclaiming space only when RECLAIM_SHARE of the rows went; None
    when MEMORY_MAINTENANCE_ON_START is off."""
    settings = engine.settings
    if not settings.maintenance_on_start:
        return None
    counts = engine.counts()
    rows = counts["memories"] + counts["forgotten"] + counts["injections"]
    current = now()
    artifacts, injections = settings.ttl_artifact_days, settings.ttl_injection_days
    report = PurgeReport(*engine.store.purge(
        current - artifacts * DAY if artifacts > 0 else None,
        current - injections * DAY if injections > 0 else None, engine.writer.forget_ids))
    removed = report.soft_deleted + report.expired_artifacts + report.expired_injections
    if removed and removed >= RECLAIM_SHARE * rows:
        engine.store.optimize(vacuum=True)
        report.vacuumed = True
    log.info("startup maintenance: %s", report.to_dict())
    return report


async def run(engine: MemoryEngine, after: anyio.Event | None = None) -> None:
    """The start-up maintenance in the write lane, once `after` is set (the warm-up: the first
    hooks' recall comes first). A failure is logged; the service serves on."""
    if after is not None:
        await after.wait()
    try:
        await threads.write(startup_maintenance, engine)
    except StoreError as exc:  # e.g. another process held the write lock all along
        log.warning("start-up maintenance skipped: %s", exc)
    except Exception:  # noqa: BLE001 - maintenance is optional; serving is not
        log.exception("start-up maintenance failed; serving anyway")
