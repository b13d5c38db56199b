"""The embedding queue: the service computes vectors in the background, so that no write waits
for a model (a compaction flush of 200 chunks, an import of thousands of memories).

With MEMORY_EMBED_BACKGROUND on (the default) the service's writes store and keyword-index a
memory at once and leave `Deferrable` channels (the vector channels) out; this task then embeds
what they have not indexed, BATCH memories at a time in a thread of the write lane
(`Writer.catch_up`, threads.py): woken by each such write, and every RESCAN_S seconds for
memories other processes wrote (a CLI import). The queue is the store itself (live memories
without a vector of the model), so it survives a restart and resumes. Recall uses a vector as
soon as it is written; until then a memory is found by its words.
"""

from __future__ import annotations

import logging

import anyio

from ..config import Settings
from ..pipeline import MemoryEngine
from . import threads

log = logging.getLogger("semantic_memory.service")

#: Memories embedded per step (one `prepare` call, one write transaction).
BATCH = 32
#: Seconds between two looks for work nobody announced (another process's writes).
RESCAN_S = 30.0
#: Seconds to wait after a failed step (a model error) before trying again.
RETRY_S = 10.0


async def run(engine: MemoryEngine, settings: Settings) -> None:
    """Embed the queue until cancelled; returns at once when there is nothing to defer."""
    if not settings.embed_background or not engine.writer.deferrable():
        return
    writer = engine.writer
    writer.defer = True
    writer.queued.set()  # what waited from before the start
    while True:
        with anyio.move_on_after(RESCAN_S):
            while not writer.queued.is_set():
                await anyio.sleep(0.2)
        writer.queued.clear()
        try:
            while await threads.write(writer.catch_up, BATCH):
                await anyio.sleep(0)  # let a cancellation in between two batches
        except Exception as exc:  # noqa: BLE001 - the queue stays; the service keeps serving
            log.warning("embedding queue: %s; retrying in %.0f s", exc, RETRY_S)
            await anyio.sleep(RETRY_S)
