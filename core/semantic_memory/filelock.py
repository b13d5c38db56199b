"""An exclusive, non-blocking lock on a file, on POSIX and Windows: which process builds an index
several processes share (the vector channel's ANN index, the PostgreSQL store's keyword mirror).
The lock goes with its process, however that ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


@contextmanager
def exclusive(path: Path) -> Iterator[bool]:
    """Hold the lock on `path` (created if missing) for the block: yields True, or False
    (holding nothing) when another process holds it."""
    handle = open(path, "a+b")  # noqa: SIM115 - open for as long as the lock is held
    try:
        yield _lock(handle)
    finally:
        handle.close()


def _lock(handle: IO[bytes]) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: msvcrt locks a byte range
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True
