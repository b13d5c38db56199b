"""The embedding queue: the service computes vectors in the background, so that no write waits
for a model (a compaction flush of 200 chunks, an import of thousands of memories).

With MEMORY_EMBED_BACKGROUND on (the default) the service's writes store and keyword-index a
memory at once and leave `Deferrable` channels (the vector channels) out, edits and unforgets
included; this task then embeds what they have not indexed, BATCH memories at a time
(`Writer.catch_up`, on a thread of its own: below): woken by each such write, and every
RESCAN_S seconds for memories other processes wrote (a CLI import). The queue is the store
itself (live memories without a vector of the model), so it survives a restart and resumes.
Recall uses a vector as soon as it is written; until then a memory is found by its words.

A batch the model made no vector for (it raised, or answered nothing usable) is tried again
RETRY_S later (longer after failures in a row), or as soon as the model embeds another batch;
a step that raised (a StoreError) is tried again RETRY_S later. Only a text the model refuses
while it embeds others is left for this process's life (`Writer.refused`).

Each batch runs on a daemon thread of its own, not a worker thread the event loop waits for: an
embedder that hangs holds that thread alone, never the service's shutdown nor the process's
exit. A stopping service gives the batch in hand STOP_GRACE_S to end, then leaves it with one
line naming the embedder; nothing acknowledged is lost (its memories are stored, and get their
vectors from the next start's catch-up or `memory-mcp backfill`, as after any failed embedding).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

import anyio

from ..config import Settings
from ..embedders import origin
from ..ingest import EMBED_RETRY_S
from ..pipeline import MemoryEngine

log = logging.getLogger("semantic_memory.service")

#: Memories embedded per step (one `prepare` call, one write transaction).
BATCH = 32
#: Seconds between two looks for work nobody announced (another process's writes).
RESCAN_S = 30.0
#: Seconds to wait after a failed step (a store error), or before a batch the model made no
#: vector for is tried again (`Writer.catch_up`), before trying again.
RETRY_S = EMBED_RETRY_S
#: Seconds a stopping service waits for the batch in hand (its vectors written) before it
#: leaves the batch to its thread (after uvicorn's 3 s for the requests in flight).
STOP_GRACE_S = 2.0
#: How often the queue looks whether its batch's thread has ended.
POLL_S = 0.05


async def run(engine: MemoryEngine, settings: Settings) -> None:
    """Embed the queue until cancelled; returns at once when there is nothing to defer."""
    if not settings.embed_background or not engine.writer.deferrable():
        return
    writer = engine.writer
    writer.defer = True
    writer.queued.set()  # what waited from before the start
    while True:
        retry = writer.retry_in()  # a batch the model failed: back when it is due
        with anyio.move_on_after(RESCAN_S if retry is None else min(RESCAN_S, max(retry, 1.0))):
            while not writer.queued.is_set():
                await anyio.sleep(0.2)
        writer.queued.clear()
        try:
            while await step(engine):
                await anyio.sleep(0)  # let a cancellation in between two batches
        except Exception as exc:  # noqa: BLE001 - the queue stays; the service keeps serving
            log.warning("embedding queue: %s; retrying in %.0f s", exc, RETRY_S)
            await anyio.sleep(RETRY_S)
            writer.queued.set()  # the retry is now, not at the next write or rescan


async def step(engine: MemoryEngine) -> int:
    """One `catch_up` batch on a daemon thread; what it returns. Cancelled, it waits
    STOP_GRACE_S more for the batch, then leaves it running with one line (module docstring)."""
    done: Future[int] = Future()

    def embed() -> None:
        try:
            done.set_result(engine.writer.catch_up(BATCH, RETRY_S))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            done.set_exception(exc)

    started = time.monotonic()
    threading.Thread(target=embed, name="embedding queue", daemon=True).start()
    try:
        while not done.done():
            await anyio.sleep(POLL_S)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_GRACE_S):
            while not done.done():
                await anyio.sleep(POLL_S)
        if not done.done():
            busy = origin(engine.embedder) if engine.embedder is not None else "the embedder"
            log.warning("embedding queue: %s still busy at shutdown (a batch of up to %d "
                        "memories, for %.0f s); left: those memories are stored and get their "
                        "vectors at the next start", busy, BATCH, time.monotonic() - started)
        raise
    return done.result()
