"""Worker threads for channel searches that may never return.

`concurrent.futures.ThreadPoolExecutor` joins its threads at interpreter exit and on shutdown, so
one plugin search that hangs would hold the service's exit (and every later search queued behind
a busy pool) for as long as it hangs. Here the threads are daemons, and a task its caller has
stopped waiting for is written off: a new worker takes its place, and the stuck one leaves when
(if ever) its task ends."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(eq=False)
class Task:
    """One submitted call; `future` answers it."""

    call: Callable[..., Any]
    args: tuple[Any, ...]
    future: Future[Any] = field(default_factory=Future)
    ended: bool = False
    written_off: bool = False


class DaemonPool:
    """`size` daemon threads running submitted calls in order (started on first use)."""

    def __init__(self, size: int, name: str) -> None:
        self._size, self._name = max(1, size), name
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._closed = False

    def submit(self, call: Callable[..., Any], *args: Any) -> Task:
        with self._lock:
            while self._started < self._size and not self._closed:
                self._start()
        task = Task(call, args)
        self._tasks.put(task)
        return task

    def write_off(self, task: Task) -> bool:
        """Stop counting on `task`'s worker (its caller gave up waiting): another worker takes
        its place. False when the task has ended meanwhile (its answer is there: use it)."""
        with self._lock:
            if task.ended:
                return False
            task.written_off = True
            if not self._closed:
                self._start()
            return True

    def close(self) -> None:
        """Let every idle worker end; a stuck one ends with its task (daemons: never joined)."""
        with self._lock:
            self._closed = True
            for _ in range(self._started):
                self._tasks.put(None)

    def _start(self) -> None:
        self._started += 1
        threading.Thread(target=self._work, name=f"{self._name}-{self._started}",
                         daemon=True).start()

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            if task.future.set_running_or_notify_cancel():
                try:
                    task.future.set_result(task.call(*task.args))
                except BaseException as exc:  # noqa: BLE001 - the caller gets it from the future
                    task.future.set_exception(exc)
            with self._lock:
                task.ended = True
                if task.written_off:  # its replacement already runs
                    return
