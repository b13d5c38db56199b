"""The worker threads engine calls run in (SQLite is synchronous), in three lanes, so that reads
and `/health` never queue behind writes.

A write may wait up to a minute for SQLite's write lock (another process importing, purging,
VACUUMing: stores/sqlite.py BUSY_TIMEOUT_MS), and it waits in its thread. Sharing anyio's one
pool of 40 threads, 40 such writes (hooks flushing while a CLI import runs) left none for
anything else: `/health` and `/recall` waited for the lock too, the hooks' recall timed out.
Writes therefore get a few threads of their own (one writer at a time gets the lock anyway);
more writes wait as coroutines, which cost nothing and can be cancelled. `/health` has its
own two, reads keep anyio's default pool.

Each lane is one CapacityLimiter per event loop (a RunVar, as anyio keeps its default one).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio
from anyio.lowlevel import RunVar

T = TypeVar("T")

#: Threads for engine calls that write. More than one: a write's work outside the lock
#: (parsing, filters, an inline embedding) overlaps with another's transaction.
WRITE_THREADS = 4
#: Threads for `/health`: probes never wait for a busy read pool.
HEALTH_THREADS = 2

_write_lane: RunVar[anyio.CapacityLimiter] = RunVar("semantic_memory_write_threads")
_health_lane: RunVar[anyio.CapacityLimiter] = RunVar("semantic_memory_health_threads")


def _limiter(lane: RunVar[anyio.CapacityLimiter], threads: int) -> anyio.CapacityLimiter:
    try:
        return lane.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(threads)
        lane.set(limiter)
        return limiter


async def read(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`func(*args, **kwargs)` in a worker thread of the read pool (anyio's default)."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs))


async def write(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`func(*args, **kwargs)` in a worker thread of the write lane: anything that may wait
    for the store's write lock."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs),
                                          limiter=_limiter(_write_lane, WRITE_THREADS))


async def health(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`func(*args, **kwargs)` in a worker thread of `/health`'s own lane."""
    return await anyio.to_thread.run_sync(partial(func, *args, **kwargs),
                                          limiter=_limiter(_health_lane, HEALTH_THREADS))
