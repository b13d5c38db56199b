"""An in-memory float32 matrix of unit vectors, kept in step with the `memories_vec` table.

Rows are appended as they are written (amortised doubling), replaced in place when a memory is
re-embedded and dropped on a full reload after deletions. Search is one matrix-vector product
over the filled rows plus a partial sort: no per-query BLOB reads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

log = logging.getLogger("semantic_memory.vector")

#: Ids of unusable stored rows already logged by this process (`decode_rows`).
_reported: set[int] = set()


def decode_rows(ids: Sequence[int], blobs: Sequence[bytes], dim: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(ids, an (n, dim) float32 matrix) of stored rows, leaving out each row whose BLOB is not
    `dim` floats or holds NaN or infinity: what an older version stored from a broken
    embedder, where one such row failed every search of the model (a reshape error) or made
    its scores NaN. A row left out is logged once per process; one of the wrong size counts
    as missing (`usable_row`), so the queue and `backfill` embed its memory again."""
    size = 4 * dim
    all_ids = np.asarray(ids, dtype=np.int64)
    usable = np.fromiter((len(b) == size for b in blobs), dtype=bool, count=len(blobs))
    if not usable.all():
        blobs = [b for b, ok in zip(blobs, usable) if ok]
    vecs = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)
    finite = np.isfinite(vecs).all(axis=1)
    if not finite.all():
        vecs = vecs[finite]
        usable[usable] = finite
    if not usable.all():
        fresh = sorted(set(all_ids[~usable].tolist()) - _reported)
        if fresh:
            _reported.update(fresh)
            log.warning("vector: %d stored vectors are not %d floats or hold NaN or infinity "
                        "(memory ids %s); left out of search until they are embedded again",
                        len(fresh), dim, ", ".join(map(str, fresh[:10])))
    return all_ids[usable], vecs


class VectorMatrix:
    #: Whether `top` is cheap enough for every near-duplicate check (StreamExact: no).
    cheap = True

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self.size = 0
        self._row_of: dict[int, int] = {}
        self.lock = threading.RLock()

    def __len__(self) -> int:
        return self.size

    def clear(self) -> None:
        with self.lock:
            self._vecs = np.zeros((0, self.dim), dtype=np.float32)
            self._ids = np.zeros(0, dtype=np.int64)
            self.size = 0
            self._row_of.clear()

    def _grow(self, need: int) -> None:
        capacity = len(self._ids)
        if need <= capacity:
            return
        new_cap = max(need, capacity * 2, 1024)
        vecs = np.zeros((new_cap, self.dim), dtype=np.float32)
        ids = np.zeros(new_cap, dtype=np.int64)
        vecs[: self.size] = self._vecs[: self.size]
        ids[: self.size] = self._ids[: self.size]
        self._vecs, self._ids = vecs, ids

    def upsert(self, ids: list[int], vecs: np.ndarray) -> None:
        """Add rows (or replace the rows of ids already present)."""
        if not ids:
            return
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(ids), self.dim)
        with self.lock:
            fresh = []
            for i, id_ in enumerate(ids):
                row = self._row_of.get(id_)
                if row is None:
                    fresh.append(i)
                else:
                    self._vecs[row] = vecs[i]
            if fresh:
                self._grow(self.size + len(fresh))
                start = self.size
                end = start + len(fresh)
                self._vecs[start:end] = vecs[fresh]
                self._ids[start:end] = [ids[i] for i in fresh]
                for offset, i in enumerate(fresh):
                    self._row_of[ids[i]] = start + offset
                self.size = end

    def remove(self, ids: list[int]) -> None:
        """Drop rows (swap with the last row: O(1) each)."""
        with self.lock:
            for id_ in ids:
                row = self._row_of.pop(id_, None)
                if row is None:
                    continue
                last = self.size - 1
                if row != last:
                    moved = int(self._ids[last])
                    self._vecs[row] = self._vecs[last]
                    self._ids[row] = moved
                    self._row_of[moved] = row
                self.size = last

    def get(self, id_: int) -> np.ndarray | None:
        with self.lock:
            row = self._row_of.get(id_)
            return None if row is None else self._vecs[row].copy()

    def scores(self, query: np.ndarray, ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ids, cosine) for every row, or only for the given memory ids (those present)."""
        with self.lock:
            if ids is None:
                return self._ids[: self.size].copy(), self._vecs[: self.size] @ query
            rows = [self._row_of[i] for i in ids.tolist() if i in self._row_of]
            rows_arr = np.asarray(rows, dtype=np.int64)
            return self._ids[rows_arr], self._vecs[rows_arr] @ query

    def top(self, query: np.ndarray, n: int, ids: np.ndarray | None = None
            ) -> list[tuple[int, float]]:
        """The n best (id, cosine), best first."""
        cand_ids, sims = self.scores(query, ids)
        if len(sims) == 0:
            return []
        n = min(n, len(sims))
        part = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
        order = part[np.argsort(-sims[part], kind="stable")]
        return [(int(cand_ids[i]), float(sims[i])) for i in order]
