"""Plugin hook calls held to a deadline, as channel searches are (`retrieval.Searcher`).

A third party's `modify_hits`, `format_injection` or `filter_ingest` that hangs held every
recall or write for as long as it hung, and enough of them at once took the service's thread
pool, so that even /api/stats waited. Here each call runs on a daemon worker (`DaemonPool`)
and its caller waits until the deadline only: a call past it is written off (`Overran`), and
the same plugin's hook is reported late (`running_late`) until that call returns, so that the
calls after it do not each wait out the deadline on it too."""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable

from .workers import DaemonPool


class Overran(Exception):
    """A held call gave no answer by its deadline: `started` False when no worker was free to
    start it, else it still runs (and its hook is `running_late` until it returns)."""

    def __init__(self, started: bool) -> None:
        super().__init__("overran its deadline" if started else "no thread was free")
        self.started = started


_pool: DaemonPool | None = None
_pool_lock = threading.Lock()
#: (id of the plugin manager, hook, plugin) of the calls still running past their deadline;
#: the running call holds its manager, so the id names no other one meanwhile
_late: set[tuple[int, str, str]] = set()
_late_lock = threading.Lock()


def _workers() -> DaemonPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            # more than the CPUs: its threads mostly wait, and a queue behind a busy pool
            # would leave a healthy hook out of a concurrent recall
            _pool = DaemonPool(max(8, os.cpu_count() or 2), "plugin-hook")
        return _pool


def running_late(pm: object, hook: str, plugin: str) -> bool:
    """Whether a call of `plugin`'s `hook` on `pm` that overran its deadline still runs."""
    with _late_lock:
        return (id(pm), hook, plugin) in _late


def call_held(pm: object, hook: str, plugin: str, call: Callable[[], Any],
              seconds: float) -> Any:
    """`call()`'s answer (or what it raised) within `seconds`; `Overran` past them. With no
    deadline (inf: a one-off command, whose user can interrupt it) it runs on this thread."""
    if seconds == math.inf:
        return call()
    pool = _workers()
    task = pool.submit(call)
    try:
        return task.future.result(timeout=max(0.0, seconds))
    except FutureTimeout:
        pass
    if task.future.cancel():  # never started: every worker was busy
        raise Overran(started=False)
    if not pool.write_off(task):  # it ended just now
        return task.future.result()
    key = (id(pm), hook, plugin)
    with _late_lock:
        _late.add(key)

    def returned(_: Any) -> None:
        with _late_lock:
            _late.discard(key)

    task.future.add_done_callback(returned)
    raise Overran(started=True)
